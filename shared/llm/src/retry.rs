//! Retries with exponential backoff and jitter around any [`ModelProvider`], honouring the
//! provider's `retry-after` up to a cap. Waiting goes through a [`Sleeper`] so tests can
//! record the delays instead of sleeping.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_base::model::{ModelError, ModelProvider, ModelRequest, ModelResponse};

/// Waits between attempts. Injected so tests do not really wait.
#[async_trait]
pub trait Sleeper: Send + Sync + fmt::Debug {
    /// Waits for `duration`.
    async fn sleep(&self, duration: Duration);
}

/// The real clock: `tokio::time::sleep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

#[async_trait]
impl Sleeper for TokioSleeper {
    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retries).
    pub max_attempts: u32,
    /// Delay before the first retry; doubles with each further retry.
    pub base_delay: Duration,
    /// Upper bound of the exponential delay.
    pub max_delay: Duration,
    /// Upper bound of a server-requested `retry-after` wait.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// A policy allowing `max_retries` retries after the first attempt.
    pub fn with_max_retries(max_retries: u32) -> Self {
        Self {
            max_attempts: max_retries.saturating_add(1),
            ..Self::default()
        }
    }

    /// The wait before retry number `retry` (1-based) after `error`.
    ///
    /// A `retry-after` from the server is honoured exactly, capped at `max_retry_after`.
    /// Otherwise the delay is `base_delay · 2^(retry-1)` capped at `max_delay`, of which the
    /// upper half is random ("equal jitter"), so clients that failed together spread out.
    pub fn delay(&self, retry: u32, error: &ModelError) -> Duration {
        if let ModelError::RateLimited {
            retry_after: Some(after),
            ..
        } = error
        {
            return (*after).min(self.max_retry_after);
        }
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        let ceiling = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let half = ceiling / 2;
        let jitter_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(fastrand::u64(0..=jitter_nanos))
    }
}

/// A provider that retries retryable failures ([`ModelError::is_retryable`]: rate limits,
/// 5xx, timeouts, transport) of the provider it wraps. Other errors return at once.
#[derive(Debug, Clone)]
pub struct Retrying {
    inner: Arc<dyn ModelProvider>,
    policy: RetryPolicy,
    sleeper: Arc<dyn Sleeper>,
}

impl Retrying {
    /// Wraps `inner` with `policy`, waiting with `sleeper`.
    pub fn new(
        inner: Arc<dyn ModelProvider>, policy: RetryPolicy, sleeper: Arc<dyn Sleeper>,
    ) -> Self {
        Self {
            inner,
            policy,
            sleeper,
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }
}

#[async_trait]
impl ModelProvider for Retrying {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let mut attempt = 1;
        loop {
            match self.inner.complete(request).await {
                Ok(response) => return Ok(response),
                Err(error) if error.is_retryable() && attempt < self.policy.max_attempts => {
                    let delay = self.policy.delay(attempt, &error);
                    tracing::warn!(
                        model = %self.inner.model_ref(),
                        attempt,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error = %error,
                        "model call failed; retrying"
                    );
                    self.sleeper.sleep(delay).await;
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn model_ref(&self) -> String {
        self.inner.model_ref()
    }

    fn sees_images(&self) -> bool {
        self.inner.sees_images()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error() -> ModelError {
        ModelError::Server {
            provider: "p".into(),
            status: 500,
        }
    }

    #[test]
    fn backoff_doubles_within_jitter_and_caps() {
        let policy = RetryPolicy::default();
        for _ in 0..50 {
            let first = policy.delay(1, &server_error());
            assert!(first >= Duration::from_millis(250) && first <= Duration::from_millis(500));
            let third = policy.delay(3, &server_error());
            assert!(third >= Duration::from_secs(1) && third <= Duration::from_secs(2));
            let late = policy.delay(40, &server_error());
            assert!(late >= Duration::from_secs(4) && late <= Duration::from_secs(8));
        }
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let policy = RetryPolicy::default();
        let limited = |secs| ModelError::RateLimited {
            provider: "p".into(),
            retry_after: Some(Duration::from_secs(secs)),
        };
        assert_eq!(policy.delay(1, &limited(7)), Duration::from_secs(7));
        assert_eq!(policy.delay(1, &limited(300)), Duration::from_secs(30));
    }

    #[test]
    fn max_retries_counts_attempts_after_the_first() {
        assert_eq!(RetryPolicy::with_max_retries(0).max_attempts, 1);
        assert_eq!(RetryPolicy::with_max_retries(2).max_attempts, 3);
    }
}
