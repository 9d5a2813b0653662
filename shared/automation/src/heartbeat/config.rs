//! The heartbeat settings of `clawless.yaml` (`agents.defaults.heartbeat`, a per-agent
//! `heartbeat` block merged over it, and the per-channel visibility switches), their
//! defaults, and which agents run heartbeats at all.
//!
//! Everything here is data plus the rules that resolve it; nothing reads a clock or a file.

use serde::{Deserialize, Deserializer, Serialize};

use clawless_base::session_key::normalize_agent_id;

/// How often heartbeats run when `every` is unset.
pub const DEFAULT_HEARTBEAT_EVERY: &str = "30m";

/// The longest reply (after removing `HEARTBEAT_OK`) that still counts as an acknowledgement.
pub const DEFAULT_HEARTBEAT_ACK_MAX_CHARS: usize = 300;

/// Where heartbeat replies go when `target` is unset: nowhere outside the session.
pub const DEFAULT_HEARTBEAT_TARGET: &str = "none";

/// The session heartbeats run in when `session` is unset: the agent's main session.
pub const DEFAULT_HEARTBEAT_SESSION: &str = "main";

/// The zone of `activeHours` when `activeHours.timezone` is unset.
pub const DEFAULT_ACTIVE_HOURS_TIMEZONE: &str = "user";

/// The message sent to the model on a heartbeat when `prompt` is unset or blank.
pub const DEFAULT_HEARTBEAT_PROMPT: &str = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK.";

/// `agents.defaults.heartbeat`, or an agent's own `heartbeat` block (see
/// [`HeartbeatConfig::merge_over`]). Every field is optional; the accessors apply the
/// defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatConfig {
    /// How often the agent gets a heartbeat: a duration such as `30m`, `1h` or `1h30m` (units
    /// `ms`, `s`, `m`, `h`, `d`; a bare number means minutes). `0m`, an empty value or
    /// anything unreadable turns heartbeats off for the agent.
    #[serde(
        default,
        deserialize_with = "duration_text",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_HEARTBEAT_EVERY)))]
    pub every: Option<String>,
    /// The part of the day heartbeats may run in. Outside it a heartbeat is skipped
    /// (`quiet-hours`). Unset: any time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub active_hours: Option<ActiveHoursConfig>,
    /// The model for heartbeat turns, as `provider/model`. Unset: the agent's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub model: Option<String>,
    /// The session heartbeats run in: `main`, or a session key of the same agent. A
    /// sub-agent's key or another agent's key falls back to `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_HEARTBEAT_SESSION)))]
    pub session: Option<String>,
    /// Where an alert from a heartbeat is sent: `none` (nowhere; the reply stays in the
    /// session), `last` (the chat the session last talked in) or a channel id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_HEARTBEAT_TARGET)))]
    pub target: Option<String>,
    /// The recipient on the target channel (a phone number, a chat id, or
    /// `<chatId>:topic:<threadId>`), instead of the session's last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub to: Option<String>,
    /// The message the model gets on a heartbeat. It replaces the default text entirely; a
    /// blank value means the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_HEARTBEAT_PROMPT)))]
    pub prompt: Option<String>,
    /// The longest reply, once `HEARTBEAT_OK` is taken out, that still counts as "nothing to
    /// report" and is not sent. Negative values count as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = DEFAULT_HEARTBEAT_ACK_MAX_CHARS))
    )]
    pub ack_max_chars: Option<i64>,
    /// Load only `HEARTBEAT.md` from the workspace files on heartbeat turns, to keep them
    /// cheap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    pub light_context: Option<bool>,
    /// Run every heartbeat in a fresh session (`<session key>:heartbeat`) instead of the
    /// conversation's own, so heartbeats neither see nor grow the conversation. Replies are
    /// still routed like the main session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    pub isolated_session: Option<bool>,
    /// Tell the default agent about heartbeats in its system prompt (the `## Heartbeats`
    /// section) and load `HEARTBEAT.md` into ordinary turns too. `false` leaves both out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub include_system_prompt_section: Option<bool>,
    /// `block` keeps heartbeat alerts out of direct (one-to-one) chats; `allow` sends them
    /// there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "allow")))]
    pub direct_policy: Option<DirectPolicy>,
    /// The account to send from, on a channel that has several. Accepted as in OpenClaw;
    /// clawless channels have one account each, so it has no effect yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub account_id: Option<String>,
    /// Leave out the warnings about failed tools from heartbeat replies. clawless sends no
    /// such warnings to chats, so it has no effect yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    pub suppress_tool_error_warnings: Option<bool>,
    /// The longest a heartbeat turn may run, in seconds. Not enforced yet: heartbeat turns
    /// have the limits of any turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub timeout_seconds: Option<u64>,
    /// Also send the model's reasoning, as its own `Reasoning:` message, before an alert
    /// (the heartbeat's thinking level must be above `off` for there to be any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    pub include_reasoning: Option<bool>,
}

