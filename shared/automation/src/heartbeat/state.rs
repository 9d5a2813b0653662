//! What a session keeps about its heartbeats between firings (spec §5.3), what one heartbeat
//! run carries into the turn engine, and which timer firings are acted on.
//!
//! - [`HeartbeatState`] lives in the session's meta: the armed schedule, the last slot
//!   handled, the last run, the last alert sent (for the 24-hour duplicate check) and the
//!   `HEARTBEAT.md` task runs.
//! - [`HeartbeatDelivery`] is resolved when a heartbeat starts and stored on the turn's first
//!   step, so the reply is decided from persisted facts only: a redelivered event finds the
//!   same facts, and the decision itself is persisted before anything is sent.
//! - [`judge_firing`] makes a durable timer's firings exactly-once per slot: a slot runs only
//!   while it lies on the agent's current phase grid and after the last slot handled.

use serde::{Deserialize, Serialize};

use clawless_base::reply_tokens::NO_REPLY;
use clawless_base::session_key::ChatRef;

use super::config::{HeartbeatConfig, HeartbeatVisibility};
use super::file::HeartbeatTaskState;
use super::reply::{
    DeliveryReadiness, HeartbeatOutcome, HeartbeatReplyFacts, LastHeartbeatAlert, NoTargetReason,
    ReplyPayload, decide_heartbeat_reply,
};
use super::schedule::{BUSY_RETRY_DELAY_MS, HeartbeatSchedule};

/// The longest wait between two retries of a heartbeat whose session is busy.
pub const MAX_BUSY_RETRY_DELAY_MS: u64 = 60_000;

/// A session's durable heartbeat state (`SessionMeta::heartbeat`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatState {
    /// The schedule last armed: the interval and phase it was computed for, and the slot the
    /// next timer is set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<HeartbeatSchedule>,
    /// The latest slot handled (run, skipped or given up): firings of it or an earlier slot
    /// do nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_slot_ms: Option<u64>,
    /// How the latest heartbeat ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<HeartbeatRunRecord>,
    /// The last alert sent to a chat (`lastHeartbeatText`, `lastHeartbeatSentAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_alert: Option<SentAlert>,
    /// When each `HEARTBEAT.md` task last ran.
    #[serde(default, skip_serializing_if = "HeartbeatTaskState::is_empty")]
    pub task_runs: HeartbeatTaskState,
}

/// How one heartbeat ended, for `sessions show` and the logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatRunRecord {
    /// When it was handled.
    pub at_ms: u64,
    /// The slot it belonged to (`None` for a wake outside the schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_ms: Option<u64>,
    /// `ran` or `skipped`.
    pub status: String,
    /// The skip reason (`empty-heartbeat-file`, `quiet-hours`, …) when skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An alert a heartbeat sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentAlert {
    /// Its text.
    pub text: String,
    /// When it was handed to the channel.
    pub sent_at_ms: u64,
}

/// Where a heartbeat's alert goes, resolved from `target` and `to` when the heartbeat starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AlertTarget {
    /// This chat.
    Chat {
        /// The chat.
        chat: ChatRef,
    },
    /// `target: none`: the reply stays in the session.
    TargetNone,
    /// The target resolved to no chat (no last chat yet, or no recipient on the channel).
    NoTarget,
    /// The recipient is a direct chat and `directPolicy` is `block`.
    DmBlocked,
}

impl AlertTarget {
    /// The chat, when there is one.
    pub fn chat(&self) -> Option<&ChatRef> {
        match self {
            Self::Chat { chat } => Some(chat),
            _ => None,
        }
    }

    fn readiness(&self) -> DeliveryReadiness {
        match self {
            Self::Chat { .. } => DeliveryReadiness::Ready,
            Self::TargetNone => DeliveryReadiness::NoTarget(NoTargetReason::TargetNone),
            Self::NoTarget => DeliveryReadiness::NoTarget(NoTargetReason::NoTarget),
            Self::DmBlocked => DeliveryReadiness::NoTarget(NoTargetReason::DmBlocked),
        }
    }
}

