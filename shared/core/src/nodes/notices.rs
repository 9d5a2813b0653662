//! What the chat and the model are told about exec on a node host: the approval request,
//! the `Exec finished` / `Exec denied` follow-ups (spec §7.8, node variants), the tool result
//! text (§8.3) and the offline-node result.

use clawless_exec::node::wire::ExecOutcome;

/// Longest output tail in an `Exec finished` follow-up.
const FINISHED_TAIL_CHARS: usize = 400;

/// The short code of an approval: the job id's first 8 characters.
pub fn approval_slug(job_id: &str) -> &str {
    job_id.get(..8).unwrap_or(job_id)
}

/// What an approval request shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPrompt<'a> {
    /// The job awaiting approval.
    pub job_id: &'a str,
    /// The node that would run it.
    pub node_id: &'a str,
    /// Its working directory, when one was given.
    pub cwd: Option<&'a str>,
    /// The command as the model wrote it.
    pub command: &'a str,
    /// False when the policy asks every time (`ask=always`): no `allow-always`.
    pub allow_always: bool,
    /// Warnings shown first (heredocs, …).
    pub warnings: &'a [String],
}

/// The approval request for the chat (spec §7.8), with `/approve <slug> …`.
pub fn approval_request_text(prompt: &ApprovalPrompt<'_>) -> String {
    let slug = approval_slug(prompt.job_id);
    let mut text = String::new();
    if !prompt.warnings.is_empty() {
        text.push_str(&prompt.warnings.join("\n"));
        text.push_str("\n\n");
    }
    let fence = code_fence(prompt.command);
    let decisions = if prompt.allow_always {
        "allow-once|allow-always|deny"
    } else {
        "allow-once|deny"
    };
    text.push_str(&format!(
        "Approval required (id {slug}, full {full}).\nHost: node\nNode: {node}\nCWD: {cwd}\nCommand:\n{fence}sh\n{command}\n{fence}\nMode: foreground (interactive approvals available).\nBackground mode requires pre-approved policy (allow-always or ask=off).\nReply with: /approve {slug} {decisions}\n",
        full = prompt.job_id,
        node = prompt.node_id,
        cwd = prompt.cwd.unwrap_or("(node default)"),
        command = prompt.command,
    ));
    if !prompt.allow_always {
        text.push_str("The effective approval policy requires approval every time, so Allow Always is unavailable.\n");
    }
    text.push_str("If the short code is ambiguous, use the full id in /approve.");
    text
}

