//! `HEARTBEAT.md` as the heartbeat sees it: whether it says anything at all, its optional
//! `tasks:` block of periodic tasks, which of them are due, and the rest of the file as
//! context for the task prompt.
//!
//! The file arrives as text (or as missing); reading it is the caller's business.
//!
//! ```text
//! tasks:
//!   - name: inbox
//!     interval: 30m
//!     prompt: "Check mail"
//! ```

use std::collections::BTreeMap;

use super::schedule::parse_duration_ms;

/// When each periodic task last ran (task name → epoch ms), kept in the session entry.
pub type HeartbeatTaskState = BTreeMap<String, u64>;

/// `HEARTBEAT.md` as found in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatFile<'a> {
    /// There is no such file. The heartbeat runs: the default prompt says "if it exists".
    Missing,
    /// The file could not be read. The heartbeat runs as if it were missing.
    Unreadable,
    /// The file's text.
    Present(&'a str),
}

/// True when a heartbeat file has nothing to act on: every line is blank, a Markdown
/// heading (`#` … followed by a space or the end of the line; `#TODO` is content), an empty
/// list item (`-`, `*` or `+`, optionally with `[ ]` or `[x]`), or a code fence marker
/// (```` ``` ```` or ```` ```md ````). A missing file is not "empty" (`None` → false): the
/// model may still decide what to do.
pub fn is_effectively_empty(content: Option<&str>) -> bool {
    let Some(content) = content else {
        return false;
    };
    content.lines().map(str::trim).all(|line| {
        line.is_empty() || is_heading(line) || is_empty_list_item(line) || is_fence(line)
    })
}

fn is_heading(line: &str) -> bool {
    let after = line.trim_start_matches('#');
    after.len() < line.len() && (after.is_empty() || after.starts_with(char::is_whitespace))
}

fn is_empty_list_item(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(['-', '*', '+']) else {
        return false;
    };
    let rest = rest.trim_start();
    if rest.is_empty() {
        return true;
    }
    let Some(inner) = rest.strip_prefix('[') else {
        return false;
    };
    let inner = inner.strip_prefix([' ', 'x', 'X']).unwrap_or(inner);
    inner
        .strip_prefix(']')
        .is_some_and(|after| after.trim().is_empty())
}

fn is_fence(line: &str) -> bool {
    line.strip_prefix("```").is_some_and(|language| {
        language
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    })
}

/// One periodic task of a `tasks:` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatTask {
    /// The task's name (its key in [`HeartbeatTaskState`]).
    pub name: String,
    /// How often it is due, as written (`30m`; a bare number means minutes).
    pub interval: String,
    /// What the model is asked to do.
    pub prompt: String,
}

impl HeartbeatTask {
    /// True when the task is due at `now_ms`: never run, or at least its interval since the
    /// last run. A task whose interval cannot be read is never due.
    pub fn is_due(&self, last_run_ms: Option<u64>, now_ms: u64) -> bool {
        let Some(interval_ms) = parse_duration_ms(&self.interval) else {
            return false;
        };
        last_run_ms.is_none_or(|last| now_ms.saturating_sub(last) >= interval_ms)
    }
}

/// How a line of `HEARTBEAT.md` relates to a `tasks:` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockLine {
    /// Outside any block.
    Outside,
    /// The `tasks:` line opening a block.
    Opening,
    /// A line inside the block.
    Inside,
}

/// Splits the file into lines, each marked by its place relative to `tasks:` blocks. A line
/// that is exactly `tasks:` (surrounding whitespace aside) opens a block; blank lines,
/// indented lines and lines starting with `-` continue it; any other line ends it (and is
/// outside).
fn classify_lines(content: &str) -> Vec<(&str, BlockLine)> {
    let mut in_block = false;
    content
        .lines()
        .map(|line| {
            let trimmed = line.trim();
            if trimmed == "tasks:" {
                in_block = true;
                return (line, BlockLine::Opening);
            }
            if in_block && (trimmed.is_empty() || is_indented(line) || trimmed.starts_with('-')) {
                return (line, BlockLine::Inside);
            }
            in_block = false;
            (line, BlockLine::Outside)
        })
        .collect()
}

