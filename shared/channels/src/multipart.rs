//! `multipart/form-data` bodies (RFC 7578) for the platforms' file uploads: text fields and
//! files, framed by a boundary derived from the content so it cannot occur in it.

use sha2::{Digest, Sha256};

/// One part of a form.
#[derive(Debug)]
struct Part {
    name: String,
    file: Option<(String, String)>,
    bytes: Vec<u8>,
}

/// A form being built; [`Form::finish`] gives the `Content-Type` and the body.
#[derive(Debug, Default)]
pub(crate) struct Form {
    parts: Vec<Part>,
}

/// A header parameter value: quotes and line breaks would end the header, so they are
/// percent-encoded as browsers do.
fn quoted(value: &str) -> String {
    value
        .replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

impl Form {
    /// An empty form.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds the text field `name`.
    pub(crate) fn text(mut self, name: &str, value: &str) -> Self {
        self.parts.push(Part {
            name: name.to_owned(),
            file: None,
            bytes: value.as_bytes().to_vec(),
        });
        self
    }

    /// Adds the file field `name`: `bytes` named `filename`, of type `mime`.
    pub(crate) fn file(mut self, name: &str, filename: &str, mime: &str, bytes: &[u8]) -> Self {
        self.parts.push(Part {
            name: name.to_owned(),
            file: Some((filename.to_owned(), mime.to_owned())),
            bytes: bytes.to_vec(),
        });
        self
    }

    /// The `Content-Type` header (with the boundary) and the encoded body.
    pub(crate) fn finish(self) -> (String, Vec<u8>) {
        let mut digest = Sha256::new();
        for part in &self.parts {
            digest.update(part.name.as_bytes());
            digest.update(&part.bytes);
        }
        let boundary = format!("clawless-{}", hex::encode(digest.finalize()));
        let mut body = Vec::new();
        for part in self.parts {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            let disposition = match &part.file {
                Some((filename, mime)) => format!(
                    "Content-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\n\
                     Content-Type: {}\r\n\r\n",
                    quoted(&part.name),
                    quoted(filename),
                    quoted(mime)
                ),
                None => format!(
                    "Content-Disposition: form-data; name=\"{}\"\r\n\r\n",
                    quoted(&part.name)
                ),
            };
            body.extend_from_slice(disposition.as_bytes());
            body.extend_from_slice(&part.bytes);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        (format!("multipart/form-data; boundary={boundary}"), body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_files_are_framed_by_the_boundary() {
        let (content_type, body) = Form::new()
            .text("chat_id", "42")
            .file("photo", "a\"b.png", "image/png", &[0, 1, 2])
            .finish();
        let boundary = content_type
            .strip_prefix("multipart/form-data; boundary=")
            .expect("boundary");
        let mut expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n42\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"photo\"; \
             filename=\"a%22b.png\"\r\nContent-Type: image/png\r\n\r\n"
        )
        .into_bytes();
        expected.extend_from_slice(&[0, 1, 2]);
        expected.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        assert_eq!(body, expected);
    }
}
