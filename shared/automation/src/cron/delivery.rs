//! Where a run's result and its failures go: the delivery plan of a job, whether an
//! isolated run's output is delivered at all (`NO_REPLY`, heartbeat acks, stale runs), the
//! failure notice sent for every failed run, and the failure-alert text.
//!
//! It decides and words; sending (channels, webhooks, retries, idempotency keys) is the
//! runtime's.

use serde::Serialize;

use super::config::CronConfig;
use super::types::{AlertMode, CronJob, CronPayload, DeliveryMode, FailureDestination, RunStatus};

use clawless_base::reply_tokens::NO_REPLY;

/// A run that starts this long after its slot no longer announces (3 hours).
pub const STALE_DELIVERY_MS: u64 = 3 * 3_600_000;

/// The channel of an announce without one: the session's last chat.
pub const LAST_CHANNEL: &str = "last";

/// Characters of the last error quoted in a failure alert.
pub const ALERT_ERROR_MAX_CHARS: usize = 200;

/// How a job's result is delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryPlan {
    /// `announce`, `webhook` or `none`.
    pub mode: DeliveryMode,
    /// For `announce`: the channel (`last` when unset).
    pub channel: Option<String>,
    /// Recipient or webhook URL.
    pub to: Option<String>,
    /// Account of a multi-account channel.
    pub account_id: Option<String>,
    /// Delivery failures do not fail the run.
    pub best_effort: bool,
}

impl DeliveryPlan {
    /// Whether a delivery is requested (an announce), for `lastDeliveryStatus`.
    pub fn requested(&self) -> bool {
        self.mode == DeliveryMode::Announce
    }
}

/// The job's delivery plan: its `delivery` when set (an announce without channel goes to
/// `last`); otherwise an isolated-like agent turn announces to `last`, anything else
/// delivers nothing.
pub fn delivery_plan(job: &CronJob) -> DeliveryPlan {
    match &job.delivery {
        Some(delivery) => DeliveryPlan {
            mode: delivery.mode,
            channel: match delivery.mode {
                DeliveryMode::Announce => Some(
                    delivery
                        .channel
                        .clone()
                        .unwrap_or_else(|| LAST_CHANNEL.to_owned()),
                ),
                _ => delivery.channel.clone(),
            },
            to: delivery.to.clone(),
            account_id: delivery.account_id.clone(),
            best_effort: delivery.best_effort.unwrap_or(false),
        },
        None => {
            let announces = job.session_target.is_isolated_like()
                && matches!(job.payload, CronPayload::AgentTurn(_));
            DeliveryPlan {
                mode: if announces {
                    DeliveryMode::Announce
                } else {
                    DeliveryMode::None
                },
                channel: announces.then(|| LAST_CHANNEL.to_owned()),
                to: None,
                account_id: None,
                best_effort: false,
            }
        }
    }
}

/// Why an isolated run's output was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suppression {
    /// Every payload was `NO_REPLY`.
    NoReply,
    /// The output is a heartbeat acknowledgement (`HEARTBEAT_OK` and little else).
    HeartbeatAck,
    /// The run started more than three hours after its slot.
    Stale,
    /// Sub-agents the run spawned are still working; a partial update is withheld.
    DescendantsPending,
    /// The run produced no text and no media.
    Empty,
}

/// Whether and what to announce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryDecision {
    /// Send these texts (in order).
    Deliver(Vec<String>),
    /// Send nothing; the run is still `ok`, with `delivered: false`.
    Suppress(Suppression),
}

/// What an isolated run produced, for [`decide_delivery`].
#[derive(Debug, Clone, Copy)]
pub struct RunOutput<'a> {
    /// The reply payloads' texts, in order.
    pub texts: &'a [&'a str],
    /// Whether any payload carries media (an ack with media is still delivered).
    pub has_media: bool,
    /// When the run started.
    pub started_at_ms: u64,
    /// The slot it ran for ([`super::schedule::FiringSlot`]); unknown for manual runs.
    pub slot_ms: Option<u64>,
    /// Whether sub-agents it spawned are still running.
    pub descendants_pending: bool,
}

