//! `sessions_spawn` attachments (spec §3.1): files the requester hands a child, read from the
//! call's `attachments` (at most [`MAX_ATTACHMENTS`] of `{name, content, encoding?,
//! mimeType?}`) and `attachAs.mountPath` (a hint), checked and decoded into
//! [`SpawnAttachments`].
//!
//! Every check that keeps a hostile call harmless happens here, before anything is written:
//! a name is a plain file name (no path separators, no `..`, no control characters, at most
//! [`MAX_ATTACHMENT_NAME_BYTES`] bytes, unique ignoring case), content is UTF-8 text or valid
//! base64, and the files keep under [`MAX_ATTACHMENT_BYTES`] each and
//! [`MAX_TOTAL_ATTACHMENT_BYTES`] together. The runtime writes the files below the target
//! agent's workspace root at [`attachments_rel_dir`] (`attachments/<child uuid>/`), so a name
//! that passed cannot reach outside that directory.
//!
//! This module also builds what the spawn reports about them: the `attachments` object of the
//! accepted result ([`SpawnAttachments::result_json`]) and the line of the child's first
//! message that says where the files are ([`SpawnAttachments::message_line`]).

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// A `sessions_spawn` call that is malformed: `{status:"error", error}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SpawnError {
    message: String,
}

impl SpawnError {
    pub(super) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The tool result.
    pub fn to_json(&self) -> Value {
        json!({"status": "error", "error": self.message})
    }
}

/// The most files one spawn may attach.
pub const MAX_ATTACHMENTS: usize = 50;

/// The largest file, in bytes once decoded (1 MiB).
pub const MAX_ATTACHMENT_BYTES: usize = 1024 * 1024;

/// The most bytes all of a spawn's files may hold together, once decoded (5 MiB).
pub const MAX_TOTAL_ATTACHMENT_BYTES: usize = 5 * 1024 * 1024;

/// The longest file name, in bytes (what common file systems allow).
pub const MAX_ATTACHMENT_NAME_BYTES: usize = 255;

/// The longest `attachAs.mountPath`, in bytes.
pub const MAX_MOUNT_PATH_BYTES: usize = 1024;

/// The workspace directory that holds every child's attachments, one subdirectory each.
pub const ATTACHMENTS_DIR: &str = "attachments";

/// The heading of the first-message line that lists the files.
pub const ATTACHMENTS_LINE_HEADING: &str = "[Subagent Attachments]";

/// How many characters of a rejected name or mount path an error repeats.
const SHOWN_CHARS: usize = 64;

/// Standard base64, with or without its `=` padding.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// One attached file, checked and decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentFile {
    /// A plain file name (trimmed), safe to put below the attachments directory.
    pub name: String,
    /// The content, decoded.
    pub bytes: Vec<u8>,
    /// The `mimeType` the call gave, trimmed, if any (informational).
    pub mime_type: Option<String>,
}

impl AttachmentFile {
    /// The SHA-256 of the content, as lowercase hex.
    pub fn sha256_hex(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }
}

/// A spawn's attachments: at least one file, in the call's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnAttachments {
    /// The files.
    pub files: Vec<AttachmentFile>,
    /// `attachAs.mountPath`, trimmed, if given: where the requester would like the child to
    /// find the files. Only a hint: the files are always in [`attachments_rel_dir`].
    pub mount_path: Option<String>,
}

impl SpawnAttachments {
    /// The bytes of all files together.
    pub fn total_bytes(&self) -> usize {
        self.files.iter().map(|file| file.bytes.len()).sum()
    }