/// The reply rules of one heartbeat run, stored on its first step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatDelivery {
    /// The slot the run belongs to (`None` for a wake outside the schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_ms: Option<u64>,
    /// `ackMaxChars`.
    pub ack_max_chars: usize,
    /// `showOk`: an acknowledgement is sent as `HEARTBEAT_OK`.
    #[serde(default)]
    pub show_ok: bool,
    /// `showAlerts`: alerts are sent.
    pub show_alerts: bool,
    /// Where an alert goes.
    pub target: AlertTarget,
    /// A cron run's reply rules rather than a heartbeat's: a reminder or a job's result is
    /// meant to repeat, so the 24-hour duplicate suppression is off, and a reply of exactly
    /// `NO_REPLY` is silent (spec `openclaw-automation.md` §2.8).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cron_run: bool,
    /// `includeReasoning`: the model's shown reasoning goes before an alert.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_reasoning: bool,
}

impl HeartbeatDelivery {
    /// The rules for `config`, `visibility` and a resolved `target`.
    pub fn new(
        config: &HeartbeatConfig, visibility: HeartbeatVisibility, target: AlertTarget,
        slot_ms: Option<u64>,
    ) -> Self {
        Self {
            slot_ms,
            ack_max_chars: config.ack_max_chars(),
            show_ok: visibility.show_ok,
            show_alerts: visibility.show_alerts,
            target,
            cron_run: false,
            include_reasoning: config.include_reasoning(),
        }
    }

    /// What becomes of the run's final answer `text` ([`decide_heartbeat_reply`]), given the
    /// session's last alert and the time now.
    pub fn decide(
        &self, text: &str, last_alert: Option<&SentAlert>, now_ms: u64,
    ) -> HeartbeatOutcome {
        self.decide_with_reasoning(text, None, last_alert, now_ms)
    }

    /// [`decide`](Self::decide) for an answer that came with the model's `Reasoning:` message:
    /// an alert carries it (to go first) only with `includeReasoning`.
    pub fn decide_with_reasoning(
        &self, text: &str, reasoning: Option<&str>, last_alert: Option<&SentAlert>, now_ms: u64,
    ) -> HeartbeatOutcome {
        let text = if self.cron_run && text.trim() == NO_REPLY {
            ""
        } else {
            text
        };
        let last_alert = if self.cron_run { None } else { last_alert };
        let config = HeartbeatConfig {
            ack_max_chars: Some(i64::try_from(self.ack_max_chars).unwrap_or(i64::MAX)),
            include_reasoning: Some(self.include_reasoning),
            ..HeartbeatConfig::default()
        };
        let payload = |text: &str| ReplyPayload {
            text: text.to_owned(),
            has_media: false,
            is_tool_error_warning: false,
        };
        let payloads: Vec<ReplyPayload> =
            reasoning.into_iter().chain([text]).map(payload).collect();
        decide_heartbeat_reply(&HeartbeatReplyFacts {
            payloads: &payloads,
            config: &config,
            response_prefix: None,
            exec_completion: false,
            visibility: HeartbeatVisibility {
                show_ok: self.show_ok,
                show_alerts: self.show_alerts,
                use_indicator: true,
            },
            delivery: &self.target.readiness(),
            last_alert: last_alert.map(|alert| LastHeartbeatAlert {
                text: &alert.text,
                sent_at_ms: alert.sent_at_ms,
            }),
            now_ms,
        })
    }
}

/// What to do with one firing of a heartbeat timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firing {
    /// Handle the slot: run the gates, then record it as the latest slot handled.
    Act,
    /// The slot (or a later one) was handled already: a redelivery. Do nothing but make sure
    /// the next firing is armed.
    Duplicate,
    /// The slot is not on the agent's current schedule (the interval or phase changed since
    /// it was armed): do nothing.
    Stale,
}