fn is_indented(line: &str) -> bool {
    line.starts_with([' ', '\t'])
}

/// The tasks of the file's `tasks:` blocks, in order. An entry starts at `- name: <name>`
/// and takes the **indented** `interval: <duration>` and `prompt: <text>` lines after it
/// (other lines are ignored); one pair of surrounding quotes is removed from each value.
/// Entries missing a name, an interval or a prompt are left out.
pub fn parse_tasks(content: &str) -> Vec<HeartbeatTask> {
    #[derive(Default)]
    struct Entry {
        name: String,
        interval: String,
        prompt: String,
    }
    fn finish(entry: Option<Entry>, tasks: &mut Vec<HeartbeatTask>) {
        if let Some(entry) = entry
            && !entry.name.is_empty()
            && !entry.interval.is_empty()
            && !entry.prompt.is_empty()
        {
            tasks.push(HeartbeatTask {
                name: entry.name,
                interval: entry.interval,
                prompt: entry.prompt,
            });
        }
    }

    let mut tasks = Vec::new();
    let mut entry: Option<Entry> = None;
    for (line, place) in classify_lines(content) {
        if place != BlockLine::Inside {
            finish(entry.take(), &mut tasks);
            continue;
        }
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("- name:") {
            finish(entry.take(), &mut tasks);
            entry = Some(Entry {
                name: unquote(name),
                ..Entry::default()
            });
            continue;
        }
        let Some(current) = entry.as_mut() else {
            continue;
        };
        if !is_indented(line) {
            continue;
        }
        if let Some(interval) = trimmed.strip_prefix("interval:") {
            current.interval = unquote(interval);
        } else if let Some(prompt) = trimmed.strip_prefix("prompt:") {
            current.prompt = unquote(prompt);
        }
    }
    finish(entry, &mut tasks);
    tasks
}

/// The value trimmed, without one pair of matching surrounding quotes (`"…"` or `'…'`).
fn unquote(value: &str) -> String {
    let value = value.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner.trim().to_owned();
        }
    }
    value.to_owned()
}

/// The file without its `tasks:` blocks, trimmed: the standing instructions that go with the
/// task prompt as context.
pub fn context_outside_tasks(content: &str) -> String {
    let kept: Vec<&str> = classify_lines(content)
        .into_iter()
        .filter(|(_, place)| *place == BlockLine::Outside)
        .map(|(line, _)| line)
        .collect();
    kept.join("\n").trim().to_owned()
}

/// The tasks due at `now_ms` given when each last ran, in file order.
pub fn due_tasks<'a>(
    tasks: &'a [HeartbeatTask], state: &HeartbeatTaskState, now_ms: u64,
) -> Vec<&'a HeartbeatTask> {
    tasks
        .iter()
        .filter(|task| task.is_due(state.get(&task.name).copied(), now_ms))
        .collect()
}