    /// The `attachments` object of the accepted result: `{count, totalBytes, files: [{name,
    /// bytes, sha256}], relDir}`, with `rel_dir` the directory from [`attachments_rel_dir`].
    pub fn result_json(&self, rel_dir: &str) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|file| {
                json!({
                    "name": file.name,
                    "bytes": file.bytes.len(),
                    "sha256": file.sha256_hex(),
                })
            })
            .collect();
        json!({
            "count": self.files.len(),
            "totalBytes": self.total_bytes(),
            "files": files,
            "relDir": rel_dir,
        })
    }

    /// The line added to the child's first message: `[Subagent Attachments] <n> file(s) in
    /// <rel_dir>: <names>`, and the mount path hint when one was given.
    pub fn message_line(&self, rel_dir: &str) -> String {
        let names: Vec<&str> = self.files.iter().map(|file| file.name.as_str()).collect();
        let mut line = format!(
            "{ATTACHMENTS_LINE_HEADING} {} file(s) in {rel_dir}: {}",
            self.files.len(),
            names.join(", ")
        );
        if let Some(mount_path) = &self.mount_path {
            line.push_str(&format!(
                " (the requester's mount path hint: {mount_path}; the files are in {rel_dir})"
            ));
        }
        line
    }
}

/// The directory, relative to the workspace root, that holds the attachments of the child
/// `child_session_key` (`agent:<id>:subagent:<uuid>`): `attachments/<uuid>/`.
pub fn attachments_rel_dir(child_session_key: &str) -> String {
    let uuid = child_session_key
        .rsplit(':')
        .next()
        .unwrap_or(child_session_key);
    format!("{ATTACHMENTS_DIR}/{uuid}/")
}

/// Reads a spawn call's `attachments` and `attachAs`. `None` when it attaches no file (absent,
/// `null` or an empty list); `attachAs` is still checked then. Checks, in order: the shape of
/// `attachAs` and its mount path, the shape and length of `attachments`, then each file's
/// name, encoding, content and size, and last the total size.
pub fn parse_attachments(
    args: &Map<String, Value>,
) -> Result<Option<SpawnAttachments>, SpawnError> {
    let mount_path = parse_mount_path(args.get("attachAs"))?;
    let items = match args.get("attachments") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) if items.is_empty() => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(SpawnError::new(
                "attachments must be an array of {name, content, encoding?, mimeType?} objects.",
            ));
        }
    };
    if items.len() > MAX_ATTACHMENTS {
        return Err(SpawnError::new(format!(
            "Too many attachments: {} given, at most {MAX_ATTACHMENTS} are allowed.",
            items.len()
        )));
    }
    let mut files: Vec<AttachmentFile> = Vec::with_capacity(items.len());
    let mut total_bytes = 0usize;
    for (index, item) in items.iter().enumerate() {
        let file = parse_file(index, item)?;
        let folded = file.name.to_lowercase();
        if let Some(earlier) = files
            .iter()
            .find(|earlier| earlier.name.to_lowercase() == folded)
        {
            return Err(SpawnError::new(format!(
                "Duplicate attachment name {}: it clashes with {} (names are compared ignoring case).",
                shown(&file.name),
                shown(&earlier.name)
            )));
        }
        total_bytes = total_bytes.saturating_add(file.bytes.len());
        files.push(file);
    }
    if total_bytes > MAX_TOTAL_ATTACHMENT_BYTES {
        return Err(SpawnError::new(format!(
            "Attachments total {total_bytes} bytes, over the {MAX_TOTAL_ATTACHMENT_BYTES}-byte limit for all files together."
        )));
    }
    Ok(Some(SpawnAttachments { files, mount_path }))
}

/// `attachAs.mountPath`, checked against the spec's character rule; `None` when absent or
/// blank.
fn parse_mount_path(attach_as: Option<&Value>) -> Result<Option<String>, SpawnError> {
    let attach_as = match attach_as {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(attach_as)) => attach_as,
        Some(_) => {
            return Err(SpawnError::new(
                r#"attachAs must be an object such as {"mountPath": "/data/input"}."#,
            ));
        }
    };
    let mount_path = match attach_as.get("mountPath") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(path)) => path.trim(),
        Some(_) => return Err(SpawnError::new("attachAs.mountPath must be a string.")),
    };
    if mount_path.is_empty() {
        return Ok(None);
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':');
    if !mount_path.chars().all(allowed) {
        return Err(SpawnError::new(format!(
            "Invalid attachAs.mountPath {}: use only letters, digits, '.', '_', '-', '/' and ':'.",
            shown(mount_path)
        )));
    }
    if mount_path.len() > MAX_MOUNT_PATH_BYTES {
        return Err(SpawnError::new(format!(
            "Invalid attachAs.mountPath: it is {} bytes, over the {MAX_MOUNT_PATH_BYTES}-byte limit.",
            mount_path.len()
        )));
    }
    Ok(Some(mount_path.to_owned()))
}