/// `heartbeat.activeHours`: a daily window, in a time zone, outside which heartbeats skip.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActiveHoursConfig {
    /// When the window opens, `HH:MM` (00:00 to 23:59), included. An invalid value ignores
    /// the whole window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub start: Option<String>,
    /// When the window closes, `HH:MM` or `24:00`, excluded. An end before the start wraps
    /// past midnight; an end equal to the start means never. An invalid value ignores the
    /// whole window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub end: Option<String>,
    /// The zone of `start` and `end`: `user` (`agents.defaults.userTimezone`), `local` (the
    /// server's zone, which for clawless is UTC) or an IANA name such as `Europe/Berlin`. An
    /// unknown name means `user`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = DEFAULT_ACTIVE_HOURS_TIMEZONE))
    )]
    pub timezone: Option<String>,
}

/// `heartbeat.directPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DirectPolicy {
    /// Alerts may go to direct chats.
    #[default]
    Allow,
    /// Alerts to direct chats are dropped (`dm-blocked`).
    Block,
}

/// Where heartbeat alerts go, as resolved from `heartbeat.target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatTarget {
    /// No delivery outside the session.
    None,
    /// The chat the session last talked in.
    Last,
    /// This channel (its recipient from `to`, else the session's last one there).
    Channel(String),
}

impl HeartbeatConfig {
    /// This agent's block with every field it leaves unset taken from `defaults`. The merge
    /// is shallow: an agent's `activeHours` replaces the default one as a whole.
    pub fn merge_over(&self, defaults: &HeartbeatConfig) -> HeartbeatConfig {
        fn pick<T: Clone>(own: &Option<T>, default: &Option<T>) -> Option<T> {
            own.as_ref().or(default.as_ref()).cloned()
        }
        HeartbeatConfig {
            every: pick(&self.every, &defaults.every),
            active_hours: pick(&self.active_hours, &defaults.active_hours),
            model: pick(&self.model, &defaults.model),
            session: pick(&self.session, &defaults.session),
            target: pick(&self.target, &defaults.target),
            to: pick(&self.to, &defaults.to),
            prompt: pick(&self.prompt, &defaults.prompt),
            ack_max_chars: pick(&self.ack_max_chars, &defaults.ack_max_chars),
            light_context: pick(&self.light_context, &defaults.light_context),
            isolated_session: pick(&self.isolated_session, &defaults.isolated_session),
            include_system_prompt_section: pick(
                &self.include_system_prompt_section,
                &defaults.include_system_prompt_section,
            ),
            direct_policy: pick(&self.direct_policy, &defaults.direct_policy),
            account_id: pick(&self.account_id, &defaults.account_id),
            suppress_tool_error_warnings: pick(
                &self.suppress_tool_error_warnings,
                &defaults.suppress_tool_error_warnings,
            ),
            timeout_seconds: pick(&self.timeout_seconds, &defaults.timeout_seconds),
            include_reasoning: pick(&self.include_reasoning, &defaults.include_reasoning),
        }
    }

