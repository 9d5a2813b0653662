//! Secrets and one-time codes from the operating system's randomness (`/dev/urandom`).

use std::io::Read;

/// `count` random bytes.
pub fn random_bytes(count: usize) -> std::io::Result<Vec<u8>> {
    let mut buffer = vec![0u8; count];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(buffer)
}

/// `bytes` random bytes as lowercase hex.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    Ok(random_bytes(bytes)?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
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
}
