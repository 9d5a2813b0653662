//! `cron:` in `clawless.yaml`: whether the scheduler runs, how failed runs are retried, the
//! run log's size, failure alerts and notices, and the webhook token; plus the defaults and
//! the duration syntax (`24h`, `1h30m`) its keys use.
//!
//! It only describes settings: the scheduler that honours them is the runtime's.

use serde::Deserialize;

use super::types::{AlertMode, FailureDestination};

/// Durations in `cron:` (`sessionRetention`) read as everywhere in the config.
pub use clawless_base::time::parse_duration_ms;

/// Whether the scheduler fires jobs when `enabled` is unset.
pub const DEFAULT_CRON_ENABLED: bool = true;

/// Jobs run at the same time when `maxConcurrentRuns` is unset.
pub const DEFAULT_MAX_CONCURRENT_RUNS: u32 = 1;

/// Retries of a one-shot job's transient failure when `retry.maxAttempts` is unset.
pub const DEFAULT_RETRY_MAX_ATTEMPTS: u32 = 3;

/// Waits before a one-shot job's 1st, 2nd, 3rd… retry when `retry.backoffMs` is unset (the
/// last one repeats).
pub const DEFAULT_RETRY_BACKOFF_MS: [u64; 3] = [30_000, 60_000, 300_000];

/// How long finished isolated-run sessions are kept when `sessionRetention` is unset.
pub const DEFAULT_SESSION_RETENTION: &str = "24h";

/// [`DEFAULT_SESSION_RETENTION`] in milliseconds.
pub const DEFAULT_SESSION_RETENTION_MS: u64 = 24 * 3_600_000;

/// Size of a job's run log that triggers pruning when `runLog.maxBytes` is unset.
pub const DEFAULT_RUN_LOG_MAX_BYTES: u64 = 2_000_000;

/// Lines a pruned run log keeps when `runLog.keepLines` is unset.
pub const DEFAULT_RUN_LOG_KEEP_LINES: u32 = 2_000;

/// Consecutive errors before a failure alert when `after` is unset.
pub const DEFAULT_FAILURE_ALERT_AFTER: u32 = 2;

/// Quiet time after a failure alert when `cooldownMs` is unset (1 hour).
pub const DEFAULT_FAILURE_ALERT_COOLDOWN_MS: u64 = 3_600_000;

/// Whether failure alerts are on for jobs without their own `failureAlert`, when
/// `failureAlert.enabled` is unset.
pub const DEFAULT_FAILURE_ALERT_ENABLED: bool = false;

/// Environment variable read for the webhook token when neither `webhookToken` nor
/// `webhookTokenEnv` is set.
pub const DEFAULT_WEBHOOK_TOKEN_ENV: &str = "CLAWLESS_CRON_WEBHOOK_TOKEN";

/// `cron:` in `clawless.yaml`. Every field is optional.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronConfig {
    /// Whether scheduled jobs fire. `false` stops the scheduler: jobs can still be added,
    /// edited, listed and run by hand.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_CRON_ENABLED)))]
    pub enabled: Option<bool>,
    /// How many jobs may run at the same time (at least 1).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MAX_CONCURRENT_RUNS)))]
    pub max_concurrent_runs: Option<u32>,
    /// Retries of one-shot jobs whose run failed with a transient error (rate limit,
    /// overload, network, timeout, server error). Recurring jobs instead wait 30 s, 1 min,
    /// 5 min, 15 min, then 60 min after consecutive errors.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub retry: CronRetryConfig,
    /// Bearer token sent as `Authorization: Bearer <token>` with webhook deliveries, inline.
    /// Prefer `webhookTokenEnv`.
    #[serde(default)]
    pub webhook_token: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the webhook
    /// token. Unset: `CLAWLESS_CRON_WEBHOOK_TOKEN`, if set.
    #[serde(default)]
    pub webhook_token_env: Option<String>,
    /// How long the sessions of finished isolated runs are kept before they are deleted: a
    /// duration such as `24h`, `7d` or `1h30m` (a bare number counts hours), or `false` to
    /// keep them.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_SESSION_RETENTION)))]
    pub session_retention: Option<SessionRetention>,
    /// Size limits of each job's run log.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub run_log: RunLogConfig,
    /// Alerts after repeated failures, for every job without its own `failureAlert`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub failure_alert: FailureAlertConfig,
    /// Where failure notices go when a job names no `delivery.failureDestination`. Unset:
    /// the job's own announce target.
    #[serde(default)]
    pub failure_destination: Option<FailureDestination>,
}