    /// The same settings with the target forced to `last`: a cron job's main-session wake
    /// reaches the chat the reminder was set in even when heartbeats deliver nowhere.
    pub fn with_last_target(&self) -> HeartbeatConfig {
        HeartbeatConfig {
            target: Some("last".to_owned()),
            ..self.clone()
        }
    }

    /// The interval between heartbeats in milliseconds, or `None` when `every` turns them off.
    pub fn interval_ms(&self) -> Option<u64> {
        parse_interval_ms(self.every.as_deref().unwrap_or(DEFAULT_HEARTBEAT_EVERY))
    }

    /// The prompt body: the configured `prompt` unless it is blank, else
    /// [`DEFAULT_HEARTBEAT_PROMPT`]. Surrounding whitespace is removed.
    pub fn prompt_body(&self) -> &str {
        self.prompt
            .as_deref()
            .map(str::trim)
            .filter(|prompt| !prompt.is_empty())
            .unwrap_or(DEFAULT_HEARTBEAT_PROMPT)
    }

    /// `ackMaxChars`, at least 0.
    pub fn ack_max_chars(&self) -> usize {
        match self.ack_max_chars {
            None => DEFAULT_HEARTBEAT_ACK_MAX_CHARS,
            Some(chars) => usize::try_from(chars.max(0)).unwrap_or(usize::MAX),
        }
    }

    /// The resolved `target`: unset, blank or `none` is [`HeartbeatTarget::None`].
    pub fn target(&self) -> HeartbeatTarget {
        let target = self.target.as_deref().map(str::trim).unwrap_or_default();
        if target.is_empty() || target.eq_ignore_ascii_case("none") {
            HeartbeatTarget::None
        } else if target.eq_ignore_ascii_case("last") {
            HeartbeatTarget::Last
        } else {
            HeartbeatTarget::Channel(target.to_owned())
        }
    }

    /// `directPolicy`, default [`DirectPolicy::Allow`].
    pub fn direct_policy(&self) -> DirectPolicy {
        self.direct_policy.unwrap_or_default()
    }

    /// `isolatedSession`, default false.
    pub fn isolated_session(&self) -> bool {
        self.isolated_session.unwrap_or(false)
    }

    /// `lightContext`, default false.
    pub fn light_context(&self) -> bool {
        self.light_context.unwrap_or(false)
    }

    /// `includeSystemPromptSection`, default true.
    pub fn include_system_prompt_section(&self) -> bool {
        self.include_system_prompt_section.unwrap_or(true)
    }

    /// `suppressToolErrorWarnings`, default false.
    pub fn suppress_tool_error_warnings(&self) -> bool {
        self.suppress_tool_error_warnings.unwrap_or(false)
    }

    /// `includeReasoning`, default false.
    pub fn include_reasoning(&self) -> bool {
        self.include_reasoning.unwrap_or(false)
    }
}

/// An agent that runs heartbeats, with its settings merged over the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAgent {
    /// The normalised agent id.
    pub agent_id: String,
    /// Its effective heartbeat settings. [`HeartbeatConfig::interval_ms`] may still be `None`
    /// (heartbeats turned off by `every`); such an agent's heartbeats skip as `disabled`.
    pub config: HeartbeatConfig,
}