/// Records that the named tasks ran in the heartbeat that started at `started_at_ms`. Call it
/// after every heartbeat that was not skipped, with the tasks that were due in it.
pub fn record_task_runs(state: &mut HeartbeatTaskState, names: &[String], started_at_ms: u64) {
    for name in names {
        state.insert(name.clone(), started_at_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: u64 = 60_000;

    const INBOX: &str = "tasks:\n  - name: inbox\n    interval: 30m\n    prompt: \"Check mail\"";

    #[test]
    fn headings_empty_items_and_fences_are_effectively_empty_but_a_missing_file_is_not() {
        // Spec §6 vector 7.
        assert!(is_effectively_empty(Some(
            "# Heartbeat\n\n- [ ]\n```md\n```"
        )));
        assert!(!is_effectively_empty(Some("#TODO")));
        assert!(!is_effectively_empty(None));
    }

    #[test]
    fn what_counts_as_content_in_a_heartbeat_file() {
        for empty in [
            "",
            "  \n\t\n",
            "## Checks\n###",
            "-\n*\n+ \n- [x]\n* [X]\n+ []\n-[ ]",
            "```\n```markdown\n```shell-session",
            // The seed file every workspace starts with.
        ] {
            assert!(is_effectively_empty(Some(empty)), "{empty:?}");
        }
        for content in [
            "- check the inbox",
            "- [ ] water plants",
            "#tag",
            "```js x",
            "tasks:",
            "plain text",
            "- [y]",
        ] {
            assert!(!is_effectively_empty(Some(content)), "{content:?}");
        }
    }

    #[test]
    fn a_task_not_yet_due_is_skipped_and_a_never_run_task_is_due() {
        // Spec §6 vector 16 (the parser and due-ness; the prompt is in `prompt`).
        let tasks = parse_tasks(INBOX);
        assert_eq!(
            tasks,
            [HeartbeatTask {
                name: "inbox".into(),
                interval: "30m".into(),
                prompt: "Check mail".into()
            }]
        );
        let now = 100 * MINUTE;
        let ran_ten_minutes_ago =
            HeartbeatTaskState::from([("inbox".to_owned(), now - 10 * MINUTE)]);
        assert!(due_tasks(&tasks, &ran_ten_minutes_ago, now).is_empty());
        assert_eq!(due_tasks(&tasks, &HeartbeatTaskState::new(), now).len(), 1);
    }

    #[test]
    fn a_task_is_due_once_its_interval_has_passed() {
        let task = HeartbeatTask {
            name: "t".into(),
            interval: "30".into(), // minutes
            prompt: "p".into(),
        };
        assert!(task.is_due(None, 0));
        assert!(!task.is_due(Some(0), 30 * MINUTE - 1));
        assert!(task.is_due(Some(0), 30 * MINUTE));
        let broken = HeartbeatTask {
            interval: "soon".into(),
            ..task
        };
        assert!(!broken.is_due(None, 0) && !broken.is_due(Some(0), u64::MAX));
    }

    #[test]
    fn the_tasks_block_parser_skips_incomplete_entries_and_stops_at_unindented_text() {
        let content = "\
# Checks
tasks:
  - name: 'inbox'
    interval: \"30m\"
    description: ignored
    prompt: 'Check mail'

  - name: no-prompt
    interval: 1h
  - name: calendar
    prompt: Look at today's events
    interval: 2h
- name: top-level
  interval: 1d
  prompt: Weekly review
interval: 5m
  - name: after-the-block
    interval: 1m
    prompt: never parsed
";
        let tasks = parse_tasks(content);
        let names: Vec<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["inbox", "calendar", "top-level"]);
        assert_eq!(tasks[0].interval, "30m");
        assert_eq!(tasks[1].prompt, "Look at today's events");
        assert!(parse_tasks("no tasks here\n- name: x\n  interval: 1m\n  prompt: y").is_empty());
    }

    #[test]
    fn unindented_fields_do_not_belong_to_an_entry() {
        let content = "tasks:\n- name: flat\ninterval: 5m\nprompt: p";
        assert!(parse_tasks(content).is_empty());
    }

    #[test]
    fn the_context_is_the_file_without_its_tasks_block() {
        assert_eq!(context_outside_tasks(INBOX), "");
        let content = "# Rules\nBe brief.\n\ntasks:\n  - name: a\n    interval: 1m\n    prompt: b\n\nAlso check the weather.\n";
        assert_eq!(
            context_outside_tasks(content),
            "# Rules\nBe brief.\n\nAlso check the weather."
        );
    }

    #[test]
    fn task_runs_are_recorded_by_name() {
        let mut state = HeartbeatTaskState::from([("old".to_owned(), 1)]);
        record_task_runs(&mut state, &["inbox".to_owned(), "old".to_owned()], 42);
        assert_eq!(
            state,
            HeartbeatTaskState::from([("inbox".to_owned(), 42), ("old".to_owned(), 42)])
        );
    }
}