impl std::fmt::Debug for CronConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronConfig")
            .field("enabled", &self.enabled)
            .field("max_concurrent_runs", &self.max_concurrent_runs)
            .field("retry", &self.retry)
            .field(
                "webhook_token",
                &self.webhook_token.as_ref().map(|_| "<redacted>"),
            )
            .field("webhook_token_env", &self.webhook_token_env)
            .field("session_retention", &self.session_retention)
            .field("run_log", &self.run_log)
            .field("failure_alert", &self.failure_alert)
            .field("failure_destination", &self.failure_destination)
            .finish()
    }
}

/// `cron.retry`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CronRetryConfig {
    /// How many times a one-shot job is retried after transient errors before it is
    /// disabled.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_RETRY_MAX_ATTEMPTS)))]
    pub max_attempts: Option<u32>,
    /// Milliseconds to wait before the 1st, 2nd, 3rd… retry; the last value repeats.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_RETRY_BACKOFF_MS)))]
    pub backoff_ms: Option<Vec<u64>>,
    /// Which kinds of error are retried. Unset or empty: all of them.
    #[serde(default)]
    pub retry_on: Option<Vec<TransientErrorKind>>,
}

/// A kind of error worth retrying (`cron.retry.retryOn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TransientErrorKind {
    /// Rate limits and quotas (429, "too many requests", "tokens per day", …).
    RateLimit,
    /// The provider is overloaded (529, "overloaded", "high demand", …).
    Overloaded,
    /// Connection failures ("ECONNRESET", "fetch failed", "socket", …).
    Network,
    /// Timeouts.
    Timeout,
    /// HTTP 5xx server errors.
    ServerError,
}

/// `cron.sessionRetention`: a duration, or `false`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum SessionRetention {
    /// Delete finished run sessions this long after their last update (`24h`, `7d`).
    After(String),
    /// `false`: keep them; `true`: the default retention.
    Switch(bool),
}

/// `cron.runLog`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunLogConfig {
    /// A job's run log larger than this many bytes is pruned to its last `keepLines` lines.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_RUN_LOG_MAX_BYTES)))]
    pub max_bytes: Option<u64>,
    /// Lines a pruned run log keeps (the newest ones).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_RUN_LOG_KEEP_LINES)))]
    pub keep_lines: Option<u32>,
}

/// `cron.failureAlert`: the defaults of every job's failure alerts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailureAlertConfig {
    /// Whether jobs without their own `failureAlert` send alerts. A job's
    /// `failureAlert: false` turns them off for that job.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_FAILURE_ALERT_ENABLED)))]
    pub enabled: Option<bool>,
    /// Consecutive errors before an alert is sent (at least 1).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_FAILURE_ALERT_AFTER)))]
    pub after: Option<u32>,
    /// Milliseconds after an alert during which no other alert is sent for the same job.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = DEFAULT_FAILURE_ALERT_COOLDOWN_MS))
    )]
    pub cooldown_ms: Option<u64>,
    /// `announce` (a chat message to the job's delivery channel, or the last chat) or
    /// `webhook`.
    #[serde(default)]
    pub mode: Option<AlertMode>,
    /// Account of a multi-account channel for alerts.
    #[serde(default)]
    pub account_id: Option<String>,
}

