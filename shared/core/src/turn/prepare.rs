//! Turning queued events into engine input, as pure functions: chat messages (`/approve`,
//! skill slash commands, plain text), heartbeats, approval timeouts, and which tools a turn
//! offers and where they run. The runtime only fetches what these need (skill command specs,
//! the tool policy's answer, whether a node is paired) and performs the result.

use std::collections::BTreeSet;

use clawless_automation::heartbeat::state::HeartbeatDelivery;
use clawless_exec::Security;
use clawless_skills::commands::{
    SkillCommandSpec, dispatched_tool_call, may_be_skill_command, normalize_command_body,
    resolve_skill_command, skill_rewrite_text,
};

use super::ToolRouting;
use super::events::{ApprovalDecision, ChatRef, InboundMessage};
use super::state::{CommandDispatch, PreparedMessage};

/// What a chat message is.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatInput {
    /// `/approve <id> <decision>` from an owner.
    Approval {
        /// The id as written (short code, job id or call id).
        id: String,
        /// The decision.
        decision: ApprovalDecision,
    },
    /// `/approve` from someone who is not an owner: ignored.
    IgnoredApproval,
    /// A message for the turn (slash commands resolved).
    Message(Box<PreparedMessage>),
}

/// True when the message may be a skill slash command, so the caller should load the
/// command specs before [`prepare_chat_message`].
pub fn needs_skill_commands(message: &InboundMessage) -> bool {
    may_be_skill_command(&normalize_command_body(&message.text, None))
}

/// Classifies a chat message. `skill_commands` are the agent's slash commands, when the
/// caller loaded them (see [`needs_skill_commands`]).
pub fn prepare_chat_message(
    message: &InboundMessage, skill_commands: Option<&[SkillCommandSpec]>,
) -> ChatInput {
    let body = normalize_command_body(&message.text, None);
    if let Some((id, decision)) = parse_approve_command(&body) {
        // Only an owner may approve; anyone else's `/approve` is ignored.
        return if message.sender_is_owner {
            ChatInput::Approval { id, decision }
        } else {
            ChatInput::IgnoredApproval
        };
    }
    let mut prepared = PreparedMessage::plain(message.clone());
    if let Some(specs) = skill_commands
        && let Some(invocation) = resolve_skill_command(&body, specs)
    {
        match dispatched_tool_call(&invocation) {
            Some(call) => {
                prepared.dispatch = Some(CommandDispatch {
                    tool_name: call.tool_name,
                    params: call.params,
                });
            }
            None => {
                prepared.text =
                    skill_rewrite_text(&invocation.spec.skill_name, invocation.args.as_deref());
            }
        }
    }
    ChatInput::Message(Box::new(prepared))
}

/// `/approve <id> allow-once|allow-always|deny` (a few aliases accepted), exactly three words.
pub fn parse_approve_command(body: &str) -> Option<(String, ApprovalDecision)> {
    let mut words = body.split_whitespace();
    if words.next()? != "/approve" {
        return None;
    }
    let id = words.next()?.to_owned();
    let decision = match words.next()?.to_ascii_lowercase().as_str() {
        "allow-once" | "allow" | "once" => ApprovalDecision::AllowOnce,
        "allow-always" | "always" => ApprovalDecision::AllowAlways,
        "deny" | "reject" => ApprovalDecision::Deny,
        _ => return None,
    };
    words.next().is_none().then_some((id, decision))
}

/// A heartbeat poll: `prompt` as the owner's message, with the reply rules the run's answer
/// is decided by (an alert goes to `delivery`'s target, never to `chat` as such: `chat` is
/// only where the poll is said to come from). `run_id` names the run (`<agent>:<slot>`); the
/// message id is `heartbeat:<run_id>`.
pub fn heartbeat_message(
    chat: ChatRef, run_id: &str, prompt: &str, delivery: HeartbeatDelivery,
) -> PreparedMessage {
    let message = InboundMessage {
        message_id: format!("heartbeat:{run_id}"),
        chat,
        sender_id: "heartbeat".to_owned(),
        text: prompt.to_owned(),
        sender_is_owner: true,
        attachments: Vec::new(),
    };
    let mut prepared = PreparedMessage::plain(message);
    prepared.heartbeat = true;
    prepared.heartbeat_delivery = Some(delivery);
    prepared
}

/// What an unanswered approval becomes (spec §7.8): with askFallback `full` the command runs
/// once; otherwise it is denied, with the reason the chat is told.
pub fn approval_timeout_outcome(
    ask_fallback: Security,
) -> (ApprovalDecision, Option<&'static str>) {
    match ask_fallback {
        Security::Full => (ApprovalDecision::AllowOnce, None),
        // The node already said its allowlist does not cover the command.
        Security::Allowlist => (
            ApprovalDecision::Deny,
            Some("approval-timeout (allowlist-miss)"),
        ),
        Security::Deny => (ApprovalDecision::Deny, Some("approval-timeout")),
    }
}