/// Which agents run heartbeats (`agents.list[].heartbeat` over `agents.defaults.heartbeat`):
///
/// - when any listed agent has a `heartbeat` block, exactly those agents, each block merged
///   over `defaults`, in list order;
/// - otherwise only the default agent, with `defaults` (an absent `agents.defaults.heartbeat`
///   is `HeartbeatConfig::default()`, i.e. every 30 minutes).
///
/// Agent ids are normalised; a repeated id keeps its first entry.
pub fn heartbeat_agents(
    defaults: &HeartbeatConfig, agents: &[(String, Option<HeartbeatConfig>)],
    default_agent_id: &str,
) -> Vec<HeartbeatAgent> {
    let mut selected: Vec<HeartbeatAgent> = Vec::new();
    for (agent_id, block) in agents {
        let Some(block) = block else { continue };
        let agent_id = normalize_agent_id(agent_id);
        if selected.iter().any(|agent| agent.agent_id == agent_id) {
            continue;
        }
        selected.push(HeartbeatAgent {
            agent_id,
            config: block.merge_over(defaults),
        });
    }
    if selected.is_empty() {
        selected.push(HeartbeatAgent {
            agent_id: normalize_agent_id(default_agent_id),
            config: defaults.clone(),
        });
    }
    selected
}

/// One layer of heartbeat visibility (`channels.defaults.heartbeat`,
/// `channels.<channel>.heartbeat`, `channels.<channel>.accounts.<id>.heartbeat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatVisibilityConfig {
    /// Send `HEARTBEAT_OK` to the chat when a heartbeat found nothing to report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    pub show_ok: Option<bool>,
    /// Send heartbeat alerts to the chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub show_alerts: Option<bool>,
    /// Show the heartbeat's outcome as a status indicator where the channel has one (none
    /// does yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub use_indicator: Option<bool>,
}

/// What a heartbeat may show in a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatVisibility {
    /// Send `HEARTBEAT_OK` for an acknowledgement.
    pub show_ok: bool,
    /// Send alerts.
    pub show_alerts: bool,
    /// Report the outcome as an indicator.
    pub use_indicator: bool,
}

impl Default for HeartbeatVisibility {
    /// The built-in visibility, also used when the target resolves to no channel: alerts and
    /// indicator on, `HEARTBEAT_OK` not sent.
    fn default() -> Self {
        Self {
            show_ok: false,
            show_alerts: true,
            use_indicator: true,
        }
    }
}

impl HeartbeatVisibility {
    /// Resolves each switch from the most specific layer that sets it: pass the layers
    /// most specific first (account, channel, channel defaults); unset everywhere, the
    /// built-in [`HeartbeatVisibility::default`].
    pub fn resolve(layers: &[Option<&HeartbeatVisibilityConfig>]) -> Self {
        let first = |field: fn(&HeartbeatVisibilityConfig) -> Option<bool>| {
            layers.iter().flatten().find_map(|layer| field(layer))
        };
        let built_in = Self::default();
        Self {
            show_ok: first(|layer| layer.show_ok).unwrap_or(built_in.show_ok),
            show_alerts: first(|layer| layer.show_alerts).unwrap_or(built_in.show_alerts),
            use_indicator: first(|layer| layer.use_indicator).unwrap_or(built_in.use_indicator),
        }
    }

    /// True when a heartbeat could show nothing at all: then it is not run.
    pub fn shows_nothing(&self) -> bool {
        !self.show_ok && !self.show_alerts && !self.use_indicator
    }
}

/// `every` (serde `deserialize_with`): a string, or a number standing for that many minutes
/// (YAML `every: 30` arrives as a number).
fn duration_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    struct DurationText;

    impl<'de> serde::de::Visitor<'de> for DurationText {
        type Value = Option<String>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a duration such as \"30m\" or \"1h30m\", or a number of minutes")
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(text.to_owned()))
        }

        fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<Self::Value, E> {
            Ok(Some(number.to_string()))
        }

        fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<Self::Value, E> {
            Ok(Some(number.to_string()))
        }

        fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<Self::Value, E> {
            Ok(Some(number.to_string()))
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }

    deserializer.deserialize_any(DurationText)
}