/// Judges a firing of `slot_ms` against the agent's current `interval_ms` and `phase_ms` and
/// the session's heartbeat state. Slots are instants on the phase grid
/// (`slot mod interval == phase`), and a session handles them in increasing order, each at
/// most once, whichever timer (or duplicate of one) delivers it.
pub fn judge_firing(
    state: Option<&HeartbeatState>, slot_ms: u64, interval_ms: u64, phase_ms: u64,
) -> Firing {
    if interval_ms == 0 || slot_ms % interval_ms != phase_ms % interval_ms {
        return Firing::Stale;
    }
    match state.and_then(|state| state.last_slot_ms) {
        Some(last) if last >= slot_ms => Firing::Duplicate,
        _ => Firing::Act,
    }
}

/// True when no firing is known to be armed for the schedule an agent has now: the session
/// has no schedule, or one for another interval or phase, or one whose slot has passed
/// without being handled.
pub fn needs_arming(
    state: Option<&HeartbeatState>, fresh: &HeartbeatSchedule, now_ms: u64,
) -> bool {
    let Some(state) = state else {
        return true;
    };
    match &state.schedule {
        Some(armed) => {
            armed.interval_ms != fresh.interval_ms
                || armed.phase_ms != fresh.phase_ms
                || (armed.next_due_ms <= now_ms
                    && state
                        .last_slot_ms
                        .is_none_or(|last| last < armed.next_due_ms))
        }
        None => true,
    }
}

