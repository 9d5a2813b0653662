//! The id and randomness port: secrets, one-time codes and UUIDs from the operating system's
//! randomness (`getrandom`), so every crate draws from one source.

/// `count` random bytes from the operating system.
pub fn random_bytes(count: usize) -> Result<Vec<u8>, getrandom::Error> {
    let mut buffer = vec![0u8; count];
    getrandom::fill(&mut buffer)?;
    Ok(buffer)
}

/// `bytes` random bytes as lowercase hex.
pub fn random_hex(bytes: usize) -> Result<String, getrandom::Error> {
    Ok(random_bytes(bytes)?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A fresh random UUID (version 4), hyphenated lowercase.
pub fn new_uuid() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(uuid_from_bytes(bytes))
}

/// `bytes` as a UUID version 4 string (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`): the
/// version and variant bits are set, the rest kept. For ids derived from a hash, so a redone
/// step gets the same id.
pub fn uuid_from_bytes(bytes: [u8; 16]) -> String {
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_has_two_digits_per_byte_and_differs_between_calls() {
        let first = random_hex(16).unwrap();
        assert_eq!(first.len(), 32);
        assert!(first.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(first, random_hex(16).unwrap());
    }

    #[test]
    fn uuids_carry_version_4_and_the_rfc_variant() {
        assert_eq!(
            uuid_from_bytes([0xff; 16]),
            "ffffffff-ffff-4fff-bfff-ffffffffffff"
        );
        assert_eq!(
            uuid_from_bytes([0; 16]),
            "00000000-0000-4000-8000-000000000000"
        );
        let fresh = new_uuid().unwrap();
        assert_eq!(fresh.len(), 36);
        assert_eq!(fresh.as_bytes()[14], b'4');
        assert_ne!(fresh, new_uuid().unwrap());
    }
}