/// The tools a turn offers and where they run: the tools the policy allows, plus `exec` on
/// a node host when `remote_exec` (a node is paired) and the policy allows it too.
pub fn tool_routing(allowed: impl IntoIterator<Item = String>, remote: &[&str]) -> ToolRouting {
    let offered: BTreeSet<String> = allowed.into_iter().collect();
    let remote = remote
        .iter()
        .filter(|name| offered.contains(**name))
        .map(|name| (*name).to_owned())
        .collect();
    ToolRouting {
        offered,
        remote,
        commands: BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_base::session_key::ChatType;

    fn message(text: &str, owner: bool) -> InboundMessage {
        InboundMessage {
            message_id: "m1".to_owned(),
            chat: ChatRef {
                channel: "generic".to_owned(),
                chat_id: "c".to_owned(),
                chat_type: ChatType::Direct,
            },
            sender_id: "u".to_owned(),
            text: text.to_owned(),
            sender_is_owner: owner,
            attachments: Vec::new(),
        }
    }

    #[test]
    fn approve_commands_parse_only_in_their_exact_form() {
        assert_eq!(
            parse_approve_command("/approve call_1 allow-once"),
            Some(("call_1".to_owned(), ApprovalDecision::AllowOnce))
        );
        assert_eq!(
            parse_approve_command("/approve call_1 DENY"),
            Some(("call_1".to_owned(), ApprovalDecision::Deny))
        );
        assert_eq!(parse_approve_command("/approve call_1"), None);
        assert_eq!(parse_approve_command("/approve call_1 maybe"), None);
        assert_eq!(parse_approve_command("/approve call_1 deny extra"), None);
        assert_eq!(parse_approve_command("approve call_1 deny"), None);
    }

    #[test]
    fn only_owners_approve_and_everyone_else_is_ignored() {
        assert_eq!(
            prepare_chat_message(&message("/approve abcd1234 allow-always", true), None),
            ChatInput::Approval {
                id: "abcd1234".to_owned(),
                decision: ApprovalDecision::AllowAlways
            }
        );
        assert_eq!(
            prepare_chat_message(&message("/approve abcd1234 allow-always", false), None),
            ChatInput::IgnoredApproval
        );
    }

    #[test]
    fn plain_text_reaches_the_model_as_written() {
        let ChatInput::Message(prepared) = prepare_chat_message(&message("hello", false), None)
        else {
            panic!("not a message")
        };
        assert_eq!(prepared.text, "hello");
        assert!(prepared.dispatch.is_none() && !prepared.heartbeat);
        assert!(!needs_skill_commands(&message("hello", false)));
        assert!(needs_skill_commands(&message("/weather Paris", false)));
    }

    #[test]
    fn unanswered_approvals_follow_ask_fallback() {
        assert_eq!(
            approval_timeout_outcome(Security::Deny),
            (ApprovalDecision::Deny, Some("approval-timeout"))
        );
        assert_eq!(
            approval_timeout_outcome(Security::Allowlist),
            (
                ApprovalDecision::Deny,
                Some("approval-timeout (allowlist-miss)")
            )
        );
        assert_eq!(
            approval_timeout_outcome(Security::Full),
            (ApprovalDecision::AllowOnce, None)
        );
    }

    #[test]
    fn remote_tools_are_routed_only_when_the_policy_offers_them() {
        let routing = tool_routing(["read".to_owned(), "exec".to_owned()], &["exec"]);
        assert!(routing.remote.contains("exec"));
        let routing = tool_routing(["read".to_owned()], &["exec"]);
        assert!(routing.remote.is_empty() && !routing.offered.contains("exec"));
    }

    #[test]
    fn heartbeats_are_owner_messages_marked_as_heartbeats() {
        let delivery = HeartbeatDelivery::new(
            &clawless_automation::heartbeat::HeartbeatConfig::default(),
            clawless_automation::heartbeat::HeartbeatVisibility::default(),
            clawless_automation::heartbeat::AlertTarget::TargetNone,
            Some(1_000),
        );
        let prepared = heartbeat_message(
            message("", false).chat,
            "main:1000",
            "Check HEARTBEAT.md",
            delivery.clone(),
        );
        assert!(prepared.heartbeat && prepared.message.sender_is_owner);
        assert_eq!(prepared.message.message_id, "heartbeat:main:1000");
        assert_eq!(prepared.heartbeat_delivery, Some(delivery));
    }
}