impl CronConfig {
    /// Whether scheduled jobs fire.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(DEFAULT_CRON_ENABLED)
    }

    /// Jobs that may run at the same time (at least 1).
    pub fn max_concurrent_runs(&self) -> u32 {
        self.max_concurrent_runs
            .unwrap_or(DEFAULT_MAX_CONCURRENT_RUNS)
            .max(1)
    }

    /// Retries a one-shot job gets for transient errors.
    pub fn retry_max_attempts(&self) -> u32 {
        self.retry
            .max_attempts
            .unwrap_or(DEFAULT_RETRY_MAX_ATTEMPTS)
    }

    /// The wait before a one-shot job's `attempt`-th retry (1-based; the last configured
    /// value repeats).
    pub fn retry_backoff_ms(&self, attempt: u32) -> u64 {
        let steps = self
            .retry
            .backoff_ms
            .as_deref()
            .filter(|steps| !steps.is_empty())
            .unwrap_or(&DEFAULT_RETRY_BACKOFF_MS);
        let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
        steps
            .get(index)
            .or(steps.last())
            .copied()
            .unwrap_or_default()
    }

    /// Whether errors of `kind` are retried.
    pub fn retries_on(&self, kind: TransientErrorKind) -> bool {
        match self.retry.retry_on.as_deref() {
            None | Some([]) => true,
            Some(kinds) => kinds.contains(&kind),
        }
    }

    /// The webhook token: inline, else from `webhookTokenEnv` (or its default) via `env`.
    pub fn webhook_token(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        self.webhook_token
            .clone()
            .or_else(|| {
                env(self
                    .webhook_token_env
                    .as_deref()
                    .unwrap_or(DEFAULT_WEBHOOK_TOKEN_ENV))
            })
            .filter(|token| !token.is_empty())
    }

    /// How long finished run sessions are kept; `None` keeps them.
    pub fn session_retention_ms(&self) -> Result<Option<u64>, String> {
        match &self.session_retention {
            None | Some(SessionRetention::Switch(true)) => Ok(Some(DEFAULT_SESSION_RETENTION_MS)),
            Some(SessionRetention::Switch(false)) => Ok(None),
            Some(SessionRetention::After(raw)) => parse_duration_ms(raw, HOUR_MS)
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "cron.sessionRetention: `{raw}` is not a duration (e.g. 24h, 7d, 1h30m) or false"
                    )
                }),
        }
    }

    /// How many of a run log's oldest lines to drop, given its size and line count: none
    /// while it is within `maxBytes`, else all but the newest `keepLines`.
    pub fn run_log_lines_to_drop(&self, total_bytes: u64, lines: usize) -> usize {
        let max_bytes = self.run_log.max_bytes.unwrap_or(DEFAULT_RUN_LOG_MAX_BYTES);
        if total_bytes <= max_bytes {
            return 0;
        }
        let keep = self
            .run_log
            .keep_lines
            .unwrap_or(DEFAULT_RUN_LOG_KEEP_LINES);
        lines.saturating_sub(usize::try_from(keep).unwrap_or(usize::MAX))
    }

    /// Problems a start-up check should report (a bad duration).
    pub fn problems(&self) -> Vec<String> {
        self.session_retention_ms().err().into_iter().collect()
    }
}

/// Milliseconds in an hour.
pub const HOUR_MS: u64 = 3_600_000;

