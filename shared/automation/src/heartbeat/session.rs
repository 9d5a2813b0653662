//! Which session a heartbeat runs in: the agent's main session unless `heartbeat.session` (or
//! a cron job's wake) names another session of the same agent, never a sub-agent's, and a
//! fresh `<key>:heartbeat` session per run with `isolatedSession`.

use clawless_base::session_key::{SessionKey, normalize_agent_id};

use super::config::HeartbeatConfig;

/// The suffix of an isolated heartbeat session's key.
pub const ISOLATED_SESSION_SUFFIX: &str = ":heartbeat";

/// Where a heartbeat runs and whose routing it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatSession {
    /// The session the heartbeat turn runs in.
    pub run_key: SessionKey,
    /// The session whose last chat a `last` target means and whose heartbeat state
    /// (`lastHeartbeatText`, task runs) is kept: the same as `run_key` unless isolated.
    pub base_key: SessionKey,
    /// True with `isolatedSession`: the run session starts afresh (new session id) every run.
    pub fresh_each_run: bool,
}

/// Resolves the heartbeat's session for `agent_id`.
///
/// The candidate is `requested_key` (a cron job's or a wake's session) or else
/// `heartbeat.session`. It is used when it names a session of the same agent that is not a
/// sub-agent's: a full key (`agent:<id>:…`) or a key relative to the agent (`discord:group:1`
/// → `agent:<id>:discord:group:1`). `main`, blank, another agent's key and any sub-agent key
/// fall back to the agent's main session `agent:<id>:main`.
///
/// With `isolatedSession`, the run key is the base key plus `:heartbeat` (never twice).
pub fn resolve_heartbeat_session(
    agent_id: &str, config: &HeartbeatConfig, requested_key: Option<&str>,
) -> HeartbeatSession {
    let agent_id = normalize_agent_id(agent_id);
    let base_key = requested_key
        .or(config.session.as_deref())
        .and_then(|raw| same_agent_key(&agent_id, raw))
        .unwrap_or_else(|| SessionKey::main(&agent_id));
    if !config.isolated_session() {
        return HeartbeatSession {
            run_key: base_key.clone(),
            base_key,
            fresh_each_run: false,
        };
    }
    let mut stem = base_key.as_str();
    while let Some(shorter) = stem.strip_suffix(ISOLATED_SESSION_SUFFIX) {
        stem = shorter;
    }
    let run_key = SessionKey::parse(&format!("{stem}{ISOLATED_SESSION_SUFFIX}"))
        .unwrap_or_else(|| base_key.clone());
    HeartbeatSession {
        run_key,
        base_key,
        fresh_each_run: true,
    }
}

fn same_agent_key(agent_id: &str, raw: &str) -> Option<SessionKey> {
    let raw = raw.trim();
    if raw.is_empty() || raw.eq_ignore_ascii_case("main") {
        return None;
    }
    let key =
        SessionKey::parse(raw).or_else(|| SessionKey::parse(&format!("agent:{agent_id}:{raw}")))?;
    (key.agent_id() == agent_id && key.subagent_depth() == 0).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_session(session: Option<&str>, isolated: bool) -> HeartbeatConfig {
        HeartbeatConfig {
            session: session.map(str::to_owned),
            isolated_session: Some(isolated),
            ..HeartbeatConfig::default()
        }
    }

    #[test]
    fn a_sub_agent_session_falls_back_to_main_and_isolation_adds_a_heartbeat_suffix() {
        // Spec §6 vector 17.
        let sub_agent = resolve_heartbeat_session(
            "main",
            &with_session(Some("agent:main:subagent:x"), false),
            None,
        );
        assert_eq!(sub_agent.run_key.as_str(), "agent:main:main");
        assert!(!sub_agent.fresh_each_run);

        let isolated = resolve_heartbeat_session("main", &with_session(None, true), None);
        assert_eq!(isolated.run_key.as_str(), "agent:main:main:heartbeat");
        assert_eq!(isolated.base_key.as_str(), "agent:main:main");
        assert!(isolated.fresh_each_run);
    }

    #[test]
    fn a_session_of_the_same_agent_is_used_and_others_fall_back_to_main() {
        let config = with_session(Some("agent:ops:telegram:group:7"), false);
        assert_eq!(
            resolve_heartbeat_session("Ops", &config, None)
                .run_key
                .as_str(),
            "agent:ops:telegram:group:7"
        );
        // Another agent's key is not this agent's session.
        assert_eq!(
            resolve_heartbeat_session("main", &config, None)
                .run_key
                .as_str(),
            "agent:main:main"
        );
        // A key relative to the agent is qualified with it.
        let relative = with_session(Some("discord:group:1"), false);
        assert_eq!(
            resolve_heartbeat_session("ops", &relative, None)
                .run_key
                .as_str(),
            "agent:ops:discord:group:1"
        );
        for fallback in ["main", " ", "MAIN"] {
            let config = with_session(Some(fallback), false);
            assert_eq!(
                resolve_heartbeat_session("ops", &config, None)
                    .run_key
                    .as_str(),
                "agent:ops:main",
                "{fallback:?}"
            );
        }
    }

    #[test]
    fn a_requested_session_wins_over_the_configured_one_under_the_same_rules() {
        let config = with_session(Some("agent:main:slack:group:1"), false);
        let cron = resolve_heartbeat_session("main", &config, Some("agent:main:telegram:direct:9"));
        assert_eq!(cron.run_key.as_str(), "agent:main:telegram:direct:9");
        let sub_agent =
            resolve_heartbeat_session("main", &config, Some("agent:main:subagent:child"));
        assert_eq!(sub_agent.run_key.as_str(), "agent:main:main");
    }

    #[test]
    fn the_isolated_suffix_is_never_doubled() {
        let config = with_session(Some("agent:main:main:heartbeat:heartbeat"), true);
        let session = resolve_heartbeat_session("main", &config, None);
        assert_eq!(session.run_key.as_str(), "agent:main:main:heartbeat");
    }
}