/// How long to wait before retrying a heartbeat whose session was busy, on its `attempt`-th
/// retry (from 0): [`BUSY_RETRY_DELAY_MS`], doubling on each further retry up to
/// [`MAX_BUSY_RETRY_DELAY_MS`]. The spec's one second is a floor; doubling keeps a session
/// that waits hours for an approval from being woken every second.
pub fn busy_retry_delay_ms(attempt: u32) -> u64 {
    BUSY_RETRY_DELAY_MS
        .saturating_mul(1u64 << attempt.min(16))
        .min(MAX_BUSY_RETRY_DELAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heartbeat::reply::AckKind;
    use clawless_base::session_key::ChatType;

    const HOUR: u64 = 3_600_000;

    fn chat() -> ChatRef {
        ChatRef {
            channel: "generic".into(),
            chat_id: "c-1".into(),
            chat_type: ChatType::Direct,
        }
    }

    fn delivery(target: AlertTarget) -> HeartbeatDelivery {
        HeartbeatDelivery::new(
            &HeartbeatConfig::default(),
            HeartbeatVisibility::default(),
            target,
            Some(1_000),
        )
    }

    #[test]
    fn acks_stay_silent_and_alerts_go_to_the_chat_once_a_day() {
        let to_chat = delivery(AlertTarget::Chat { chat: chat() });
        for ack in ["HEARTBEAT_OK", "HEARTBEAT_OK 🦞", "All quiet. HEARTBEAT_OK"] {
            assert_eq!(
                to_chat.decide(ack, None, 0),
                HeartbeatOutcome::AckSilent(AckKind::Token),
                "{ack}"
            );
        }
        let alert = "x".repeat(301);
        assert!(matches!(
            to_chat.decide(&alert, None, 0),
            HeartbeatOutcome::Alert { .. }
        ));
        let sent = SentAlert {
            text: alert.clone(),
            sent_at_ms: 0,
        };
        assert_eq!(
            to_chat.decide(&alert, Some(&sent), 23 * HOUR),
            HeartbeatOutcome::Duplicate
        );
        assert!(matches!(
            to_chat.decide(&alert, Some(&sent), 25 * HOUR),
            HeartbeatOutcome::Alert { .. }
        ));
        assert_eq!(
            delivery(AlertTarget::TargetNone).decide(&alert, None, 0),
            HeartbeatOutcome::NoTarget(NoTargetReason::TargetNone)
        );
    }

    #[test]
    fn reasoning_goes_with_an_alert_only_when_included() {
        let mut to_chat = delivery(AlertTarget::Chat { chat: chat() });
        let alert = "x".repeat(301);
        let reasoning = "Reasoning:\n_The disk is full._";
        let carried = |outcome: HeartbeatOutcome| match outcome {
            HeartbeatOutcome::Alert { reasoning, .. } => reasoning,
            other => panic!("not an alert: {other:?}"),
        };
        assert!(
            carried(to_chat.decide_with_reasoning(&alert, Some(reasoning), None, 0)).is_empty()
        );
        to_chat.include_reasoning = true;
        assert_eq!(
            carried(to_chat.decide_with_reasoning(&alert, Some(reasoning), None, 0)),
            [reasoning]
        );
        // An acknowledgement stays silent, reasoning or not.
        assert_eq!(
            to_chat.decide_with_reasoning("HEARTBEAT_OK", Some(reasoning), None, 0),
            HeartbeatOutcome::AckSilent(AckKind::Token)
        );
    }

    #[test]
    fn the_delivery_round_trips_through_json() {
        let original = delivery(AlertTarget::Chat { chat: chat() });
        let json = serde_json::to_value(&original).unwrap();
        assert_eq!(json["target"]["kind"], "chat");
        let back: HeartbeatDelivery = serde_json::from_value(json).unwrap();
        assert_eq!(back, original);
        let none = serde_json::to_value(delivery(AlertTarget::DmBlocked)).unwrap();
        assert_eq!(none["target"], serde_json::json!({"kind": "dm-blocked"}));
    }

    #[test]
    fn each_slot_on_the_grid_is_acted_on_once_and_others_are_stale() {
        let interval = 10_000;
        let phase = 1_234;
        assert_eq!(judge_firing(None, 21_234, interval, phase), Firing::Act);
        let state = HeartbeatState {
            last_slot_ms: Some(21_234),
            ..HeartbeatState::default()
        };
        assert_eq!(
            judge_firing(Some(&state), 21_234, interval, phase),
            Firing::Duplicate
        );
        assert_eq!(
            judge_firing(Some(&state), 11_234, interval, phase),
            Firing::Duplicate
        );
        assert_eq!(
            judge_firing(Some(&state), 31_234, interval, phase),
            Firing::Act
        );
        // After a config change the old grid's slots are not the scheduled ones any more.
        assert_eq!(
            judge_firing(Some(&state), 31_000, interval, phase),
            Firing::Stale
        );
        assert_eq!(judge_firing(None, 31_234, 0, 0), Firing::Stale);
    }

    #[test]
    fn a_schedule_needs_arming_until_its_slot_is_ahead_or_handled() {
        let fresh = HeartbeatSchedule {
            interval_ms: 10_000,
            phase_ms: 1_234,
            next_due_ms: 31_234,
        };
        assert!(needs_arming(None, &fresh, 25_000));
        let mut state = HeartbeatState {
            schedule: Some(HeartbeatSchedule {
                next_due_ms: 21_234,
                ..fresh
            }),
            ..HeartbeatState::default()
        };
        assert!(!needs_arming(Some(&state), &fresh, 20_000), "ahead");
        assert!(
            needs_arming(Some(&state), &fresh, 25_000),
            "passed, unhandled"
        );
        state.last_slot_ms = Some(21_234);
        assert!(!needs_arming(Some(&state), &fresh, 25_000), "handled");
        let other_interval = HeartbeatSchedule {
            interval_ms: 20_000,
            ..fresh
        };
        assert!(needs_arming(Some(&state), &other_interval, 20_000));
    }

    #[test]
    fn busy_retries_start_at_a_second_and_double_up_to_a_minute() {
        let delays: Vec<u64> = (0..8).map(busy_retry_delay_ms).collect();
        assert_eq!(
            delays,
            [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
        );
        assert_eq!(busy_retry_delay_ms(u32::MAX), 60_000);
    }
}