/// A fence longer than any run of backticks in `command`.
fn code_fence(command: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for ch in command.chars() {
        if ch == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// `Exec finished (node=<node> id=<id>, code <n>)` plus the output's tail.
pub fn exec_finished_text(node_id: &str, job_id: &str, outcome: &ExecOutcome) -> String {
    let code = if outcome.timed_out {
        "timeout".to_owned()
    } else {
        outcome
            .exit_code
            .map_or_else(|| "signal".to_owned(), |code| code.to_string())
    };
    let output = aggregated_output(outcome);
    let tail = tail_chars(output.trim(), FINISHED_TAIL_CHARS);
    let head = format!(
        "Exec finished (node={node_id} id={}, code {code})",
        approval_slug(job_id)
    );
    if tail.is_empty() {
        head
    } else {
        format!("{head}\n{tail}")
    }
}

/// `Exec denied (node=<node> id=<id>, <reason>): <command>`.
pub fn exec_denied_text(node_id: &str, job_id: &str, reason: &str, command: &str) -> String {
    format!(
        "Exec denied (node={node_id} id={}, {reason}): {command}",
        approval_slug(job_id)
    )
}

/// The tool result the model gets for a node's outcome (spec §8.3): stdout, else stderr,
/// else the error; an error result unless the command succeeded.
pub fn tool_result_text(outcome: &ExecOutcome) -> (String, bool) {
    let text = [&outcome.stdout, &outcome.stderr]
        .into_iter()
        .find(|text| !text.is_empty())
        .cloned()
        .or_else(|| outcome.error.clone())
        .unwrap_or_default();
    let text = if outcome.success {
        text
    } else if outcome.timed_out {
        format!("{text}\n(Command timed out and was killed.)")
            .trim_start()
            .to_owned()
    } else if let Some(code) = outcome.exit_code {
        format!("{text}\n(Command exited with code {code}.)")
            .trim_start()
            .to_owned()
    } else {
        text
    };
    (text, !outcome.success)
}

/// The tool result when the chosen node cannot take jobs.
pub fn node_offline_text(node_id: &str, why: &str) -> String {
    format!("Node host {node_id} is offline ({why}); the command was not run.")
}

/// stdout, stderr and error joined by newlines, empty parts left out.
fn aggregated_output(outcome: &ExecOutcome) -> String {
    [
        outcome.stdout.as_str(),
        outcome.stderr.as_str(),
        outcome.error.as_deref().unwrap_or(""),
    ]
    .into_iter()
    .filter(|part| !part.is_empty())
    .collect::<Vec<_>>()
    .join("\n")
}

fn tail_chars(text: &str, max: usize) -> &str {
    let count = text.chars().count();
    if count <= max {
        return text;
    }
    let skip = count - max;
    let start = text.char_indices().nth(skip).map_or(0, |(index, _)| index);
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(stdout: &str, code: Option<i32>) -> ExecOutcome {
        ExecOutcome {
            exit_code: code,
            timed_out: false,
            success: code == Some(0),
            stdout: stdout.to_owned(),
            stderr: String::new(),
            error: None,
        }
    }

    #[test]
    fn the_approval_request_names_node_cwd_command_and_the_reply_forms() {
        let warnings = vec![
            "Warning: heredoc execution requires explicit approval in allowlist mode.".to_owned(),
        ];
        let text = approval_request_text(&ApprovalPrompt {
            job_id: "0123456789abcdef0123456789abcdef",
            node_id: "laptop",
            cwd: None,
            command: "uname -a",
            allow_always: true,
            warnings: &warnings,
        });
        assert_eq!(
            text,
            "Warning: heredoc execution requires explicit approval in allowlist mode.\n\n\
             Approval required (id 01234567, full 0123456789abcdef0123456789abcdef).\n\
             Host: node\nNode: laptop\nCWD: (node default)\nCommand:\n```sh\nuname -a\n```\n\
             Mode: foreground (interactive approvals available).\n\
             Background mode requires pre-approved policy (allow-always or ask=off).\n\
             Reply with: /approve 01234567 allow-once|allow-always|deny\n\
             If the short code is ambiguous, use the full id in /approve."
        );
    }

    #[test]
    fn ask_always_offers_no_allow_always_and_fences_outgrow_the_command() {
        let text = approval_request_text(&ApprovalPrompt {
            job_id: "abc",
            node_id: "n",
            cwd: Some("/srv"),
            command: "echo ```x```",
            allow_always: false,
            warnings: &[],
        });
        assert!(text.contains("CWD: /srv"));
        assert!(text.contains("````sh\necho ```x```\n````"));
        assert!(text.contains("Reply with: /approve abc allow-once|deny\n"));
        assert!(text.contains("so Allow Always is unavailable."));
    }

    #[test]
    fn finished_follow_ups_carry_the_code_and_a_400_char_tail() {
        let long = format!("{}END", "x".repeat(1000));
        let text = exec_finished_text("n1", "deadbeefcafe", &outcome(&long, Some(0)));
        let (head, tail) = text.split_once('\n').unwrap();
        assert_eq!(head, "Exec finished (node=n1 id=deadbeef, code 0)");
        assert_eq!(tail.chars().count(), 400);
        assert!(tail.ends_with("END"));
        let mut timed_out = outcome("", None);
        timed_out.timed_out = true;
        assert_eq!(
            exec_finished_text("n1", "deadbeefcafe", &timed_out),
            "Exec finished (node=n1 id=deadbeef, code timeout)"
        );
    }

    #[test]
    fn denied_follow_ups_name_the_reason_and_command() {
        assert_eq!(
            exec_denied_text("n1", "deadbeefcafe", "user-denied", "rm -rf /"),
            "Exec denied (node=n1 id=deadbeef, user-denied): rm -rf /"
        );
    }

    #[test]
    fn the_model_gets_stdout_else_stderr_else_the_error() {
        assert_eq!(
            tool_result_text(&outcome("out", Some(0))),
            ("out".to_owned(), false)
        );
        let mut failed = outcome("", Some(2));
        failed.stderr = "boom".to_owned();
        assert_eq!(
            tool_result_text(&failed),
            ("boom\n(Command exited with code 2.)".to_owned(), true)
        );
        let mut refused = outcome("", None);
        refused.error = Some("SYSTEM_RUN_DENIED: allowlist miss".to_owned());
        assert_eq!(
            tool_result_text(&refused),
            ("SYSTEM_RUN_DENIED: allowlist miss".to_owned(), true)
        );
    }
}