/// Decides an announce: withheld while descendants run, skipped when stale (started more
/// than [`STALE_DELIVERY_MS`] after the slot), `NO_REPLY` payloads dropped (all dropped →
/// nothing), and nothing when the output is a heartbeat ack. `is_heartbeat_ack` is the
/// heartbeat module's test (token stripped, remainder within `ackMaxChars`).
pub fn decide_delivery(
    output: &RunOutput<'_>, is_heartbeat_ack: impl Fn(&str) -> bool,
) -> DeliveryDecision {
    if output.descendants_pending {
        return DeliveryDecision::Suppress(Suppression::DescendantsPending);
    }
    if output
        .slot_ms
        .is_some_and(|slot| output.started_at_ms.saturating_sub(slot) > STALE_DELIVERY_MS)
    {
        return DeliveryDecision::Suppress(Suppression::Stale);
    }
    if output.texts.iter().all(|text| text.trim().is_empty()) && !output.has_media {
        return DeliveryDecision::Suppress(Suppression::Empty);
    }
    let texts: Vec<String> = output
        .texts
        .iter()
        .filter(|text| text.trim() != NO_REPLY)
        .map(|text| (*text).to_owned())
        .collect();
    if texts.is_empty() {
        return DeliveryDecision::Suppress(Suppression::NoReply);
    }
    if !output.has_media && is_heartbeat_ack(&texts.join("\n")) {
        return DeliveryDecision::Suppress(Suppression::HeartbeatAck);
    }
    DeliveryDecision::Deliver(texts)
}

/// Where a failure notice goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeTarget {
    /// A chat message.
    Announce {
        /// Channel id or `last`.
        channel: String,
        /// Recipient.
        to: Option<String>,
        /// Account of a multi-account channel.
        account_id: Option<String>,
    },
    /// A JSON POST.
    Webhook {
        /// The URL.
        url: String,
    },
}

/// The notice a failed run sends: `Cron job "<name>" failed: <error>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureNotice {
    /// Where it goes.
    pub target: NoticeTarget,
    /// `Cron job "<name>" failed: <error>`.
    pub message: String,
}

impl FailureNotice {
    /// The chat text: the message after `⚠️ `.
    pub fn announce_text(&self) -> String {
        format!("⚠️ {}", self.message)
    }
}

/// The JSON body of a webhook failure notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureWebhookBody {
    /// The job.
    pub job_id: String,
    /// Its name.
    pub job_name: String,
    /// `Cron job "<name>" failed: <error>`.
    pub message: String,
    /// Always `error`.
    pub status: RunStatus,
    /// The error.
    pub error: String,
    /// When the run started.
    pub run_at_ms: u64,
    /// How long it took.
    pub duration_ms: u64,
    /// The next run, if any.
    pub next_run_at_ms: Option<u64>,
}

/// `Cron job "<name>" failed: <error>`
pub fn failure_message(job_name: &str, error: &str) -> String {
    format!("Cron job \"{job_name}\" failed: {error}")
}

/// The notice for a failed run of `job`, or `None` (best-effort delivery, or nowhere to
/// send it). The target is the job's `delivery.failureDestination`, else
/// `cron.failureDestination` (a job's destination takes unset fields from the global one),
/// else the job's own announce target. A destination that is the announce target itself
/// gives one notice there.
pub fn failure_notice(job: &CronJob, config: &CronConfig, error: &str) -> Option<FailureNotice> {
    let plan = delivery_plan(job);
    if plan.best_effort {
        return None;
    }
    let job_destination = job
        .delivery
        .as_ref()
        .and_then(|delivery| delivery.failure_destination.as_ref());
    let destination = match (job_destination, config.failure_destination.as_ref()) {
        (Some(own), Some(global)) => Some(FailureDestination {
            channel: own.channel.clone().or_else(|| global.channel.clone()),
            to: own.to.clone().or_else(|| global.to.clone()),
            account_id: own.account_id.clone().or_else(|| global.account_id.clone()),
            mode: own.mode.or(global.mode),
        }),
        (own, global) => own.or(global).cloned(),
    };
    let primary = plan.requested().then(|| NoticeTarget::Announce {
        channel: plan
            .channel
            .clone()
            .unwrap_or_else(|| LAST_CHANNEL.to_owned()),
        to: plan.to.clone(),
        account_id: plan.account_id.clone(),
    });
    let target = match destination {
        Some(destination) => match destination.mode.unwrap_or_default() {
            AlertMode::Webhook => destination
                .to
                .filter(|url| super::validate::is_http_url(url))
                .map(|url| NoticeTarget::Webhook { url }),
            AlertMode::Announce => Some(NoticeTarget::Announce {
                channel: destination
                    .channel
                    .unwrap_or_else(|| LAST_CHANNEL.to_owned()),
                to: destination.to,
                account_id: destination.account_id,
            }),
        }
        .or(primary),
        None => primary,
    }?;
    Some(FailureNotice {
        target,
        message: failure_message(&job.name, error),
    })
}

