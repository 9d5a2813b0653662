//! Short-lived credentials that let one node read its own exec queue directly, so no function
//! runs while nodes wait: what a node host receives, and how long they live.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Shortest lifetime vended credentials get (STS's minimum).
pub const MIN_CREDENTIAL_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Longest lifetime vended credentials get: a leaked set is useless within the hour.
pub const MAX_CREDENTIAL_LIFETIME: Duration = Duration::from_secs(60 * 60);

/// The lifetime to ask for when `requested` is wanted: whole seconds within
/// [`MIN_CREDENTIAL_LIFETIME`]..=[`MAX_CREDENTIAL_LIFETIME`].
pub fn credential_lifetime(requested: Duration) -> Duration {
    Duration::from_secs(requested.as_secs()).clamp(MIN_CREDENTIAL_LIFETIME, MAX_CREDENTIAL_LIFETIME)
}

/// Temporary credentials for one node queue. `Debug` shows only the access key id.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueCredentials {
    /// Access key id (not secret on its own).
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
    /// Session token.
    pub session_token: String,
    /// When they stop working (Unix milliseconds).
    pub expires_at_ms: u64,
}

impl std::fmt::Debug for QueueCredentials {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("QueueCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &"<redacted>")
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_clamped_to_fifteen_minutes_through_an_hour() {
        assert_eq!(credential_lifetime(Duration::ZERO), MIN_CREDENTIAL_LIFETIME);
        assert_eq!(
            credential_lifetime(Duration::from_secs(1_800)),
            Duration::from_secs(1_800)
        );
        assert_eq!(
            credential_lifetime(Duration::from_millis(1_800_999)),
            Duration::from_secs(1_800)
        );
        assert_eq!(
            credential_lifetime(Duration::from_secs(86_400)),
            MAX_CREDENTIAL_LIFETIME
        );
    }

    #[test]
    fn debug_output_never_shows_the_secret_or_the_token() {
        let credentials = QueueCredentials {
            access_key_id: "ASIAEXAMPLE".into(),
            secret_access_key: "very-secret".into(),
            session_token: "token-value".into(),
            expires_at_ms: 1,
        };
        let shown = format!("{credentials:?}");
        assert!(shown.contains("ASIAEXAMPLE"));
        assert!(!shown.contains("very-secret") && !shown.contains("token-value"));
    }
}
