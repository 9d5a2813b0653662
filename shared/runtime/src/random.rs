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

/// `bytes` as a UUID version 4 string (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`): the
/// version and variant bits are set, the rest kept.
pub fn uuid_v4(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
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
        let id = uuid_v4([0xff; 16]);
        assert_eq!(id, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
    }
}