/// `Cron job "<name>" failed <n> times` + newline + `Last error: <error, ≤200 characters>`.
pub fn failure_alert_text(job_name: &str, consecutive_errors: u32, error: Option<&str>) -> String {
    let error = error
        .map(str::trim)
        .filter(|error| !error.is_empty())
        .unwrap_or("unknown error");
    let error = if error.chars().count() > ALERT_ERROR_MAX_CHARS {
        let kept: String = error.chars().take(ALERT_ERROR_MAX_CHARS - 3).collect();
        format!("{}...", kept.trim_end())
    } else {
        error.to_owned()
    };
    format!("Cron job \"{job_name}\" failed {consecutive_errors} times\nLast error: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::schedule::tests::job;
    use crate::cron::types::{AgentTurn, CronDelivery, CronSchedule, SessionTarget};

    const HOUR: u64 = 3_600_000;

    fn isolated(delivery: Option<CronDelivery>) -> CronJob {
        let mut job = job(
            "j",
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        job.name = "N".into();
        job.session_target = SessionTarget::Isolated;
        job.payload = CronPayload::AgentTurn(AgentTurn {
            message: "m".into(),
            ..AgentTurn::default()
        });
        job.delivery = delivery;
        job
    }

    fn output<'a>(texts: &'a [&'a str], started_at_ms: u64, slot_ms: Option<u64>) -> RunOutput<'a> {
        RunOutput {
            texts,
            has_media: false,
            started_at_ms,
            slot_ms,
            descendants_pending: false,
        }
    }

    fn ack(text: &str) -> bool {
        text.trim() == "HEARTBEAT_OK"
    }

    #[test]
    fn quiet_replies_acks_and_stale_runs_are_not_announced() {
        // Vector 32.
        assert_eq!(
            decide_delivery(&output(&["NO_REPLY"], 0, Some(0)), ack),
            DeliveryDecision::Suppress(Suppression::NoReply)
        );
        assert_eq!(
            decide_delivery(&output(&["HEARTBEAT_OK"], 0, Some(0)), ack),
            DeliveryDecision::Suppress(Suppression::HeartbeatAck)
        );
        assert_eq!(
            decide_delivery(&output(&["Report"], 4 * HOUR, Some(0)), ack),
            DeliveryDecision::Suppress(Suppression::Stale)
        );
        assert_eq!(
            decide_delivery(&output(&["Report"], 3 * HOUR, Some(0)), ack),
            DeliveryDecision::Deliver(vec!["Report".into()])
        );
        assert_eq!(
            decide_delivery(&output(&["Part", " NO_REPLY "], 0, None), ack),
            DeliveryDecision::Deliver(vec!["Part".into()])
        );
        let mut media = output(&["HEARTBEAT_OK"], 0, None);
        media.has_media = true;
        assert!(matches!(
            decide_delivery(&media, ack),
            DeliveryDecision::Deliver(_)
        ));
        assert_eq!(
            decide_delivery(&output(&[" "], 0, None), ack),
            DeliveryDecision::Suppress(Suppression::Empty)
        );
        let mut waiting = output(&["on it"], 0, None);
        waiting.descendants_pending = true;
        assert_eq!(
            decide_delivery(&waiting, ack),
            DeliveryDecision::Suppress(Suppression::DescendantsPending)
        );
    }

    #[test]
    fn isolated_agent_turns_announce_to_the_last_chat_by_default() {
        let plan = delivery_plan(&isolated(None));
        assert_eq!(
            (plan.mode, plan.channel.as_deref()),
            (DeliveryMode::Announce, Some("last"))
        );
        assert!(plan.requested());
        let main = job(
            "m",
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        assert_eq!(delivery_plan(&main).mode, DeliveryMode::None);
        let webhook = delivery_plan(&isolated(Some(CronDelivery {
            mode: DeliveryMode::Webhook,
            to: Some("https://x".into()),
            ..CronDelivery::default()
        })));
        assert!(!webhook.requested());
    }

    #[test]
    fn every_failed_run_sends_a_notice_unless_best_effort() {
        // Vector 33.
        let telegram = CronDelivery {
            mode: DeliveryMode::Announce,
            channel: Some("telegram".into()),
            to: Some("42".into()),
            ..CronDelivery::default()
        };
        let config = CronConfig::default();
        let notice =
            failure_notice(&isolated(Some(telegram.clone())), &config, "boom").expect("notice");
        assert_eq!(notice.announce_text(), "⚠️ Cron job \"N\" failed: boom");
        assert_eq!(
            notice.target,
            NoticeTarget::Announce {
                channel: "telegram".into(),
                to: Some("42".into()),
                account_id: None
            }
        );
        let best_effort = CronDelivery {
            best_effort: Some(true),
            ..telegram.clone()
        };
        assert_eq!(
            failure_notice(&isolated(Some(best_effort)), &config, "boom"),
            None
        );
        // A main job without a destination has nowhere to send it.
        let main = job(
            "m",
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        assert_eq!(failure_notice(&main, &config, "boom"), None);
    }

    #[test]
    fn failure_destinations_take_precedence_job_first() {
        let global = CronConfig {
            failure_destination: Some(FailureDestination {
                channel: Some("slack".into()),
                to: Some("C1".into()),
                account_id: Some("acct".into()),
                mode: None,
            }),
            ..CronConfig::default()
        };
        let main = job(
            "m",
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        assert_eq!(
            failure_notice(&main, &global, "e").map(|n| n.target),
            Some(NoticeTarget::Announce {
                channel: "slack".into(),
                to: Some("C1".into()),
                account_id: Some("acct".into())
            })
        );
        let own = CronDelivery {
            failure_destination: Some(FailureDestination {
                to: Some("C2".into()),
                ..FailureDestination::default()
            }),
            ..CronDelivery::default()
        };
        assert_eq!(
            failure_notice(&isolated(Some(own)), &global, "e").map(|n| n.target),
            Some(NoticeTarget::Announce {
                channel: "slack".into(),
                to: Some("C2".into()),
                account_id: Some("acct".into())
            })
        );
        let hook = CronDelivery {
            failure_destination: Some(FailureDestination {
                mode: Some(AlertMode::Webhook),
                to: Some("https://hooks.example/fail".into()),
                ..FailureDestination::default()
            }),
            ..CronDelivery::default()
        };
        assert_eq!(
            failure_notice(&isolated(Some(hook)), &CronConfig::default(), "e").map(|n| n.target),
            Some(NoticeTarget::Webhook {
                url: "https://hooks.example/fail".into()
            })
        );
    }

    #[test]
    fn alert_text_quotes_at_most_200_characters_of_the_error() {
        // Vector 33.
        assert_eq!(
            failure_alert_text("N", 3, Some("boom")),
            "Cron job \"N\" failed 3 times\nLast error: boom"
        );
        let long = "e".repeat(500);
        let text = failure_alert_text("N", 2, Some(&long));
        let quoted = text.split("Last error: ").nth(1).expect("error line");
        assert_eq!(quoted.chars().count(), 200);
        assert_eq!(
            failure_alert_text("N", 2, None),
            "Cron job \"N\" failed 2 times\nLast error: unknown error"
        );
        let body = FailureWebhookBody {
            job_id: "j".into(),
            job_name: "N".into(),
            message: failure_message("N", "e"),
            status: RunStatus::Error,
            error: "e".into(),
            run_at_ms: 1,
            duration_ms: 2,
            next_run_at_ms: None,
        };
        assert_eq!(
            serde_json::to_value(body).expect("json"),
            serde_json::json!({"jobId": "j", "jobName": "N", "message": "Cron job \"N\" failed: e", "status": "error",
                               "error": "e", "runAtMs": 1, "durationMs": 2, "nextRunAtMs": null})
        );
    }
}
