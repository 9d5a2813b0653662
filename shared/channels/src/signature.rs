//! `X-Clawless-Signature: sha256=<hex HMAC-SHA256 of the raw body>`, used both ways: to check
//! webhook calls into clawless and to sign replies out of it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Header carrying the signature.
pub const SIGNATURE_HEADER: &str = "x-clawless-signature";

const SCHEME: &str = "sha256=";

/// Why a signature was not accepted. Every variant maps to HTTP 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No signature header.
    #[error("missing X-Clawless-Signature header")]
    Missing,
    /// The header is not `sha256=<64 hex digits>`.
    #[error("malformed X-Clawless-Signature header (expected sha256=<hex>)")]
    Malformed,
    /// The signature does not match the body.
    #[error("signature does not match the body")]
    Mismatch,
}

/// The header value for `body` signed with `secret`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    format!(
        "{SCHEME}{}",
        hex::encode(mac(secret, body).finalize().into_bytes())
    )
}

/// Checks `header` against `body`, in constant time.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?.trim();
    let digest = header
        .strip_prefix(SCHEME)
        .or_else(|| {
            // Accept `SHA256=` too: the scheme name is case-insensitive, the digest is not text.
            header
                .get(..SCHEME.len())
                .filter(|scheme| scheme.eq_ignore_ascii_case(SCHEME))
                .map(|_| &header[SCHEME.len()..])
        })
        .ok_or(SignatureError::Malformed)?;
    if digest.len() != 64 {
        return Err(SignatureError::Malformed);
    }
    let expected = hex::decode(digest).map_err(|_| SignatureError::Malformed)?;
    mac(secret, body)
        .verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

fn mac(secret: &[u8], body: &[u8]) -> Hmac<Sha256> {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(body);
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_round_trips_and_matches_a_known_vector() {
        // RFC 4231 test case 2.
        let header = sign(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            header,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            verify(b"Jefe", b"what do ya want for nothing?", Some(&header)),
            Ok(())
        );
    }

    #[test]
    fn tampered_missing_or_malformed_signatures_are_refused() {
        let body = br#"{"text":"hi"}"#;
        let good = sign(b"s3cret", body);
        assert_eq!(
            verify(b"s3cret", b"{\"text\":\"hi!\"}", Some(&good)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(b"other", body, Some(&good)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify(b"s3cret", body, None), Err(SignatureError::Missing));
        for bad in [
            "",
            "sha256=",
            "sha1=abcd",
            "sha256=zz",
            &good[7..],
            &format!("{good}00"),
        ] {
            assert_eq!(
                verify(b"s3cret", body, Some(bad)),
                Err(SignatureError::Malformed),
                "{bad:?}"
            );
        }
        let upper = good.to_uppercase();
        // Upper-case hex decodes to the same bytes.
        assert_eq!(verify(b"s3cret", body, Some(&upper)), Ok(()));
    }
}
