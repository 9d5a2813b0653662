//! The memory of the message ids a session has accepted (turn starts, follow-ups, cron runs,
//! announcements, agent-to-agent steps), so a redelivered event is recognised and never
//! taken twice.
//!
//! It is read with the session's meta on every turn, so it is kept small: each id as the
//! first 64 bits of its SHA-256 (a new id is taken for a seen one with a chance of about
//! 2^-50 per message while the memory is full), the newest [`SEEN_CAPACITY`] of them, stored
//! as one base64 string of big-endian hashes. That is at most 2,733 bytes of JSON however
//! long the ids are, instead of the ids themselves. Metas written before this format (a list
//! of id strings) are read and hashed.

use std::collections::VecDeque;

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// How many message ids a session remembers.
pub const SEEN_CAPACITY: usize = 256;

/// The newest [`SEEN_CAPACITY`] accepted message ids, hashed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeenMessages {
    hashes: VecDeque<u64>,
}

impl SeenMessages {
    /// Remembers `id`, forgetting the oldest beyond the capacity.
    pub fn remember(&mut self, id: &str) {
        self.hashes.push_back(hash_id(id));
        while self.hashes.len() > SEEN_CAPACITY {
            self.hashes.pop_front();
        }
    }

    /// True when `id` was remembered (and not yet forgotten).
    pub fn contains(&self, id: &str) -> bool {
        let wanted = hash_id(id);
        self.hashes.contains(&wanted)
    }

    /// How many ids are remembered.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// True when no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }
}

/// The first 64 bits of the SHA-256 of `id`: stable across processes and versions.
fn hash_id(id: &str) -> u64 {
    let digest = Sha256::digest(id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

impl Serialize for SeenMessages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self
            .hashes
            .iter()
            .flat_map(|hash| hash.to_be_bytes())
            .collect();
        serializer.serialize_str(&STANDARD_NO_PAD.encode(bytes))
    }
}

impl<'de> Deserialize<'de> for SeenMessages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SeenVisitor)
    }
}

/// Reads the packed string, or the list of ids older metas hold.
struct SeenVisitor;

impl<'de> Visitor<'de> for SeenVisitor {
    type Value = SeenMessages;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("base64 message-id hashes, or a list of message ids")
    }

    fn visit_str<E: de::Error>(self, packed: &str) -> Result<SeenMessages, E> {
        let bytes = STANDARD_NO_PAD
            .decode(packed)
            .map_err(|err| E::custom(format!("seen message ids: {err}")))?;
        if bytes.len() % 8 != 0 {
            return Err(E::custom("seen message ids: not a whole number of hashes"));
        }
        let mut seen = SeenMessages::default();
        for chunk in bytes.chunks_exact(8) {
            let mut hash = [0u8; 8];
            hash.copy_from_slice(chunk);
            seen.hashes.push_back(u64::from_be_bytes(hash));
        }
        while seen.hashes.len() > SEEN_CAPACITY {
            seen.hashes.pop_front();
        }
        Ok(seen)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut ids: A) -> Result<SeenMessages, A::Error> {
        let mut seen = SeenMessages::default();
        while let Some(id) = ids.next_element::<String>()? {
            seen.remember(&id);
        }
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_newest_ids_and_forgets_the_oldest() {
        let mut seen = SeenMessages::default();
        for n in 0..(SEEN_CAPACITY + 10) {
            seen.remember(&format!("telegram:-1001234567890:{n}"));
        }
        assert_eq!(seen.len(), SEEN_CAPACITY);
        assert!(!seen.contains("telegram:-1001234567890:9"));
        assert!(seen.contains("telegram:-1001234567890:10"));
        assert!(seen.contains(&format!("telegram:-1001234567890:{}", SEEN_CAPACITY + 9)));
        assert!(!seen.contains("telegram:-1001234567890:100000"));
    }

    #[test]
    fn the_stored_form_is_bounded_whatever_the_ids_and_round_trips() {
        let mut seen = SeenMessages::default();
        for n in 0..1_000 {
            seen.remember(&format!("{}-{n}", "a-very-long-message-id".repeat(8)));
        }
        let json = serde_json::to_string(&seen).expect("serializes");
        assert!(json.len() <= 2_733, "{}", json.len());
        let back: SeenMessages = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, seen);
    }

    #[test]
    fn a_meta_of_the_older_format_is_read_and_hashed() {
        let back: SeenMessages =
            serde_json::from_str(r#"["m-1", "cron:J:1700000000000"]"#).expect("parses");
        assert!(back.contains("m-1"));
        assert!(back.contains("cron:J:1700000000000"));
        assert!(!back.contains("m-2"));
    }

    #[test]
    fn a_damaged_packed_form_is_an_error_not_a_forgetting() {
        assert!(serde_json::from_str::<SeenMessages>(r#""not base64!""#).is_err());
        assert!(serde_json::from_str::<SeenMessages>(r#""AAAA""#).is_err());
    }
}