/// The `index`th entry of `attachments`, checked and decoded.
fn parse_file(index: usize, item: &Value) -> Result<AttachmentFile, SpawnError> {
    let Some(item) = item.as_object() else {
        return Err(SpawnError::new(format!(
            "attachments[{index}] must be an object with name and content."
        )));
    };
    let Some(name) = item.get("name").and_then(Value::as_str) else {
        return Err(SpawnError::new(format!(
            "attachments[{index}] needs a name (a string)."
        )));
    };
    let name = name.trim();
    check_name(name)?;
    let encoding = match item.get("encoding") {
        None | Some(Value::Null) => "utf8".to_owned(),
        Some(Value::String(encoding)) => encoding.trim().to_ascii_lowercase(),
        Some(other) => other.to_string(),
    };
    let Some(content) = item.get("content").and_then(Value::as_str) else {
        return Err(SpawnError::new(format!(
            "Attachment {} needs content (a string).",
            shown(name)
        )));
    };
    let bytes = match encoding.as_str() {
        "utf8" => content.as_bytes().to_vec(),
        "base64" => {
            let compact: String = content
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            BASE64.decode(compact).map_err(|err| {
                SpawnError::new(format!(
                    "Attachment {} is not valid base64: {err}",
                    shown(name)
                ))
            })?
        }
        other => {
            return Err(SpawnError::new(format!(
                r#"Invalid encoding {} for attachment {}. Use encoding="utf8" or encoding="base64"."#,
                shown(other),
                shown(name)
            )));
        }
    };
    if bytes.len() > MAX_ATTACHMENT_BYTES {
        return Err(SpawnError::new(format!(
            "Attachment {} is {} bytes, over the {MAX_ATTACHMENT_BYTES}-byte limit per file.",
            shown(name),
            bytes.len()
        )));
    }
    let mime_type = item
        .get("mimeType")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|mime| !mime.is_empty())
        .map(str::to_owned);
    Ok(AttachmentFile {
        name: name.to_owned(),
        bytes,
        mime_type,
    })
}