/// Milliseconds in a minute.
pub const MINUTE_MS: u64 = 60_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml_json: serde_json::Value) -> CronConfig {
        serde_json::from_value(yaml_json).expect("valid cron config")
    }

    #[test]
    fn defaults_match_openclaw() {
        let cron = CronConfig::default();
        assert!(cron.enabled());
        assert_eq!(cron.max_concurrent_runs(), 1);
        assert_eq!(cron.retry_max_attempts(), 3);
        let backoff: Vec<u64> = (1..=5).map(|n| cron.retry_backoff_ms(n)).collect();
        assert_eq!(backoff, [30_000, 60_000, 300_000, 300_000, 300_000]);
        assert!(cron.retries_on(TransientErrorKind::Network));
        assert_eq!(cron.session_retention_ms(), Ok(Some(86_400_000)));
        assert_eq!(cron.run_log_lines_to_drop(2_000_000, 5_000), 0);
        assert_eq!(cron.run_log_lines_to_drop(2_000_001, 5_000), 3_000);
        assert!(cron.problems().is_empty());
    }

    #[test]
    fn every_documented_key_parses_and_unknown_keys_are_refused() {
        let cron = config(serde_json::json!({
            "enabled": false,
            "maxConcurrentRuns": 0,
            "retry": {"maxAttempts": 1, "backoffMs": [1000], "retryOn": ["rate_limit", "server_error"]},
            "webhookToken": "secret-1",
            "sessionRetention": false,
            "runLog": {"maxBytes": 10, "keepLines": 2},
            "failureAlert": {"enabled": true, "after": 3, "cooldownMs": 0, "mode": "webhook", "accountId": "a"},
            "failureDestination": {"channel": "telegram", "to": "42", "mode": "announce"}
        }));
        assert!(!cron.enabled());
        assert_eq!(cron.max_concurrent_runs(), 1);
        assert_eq!(cron.retry_backoff_ms(7), 1000);
        assert!(cron.retries_on(TransientErrorKind::RateLimit));
        assert!(!cron.retries_on(TransientErrorKind::Network));
        assert_eq!(cron.session_retention_ms(), Ok(None));
        assert_eq!(cron.run_log_lines_to_drop(11, 5), 3);
        assert_eq!(cron.webhook_token(&|_| None).as_deref(), Some("secret-1"));
        assert!(!format!("{cron:?}").contains("secret-1"));
        for bad in [
            serde_json::json!({"store": "x"}),
            serde_json::json!({"webhook": "https://x"}),
            serde_json::json!({"retry": {"tries": 1}}),
            serde_json::json!({"runLog": {"lines": 1}}),
        ] {
            assert!(
                serde_json::from_value::<CronConfig>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn webhook_token_falls_back_to_the_environment() {
        let cron = config(serde_json::json!({"webhookTokenEnv": "HOOK"}));
        let env = |name: &str| (name == "HOOK").then(|| "from-env".to_owned());
        assert_eq!(cron.webhook_token(&env).as_deref(), Some("from-env"));
        let default_env =
            |name: &str| (name == DEFAULT_WEBHOOK_TOKEN_ENV).then(|| "default".to_owned());
        assert_eq!(
            CronConfig::default().webhook_token(&default_env).as_deref(),
            Some("default")
        );
    }

    #[test]
    fn session_retention_takes_durations_and_reports_bad_ones() {
        let retention = |value: serde_json::Value| {
            config(serde_json::json!({ "sessionRetention": value })).session_retention_ms()
        };
        assert_eq!(retention("7d".into()), Ok(Some(7 * 86_400_000)));
        assert_eq!(retention("1h30m".into()), Ok(Some(5_400_000)));
        assert_eq!(retention("48".into()), Ok(Some(48 * HOUR_MS)));
        assert_eq!(retention(true.into()), Ok(Some(86_400_000)));
        assert!(retention("soon".into()).is_err());
        assert_eq!(
            config(serde_json::json!({"sessionRetention": "soon"}))
                .problems()
                .len(),
            1
        );
    }

    #[test]
    fn durations_parse_units_composites_and_bare_numbers() {
        assert_eq!(parse_duration_ms("30", MINUTE_MS), Some(1_800_000));
        assert_eq!(parse_duration_ms("1h30m", MINUTE_MS), Some(5_400_000));
        assert_eq!(parse_duration_ms("250ms", MINUTE_MS), Some(250));
        assert_eq!(parse_duration_ms(" 1.5H ", MINUTE_MS), Some(5_400_000));
        assert_eq!(parse_duration_ms("0m", MINUTE_MS), Some(0));
        for bad in ["", "abc", "1h foo", "-5m", "5w", "h"] {
            assert_eq!(parse_duration_ms(bad, MINUTE_MS), None, "{bad:?}");
        }
    }

    #[cfg(feature = "schema")]
    #[test]
    fn the_schema_documents_every_key_with_its_default() {
        let schema = serde_json::to_value(schemars::schema_for!(CronConfig)).expect("schema");
        let properties = &schema["properties"];
        let keys: Vec<&str> = properties
            .as_object()
            .map(|object| object.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            [
                "enabled",
                "maxConcurrentRuns",
                "retry",
                "webhookToken",
                "webhookTokenEnv",
                "sessionRetention",
                "runLog",
                "failureAlert",
                "failureDestination"
            ]
        );
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(properties["enabled"]["default"], true);
        assert_eq!(properties["sessionRetention"]["default"], "24h");
        for key in keys {
            assert!(
                properties[key]["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty()),
                "{key} has no description"
            );
        }
        let retry = &schema["$defs"]["CronRetryConfig"]["properties"];
        assert_eq!(
            retry["backoffMs"]["default"],
            serde_json::json!([30_000, 60_000, 300_000])
        );
    }
}