/// The heartbeat interval `every` gives: a duration (`30m`, `1h`; bare numbers are minutes), with zero and unreadable
/// values meaning heartbeats are off (`None`).
pub fn parse_interval_ms(every: &str) -> Option<u64> {
    clawless_base::time::parse_duration_ms(every, 60_000).filter(|ms| *ms > 0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config(value: serde_json::Value) -> HeartbeatConfig {
        serde_json::from_value(value).expect("valid heartbeat config")
    }

    #[test]
    fn an_empty_block_means_every_thirty_minutes_with_the_defaults() {
        let config = config(json!({}));
        assert_eq!(config.interval_ms(), Some(30 * 60_000));
        assert_eq!(config.prompt_body(), DEFAULT_HEARTBEAT_PROMPT);
        assert_eq!(config.ack_max_chars(), 300);
        assert_eq!(config.target(), HeartbeatTarget::None);
        assert_eq!(config.direct_policy(), DirectPolicy::Allow);
        assert!(config.include_system_prompt_section());
        assert!(!config.isolated_session() && !config.light_context());
        assert!(!config.include_reasoning() && !config.suppress_tool_error_warnings());
    }

    #[test]
    fn every_key_is_read_in_camel_case_and_unknown_keys_are_refused() {
        let config = config(json!({
            "every": "1h", "activeHours": {"start": "08:00", "end": "22:00", "timezone": "UTC"},
            "model": "anthropic/claude", "session": "main", "target": "last", "to": "42",
            "prompt": "Check in.", "ackMaxChars": 10, "lightContext": true,
            "isolatedSession": true, "includeSystemPromptSection": false,
            "directPolicy": "block", "accountId": "bot2", "suppressToolErrorWarnings": true,
            "timeoutSeconds": 120, "includeReasoning": true
        }));
        assert_eq!(config.interval_ms(), Some(3_600_000));
        assert_eq!(config.direct_policy(), DirectPolicy::Block);
        assert_eq!(config.timeout_seconds, Some(120));
        assert!(!config.include_system_prompt_section());
        let error = serde_json::from_value::<HeartbeatConfig>(json!({"interval": "5m"}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `interval`"), "{error}");
        assert!(
            serde_json::from_value::<HeartbeatConfig>(json!({"activeHours": {"from": "8"}}))
                .is_err()
        );
    }

    #[test]
    fn every_may_be_a_bare_number_of_minutes() {
        assert_eq!(config(json!({"every": 30})).interval_ms(), Some(1_800_000));
        assert_eq!(config(json!({"every": 0})).interval_ms(), None);
        assert_eq!(config(json!({"every": 1.5})).interval_ms(), Some(90_000));
        assert_eq!(config(json!({"every": null})).every, None);
        let error = serde_json::from_value::<HeartbeatConfig>(json!({"every": true}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("a duration such as"), "{error}");
    }

    #[test]
    fn blank_prompt_negative_ack_limit_and_target_spellings_resolve() {
        let config = config(json!({"prompt": "  \n", "ackMaxChars": -5, "target": " Last "}));
        assert_eq!(config.prompt_body(), DEFAULT_HEARTBEAT_PROMPT);
        assert_eq!(config.ack_max_chars(), 0);
        assert_eq!(config.target(), HeartbeatTarget::Last);
        let telegram = HeartbeatConfig {
            target: Some("telegram".into()),
            ..HeartbeatConfig::default()
        };
        assert_eq!(
            telegram.target(),
            HeartbeatTarget::Channel("telegram".into())
        );
        assert_eq!(telegram.with_last_target().target(), HeartbeatTarget::Last);
    }

    #[test]
    fn an_agent_block_shallow_merges_over_the_defaults() {
        let defaults = config(json!({
            "every": "1h", "target": "last",
            "activeHours": {"start": "08:00", "end": "20:00", "timezone": "Europe/Berlin"}
        }));
        let own =
            config(json!({"every": "15m", "activeHours": {"start": "09:00", "end": "17:00"}}));
        let merged = own.merge_over(&defaults);
        assert_eq!(merged.every.as_deref(), Some("15m"));
        assert_eq!(merged.target.as_deref(), Some("last"));
        // Shallow: the agent's activeHours replaces the default one, timezone included.
        let hours = merged.active_hours.expect("active hours");
        assert_eq!(hours.start.as_deref(), Some("09:00"));
        assert_eq!(hours.timezone, None);
    }

    #[test]
    fn only_agents_with_a_block_run_heartbeats_when_any_has_one() {
        let defaults = config(json!({"every": "1h"}));
        let agents = vec![
            ("main".to_owned(), None),
            ("Ops".to_owned(), Some(config(json!({"target": "last"})))),
            ("quiet".to_owned(), Some(config(json!({"every": "0m"})))),
        ];
        let selected = heartbeat_agents(&defaults, &agents, "main");
        let ids: Vec<&str> = selected.iter().map(|a| a.agent_id.as_str()).collect();
        assert_eq!(ids, ["ops", "quiet"]);
        assert_eq!(selected[0].config.interval_ms(), Some(3_600_000));
        assert_eq!(selected[0].config.target(), HeartbeatTarget::Last);
        // Listed, but `every: 0m` leaves it without an interval: its heartbeats skip.
        assert_eq!(selected[1].config.interval_ms(), None);
    }

    #[test]
    fn without_any_agent_block_only_the_default_agent_runs_heartbeats() {
        let agents = vec![("main".to_owned(), None), ("ops".to_owned(), None)];
        let selected = heartbeat_agents(&HeartbeatConfig::default(), &agents, "Main");
        assert_eq!(selected.len(), 1);
        assert_eq!(selected[0].agent_id, "main");
        assert_eq!(selected[0].config, HeartbeatConfig::default());
        // No agents listed at all: the default agent still has its heartbeat.
        assert_eq!(
            heartbeat_agents(&HeartbeatConfig::default(), &[], "main").len(),
            1
        );
    }

    #[cfg(feature = "schema")]
    #[test]
    fn every_setting_has_a_description_and_a_default_in_the_schema() {
        fn check_properties(schema: &serde_json::Value, expected: usize) {
            let properties = schema["properties"].as_object().expect("properties");
            assert_eq!(properties.len(), expected);
            for (key, property) in properties {
                let description = property["description"].as_str().unwrap_or_default();
                assert!(!description.is_empty(), "{key} has no description");
                assert!(property.get("default").is_some(), "{key} has no default");
            }
        }
        let schema = schemars::schema_for!(HeartbeatConfig).to_value();
        check_properties(&schema, 16);
        assert_eq!(schema["additionalProperties"], json!(false));
        let properties = &schema["properties"];
        assert_eq!(properties["every"]["default"], json!("30m"));
        assert_eq!(properties["ackMaxChars"]["default"], json!(300));
        assert_eq!(properties["target"]["default"], json!("none"));
        assert_eq!(
            properties["prompt"]["default"],
            json!(DEFAULT_HEARTBEAT_PROMPT)
        );
        assert_eq!(properties["directPolicy"]["default"], json!("allow"));
        check_properties(&schema["$defs"]["ActiveHoursConfig"], 3);
        let visibility = schemars::schema_for!(HeartbeatVisibilityConfig).to_value();
        check_properties(&visibility, 3);
    }

    #[test]
    fn visibility_takes_each_switch_from_the_most_specific_layer() {
        let account = HeartbeatVisibilityConfig {
            show_ok: Some(true),
            ..Default::default()
        };
        let channel = HeartbeatVisibilityConfig {
            show_ok: Some(false),
            show_alerts: Some(false),
            ..Default::default()
        };
        let resolved = HeartbeatVisibility::resolve(&[Some(&account), Some(&channel), None]);
        assert_eq!(
            resolved,
            HeartbeatVisibility {
                show_ok: true,
                show_alerts: false,
                use_indicator: true
            }
        );
        assert_eq!(
            HeartbeatVisibility::resolve(&[]),
            HeartbeatVisibility::default()
        );
        assert!(!HeartbeatVisibility::default().shows_nothing());
    }
}