/// A name that is a plain file name: not empty, not `.`, without `/`, `\`, `..` or control
/// characters, and at most [`MAX_ATTACHMENT_NAME_BYTES`] bytes.
fn check_name(name: &str) -> Result<(), SpawnError> {
    let problem = if name.is_empty() {
        Some("a file name is required".to_owned())
    } else if name.len() > MAX_ATTACHMENT_NAME_BYTES {
        Some(format!(
            "it is {} bytes, over the {MAX_ATTACHMENT_NAME_BYTES}-byte limit",
            name.len()
        ))
    } else if name.chars().any(char::is_control) {
        Some("it contains a control character".to_owned())
    } else if name.contains('/') || name.contains('\\') {
        Some(r#"use a plain file name, without "/" or "\""#.to_owned())
    } else if name == "." || name.contains("..") {
        Some(r#"a file name may not be "." or contain "..""#.to_owned())
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(SpawnError::new(format!(
            "Invalid attachment name {}: {problem}.",
            shown(name)
        ))),
    }
}

/// `text` quoted for an error, control characters escaped, cut after [`SHOWN_CHARS`]
/// characters.
fn shown(text: &str) -> String {
    let mut cut: String = text.chars().take(SHOWN_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CHILD_KEY: &str = "agent:main:subagent:0b3f6c1e-6a43-4d7e-9a53-2f1c8d9e7a10";

    fn parse(args: Value) -> Result<Option<SpawnAttachments>, SpawnError> {
        parse_attachments(args.as_object().expect("an object"))
    }

    fn attachments(args: Value) -> SpawnAttachments {
        parse(args).expect("valid").expect("some files")
    }

    fn error(args: Value) -> String {
        parse(args).expect_err("refused").message().to_owned()
    }

    fn one_file(file: Value) -> Value {
        json!({"attachments": [file]})
    }

    #[test]
    fn utf8_and_base64_files_are_decoded_in_order() {
        let parsed = attachments(json!({"attachments": [
            {"name": "notes.txt", "content": "héllo\n"},
            {"name": " data.bin ", "content": "AAEC/w==", "encoding": "base64", "mimeType": "application/octet-stream"},
            {"name": "unpadded.txt", "content": "aGk", "encoding": "BASE64"},
            {"name": "wrapped.txt", "content": "aGVs\nbG8=", "encoding": "base64"},
            {"name": "plain.md", "content": "", "encoding": "utf8"}
        ]}));
        let names: Vec<&str> = parsed.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "notes.txt",
                "data.bin",
                "unpadded.txt",
                "wrapped.txt",
                "plain.md"
            ]
        );
        assert_eq!(parsed.files[0].bytes, "héllo\n".as_bytes());
        assert_eq!(parsed.files[0].mime_type, None);
        assert_eq!(parsed.files[1].bytes, [0, 1, 2, 255]);
        assert_eq!(
            parsed.files[1].mime_type.as_deref(),
            Some("application/octet-stream")
        );
        assert_eq!(parsed.files[2].bytes, b"hi");
        assert_eq!(parsed.files[3].bytes, b"hello");
        assert!(parsed.files[4].bytes.is_empty());
        assert_eq!(parsed.total_bytes(), 7 + 4 + 2 + 5);
        assert_eq!(parsed.mount_path, None);
    }

    #[test]
    fn no_files_means_no_attachments() {
        assert_eq!(parse(json!({})).expect("fine"), None);
        assert_eq!(parse(json!({"attachments": null})).expect("fine"), None);
        assert_eq!(parse(json!({"attachments": []})).expect("fine"), None);
        assert_eq!(
            parse(json!({"attachments": [], "attachAs": {"mountPath": "/data"}})).expect("fine"),
            None
        );
    }

    #[test]
    fn names_that_are_not_plain_file_names_are_refused() {
        for (name, problem) in [
            ("../x", "without \"/\""),
            ("a/b", "without \"/\""),
            ("/etc/passwd", "without \"/\""),
            ("..\\x", "without \"/\" or \"\\\""),
            ("..", "contain \"..\""),
            ("a..b", "contain \"..\""),
            (".", "may not be \".\""),
            ("", "a file name is required"),
            ("   ", "a file name is required"),
            ("a\u{0}b", "control character"),
            ("line\nbreak", "control character"),
            ("bell\u{7}", "control character"),
            ("c1\u{9b}", "control character"),
        ] {
            let message = error(one_file(json!({"name": name, "content": "x"})));
            assert!(
                message.starts_with("Invalid attachment name "),
                "{name:?}: {message}"
            );
            assert!(message.contains(problem), "{name:?}: {message}");
        }
        let escaped = error(one_file(json!({"name": "a\nb", "content": "x"})));
        assert!(escaped.contains(r#""a\nb""#), "{escaped}");
        let long = "n".repeat(256);
        let message = error(one_file(json!({"name": long, "content": "x"})));
        assert!(
            message.contains("it is 256 bytes, over the 255-byte limit"),
            "{message}"
        );
        assert!(message.len() < 200, "the name is cut: {message}");
        assert!(
            parse(one_file(json!({"name": "n".repeat(255), "content": "x"}))).is_ok(),
            "255 bytes is allowed"
        );
        assert!(
            parse(one_file(json!({"name": ".env", "content": "x"}))).is_ok(),
            "a leading dot is a plain name"
        );
    }

    #[test]
    fn malformed_entries_are_refused() {
        assert_eq!(
            error(json!({"attachments": "a.txt"})),
            "attachments must be an array of {name, content, encoding?, mimeType?} objects."
        );
        assert_eq!(
            error(json!({"attachments": ["a.txt"]})),
            "attachments[0] must be an object with name and content."
        );
        assert_eq!(
            error(json!({"attachments": [{"name": "a.txt", "content": "x"}, {"content": "x"}]})),
            "attachments[1] needs a name (a string)."
        );
        assert_eq!(
            error(one_file(json!({"name": "a.txt"}))),
            r#"Attachment "a.txt" needs content (a string)."#
        );
        assert_eq!(
            error(one_file(json!({"name": "a.txt", "content": 42}))),
            r#"Attachment "a.txt" needs content (a string)."#
        );
    }

    #[test]
    fn duplicate_names_are_refused_ignoring_case() {
        assert_eq!(
            error(json!({"attachments": [
                {"name": "Report.CSV", "content": "a"},
                {"name": "report.csv", "content": "b"}
            ]})),
            r#"Duplicate attachment name "report.csv": it clashes with "Report.CSV" (names are compared ignoring case)."#
        );
    }

    #[test]
    fn only_utf8_and_base64_encodings_are_accepted() {
        assert_eq!(
            error(one_file(
                json!({"name": "a.txt", "content": "x", "encoding": "hex"})
            )),
            r#"Invalid encoding "hex" for attachment "a.txt". Use encoding="utf8" or encoding="base64"."#
        );
        assert!(
            error(one_file(
                json!({"name": "a.txt", "content": "x", "encoding": 7})
            ))
            .starts_with(r#"Invalid encoding "7""#)
        );
    }

    #[test]
    fn invalid_base64_names_the_file() {
        let message = error(one_file(
            json!({"name": "blob.bin", "content": "not base64!", "encoding": "base64"}),
        ));
        assert!(
            message.starts_with(r#"Attachment "blob.bin" is not valid base64: "#),
            "{message}"
        );
    }

    #[test]
    fn at_most_fifty_files() {
        let files = |count: usize| -> Value {
            (0..count)
                .map(|index| json!({"name": format!("f{index}.txt"), "content": "x"}))
                .collect()
        };
        assert_eq!(
            attachments(json!({ "attachments": files(MAX_ATTACHMENTS) }))
                .files
                .len(),
            50
        );
        assert_eq!(
            error(json!({ "attachments": files(MAX_ATTACHMENTS + 1) })),
            "Too many attachments: 51 given, at most 50 are allowed."
        );
    }

    #[test]
    fn a_file_over_one_mebibyte_is_refused_with_its_size() {
        let at_limit = "x".repeat(MAX_ATTACHMENT_BYTES);
        assert!(parse(one_file(json!({"name": "ok.txt", "content": at_limit}))).is_ok());
        let over = "x".repeat(MAX_ATTACHMENT_BYTES + 1);
        assert_eq!(
            error(one_file(json!({"name": "big.txt", "content": over}))),
            r#"Attachment "big.txt" is 1048577 bytes, over the 1048576-byte limit per file."#
        );
        let decoded_over = BASE64.encode(vec![0u8; MAX_ATTACHMENT_BYTES + 3]);
        assert_eq!(
            error(one_file(
                json!({"name": "big.bin", "content": decoded_over, "encoding": "base64"})
            )),
            r#"Attachment "big.bin" is 1048579 bytes, over the 1048576-byte limit per file."#
        );
    }

    #[test]
    fn files_over_five_mebibytes_together_are_refused_with_the_total() {
        let full = "x".repeat(MAX_ATTACHMENT_BYTES);
        let mut items: Vec<Value> = (0..5)
            .map(|index| json!({"name": format!("part{index}.txt"), "content": full}))
            .collect();
        assert_eq!(
            attachments(json!({ "attachments": items.clone() })).total_bytes(),
            MAX_TOTAL_ATTACHMENT_BYTES
        );
        items.push(json!({"name": "one-more.txt", "content": "!"}));
        assert_eq!(
            error(json!({ "attachments": items })),
            "Attachments total 5242881 bytes, over the 5242880-byte limit for all files together."
        );
    }

    #[test]
    fn the_mount_path_is_a_checked_hint() {
        let file = json!({"name": "a.txt", "content": "x"});
        let parsed = attachments(
            json!({"attachments": [file.clone()], "attachAs": {"mountPath": " /mnt/in_1/data-2.v3:ro "}}),
        );
        assert_eq!(parsed.mount_path.as_deref(), Some("/mnt/in_1/data-2.v3:ro"));
        assert_eq!(
            attachments(json!({"attachments": [file.clone()], "attachAs": {"mountPath": ""}}))
                .mount_path,
            None
        );
        for bad in [
            "/mnt/my files",
            "/mnt/$HOME",
            "/mnt/a\u{0}b",
            "C:\\data",
            "/tmp/é",
        ] {
            let message =
                error(json!({"attachments": [file.clone()], "attachAs": {"mountPath": bad}}));
            assert!(
                message.starts_with("Invalid attachAs.mountPath "),
                "{bad:?}: {message}"
            );
            assert!(
                message.ends_with("use only letters, digits, '.', '_', '-', '/' and ':'."),
                "{message}"
            );
        }
        assert!(
            error(json!({"attachAs": {"mountPath": "bad path"}}))
                .starts_with("Invalid attachAs.mountPath"),
            "checked even without files"
        );
        assert_eq!(
            error(json!({"attachments": [file.clone()], "attachAs": "/data"})),
            r#"attachAs must be an object such as {"mountPath": "/data/input"}."#
        );
        assert_eq!(
            error(json!({"attachments": [file.clone()], "attachAs": {"mountPath": 3}})),
            "attachAs.mountPath must be a string."
        );
        let long = format!("/{}", "a".repeat(MAX_MOUNT_PATH_BYTES));
        assert_eq!(
            error(json!({"attachments": [file], "attachAs": {"mountPath": long}})),
            "Invalid attachAs.mountPath: it is 1025 bytes, over the 1024-byte limit."
        );
    }

    #[test]
    fn the_directory_is_named_after_the_child() {
        assert_eq!(
            attachments_rel_dir(CHILD_KEY),
            "attachments/0b3f6c1e-6a43-4d7e-9a53-2f1c8d9e7a10/"
        );
    }

    #[test]
    fn the_result_lists_each_file_with_its_size_and_digest() {
        let parsed = attachments(json!({"attachments": [
            {"name": "a.txt", "content": "abc"},
            {"name": "b.bin", "content": "AAEC", "encoding": "base64"}
        ]}));
        let rel_dir = attachments_rel_dir(CHILD_KEY);
        assert_eq!(
            parsed.result_json(&rel_dir),
            json!({
                "count": 2,
                "totalBytes": 6,
                "files": [
                    {
                        "name": "a.txt",
                        "bytes": 3,
                        "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
                    },
                    {
                        "name": "b.bin",
                        "bytes": 3,
                        "sha256": "ae4b3280e56e2faf83f414a6e3dabe9d5fbe18976544c05fed121accb85b53fc"
                    }
                ],
                "relDir": "attachments/0b3f6c1e-6a43-4d7e-9a53-2f1c8d9e7a10/"
            })
        );
    }

    #[test]
    fn the_message_line_says_where_the_files_are() {
        let mut parsed = attachments(json!({"attachments": [
            {"name": "a.txt", "content": "abc"},
            {"name": "b.csv", "content": "1,2"}
        ]}));
        let rel_dir = attachments_rel_dir(CHILD_KEY);
        assert_eq!(
            parsed.message_line(&rel_dir),
            "[Subagent Attachments] 2 file(s) in attachments/0b3f6c1e-6a43-4d7e-9a53-2f1c8d9e7a10/: a.txt, b.csv"
        );
        parsed.mount_path = Some("/data/in".to_owned());
        assert_eq!(
            parsed.message_line(&rel_dir),
            "[Subagent Attachments] 2 file(s) in attachments/0b3f6c1e-6a43-4d7e-9a53-2f1c8d9e7a10/: a.txt, b.csv (the requester's mount path hint: /data/in; the files are in attachments/0b3f6c1e-6a43-4d7e-9a53-2f1c8d9e7a10/)"
        );
    }
}
