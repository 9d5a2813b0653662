//! The clock port: wall-clock time, injectable so tests are deterministic. The runtime, the node
//! host and the CLI all read time through [`Clock`]; [`SystemClock`] is the real one and
//! [`crate::testing::ManualClock`] the one tests set by hand.

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        system_now_ms()
    }
}

/// Milliseconds since the Unix epoch by the system clock (0 before 1970): for the few places
/// that stamp a record outside any injected [`Clock`].
pub fn system_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_is_past_2026() {
        // 2026-01-01T00:00:00Z
        assert!(SystemClock.now_ms() > 1_767_225_600_000);
    }
}
