//! The `<available_skills>` block the model sees (spec §4.2–§4.5): the full and compact
//! formats, `~` compaction of locations, and the count and size limits with their notes.

/// What one skill contributes to the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptSkill<'a> {
    /// Skill name.
    pub name: &'a str,
    /// Skill description (omitted in the compact format).
    pub description: &'a str,
    /// Location of its `SKILL.md` (already compacted if it should be).
    pub location: &'a str,
}

/// Characters reserved for the warning line when the compact format is chosen.
pub const COMPACT_WARNING_OVERHEAD: usize = 150;

/// The command the notes point people to.
const AUDIT_COMMAND: &str = "clawless skills check";

const HEADER_FIRST: &str =
    "\n\nThe following skills provide specialized instructions for specific tasks.";
const HEADER_FULL: &str =
    "Use the read tool to load a skill's file when the task matches its description.";
const HEADER_COMPACT: &str =
    "Use the read tool to load a skill's file when the task matches its name.";
const HEADER_PATHS: &str = "When a skill file references a relative path, resolve it against the skill directory \
                            (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.";

/// XML-escapes `&`, `<`, `>`, `"` and `'`.
pub fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            other => out.push(other),
        }
    }
    out
}

/// The full format: name, description and location of each skill; `""` for none.
pub fn format_skills_full(skills: &[PromptSkill<'_>]) -> String {
    format_block(skills, true)
}

/// The compact format: name and location only; `""` for none.
pub fn format_skills_compact(skills: &[PromptSkill<'_>]) -> String {
    format_block(skills, false)
}

fn format_block(skills: &[PromptSkill<'_>], with_descriptions: bool) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(512 + skills.len() * 160);
    for line in [
        HEADER_FIRST,
        if with_descriptions {
            HEADER_FULL
        } else {
            HEADER_COMPACT
        },
        HEADER_PATHS,
        "",
    ] {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("<available_skills>\n");
    for skill in skills {
        out.push_str("  <skill>\n    <name>");
        out.push_str(&escape_xml(skill.name));
        out.push_str("</name>\n");
        if with_descriptions {
            out.push_str("    <description>");
            out.push_str(&escape_xml(skill.description));
            out.push_str("</description>\n");
        }
        out.push_str("    <location>");
        out.push_str(&escape_xml(skill.location));
        out.push_str("</location>\n  </skill>\n");
    }
    out.push_str("</available_skills>");
    out
}

/// Length as JavaScript counts it (UTF-16 code units): the unit the limits are in.
pub fn js_length(text: &str) -> usize {
    text.encode_utf16().count()
}

/// Replaces a leading home directory with `~` (the longest matching home wins).
pub fn compact_location(location: &str, home_dirs: &[String]) -> String {
    let mut homes: Vec<&str> = home_dirs
        .iter()
        .map(|h| h.trim_end_matches('/'))
        .filter(|h| !h.is_empty())
        .collect();
    homes.sort_by_key(|home| std::cmp::Reverse(home.len()));
    homes.dedup();
    for home in homes {
        if let Some(rest) = location
            .strip_prefix(home)
            .and_then(|rest| rest.strip_prefix('/'))
        {
            return format!("~/{rest}");
        }
    }
    location.to_owned()
}

/// The limits applied to a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptLimits {
    /// Skills listed at most.
    pub max_skills: usize,
    /// Characters (UTF-16 units) the block may take.
    pub max_chars: usize,
}

/// The block after limits, and how it was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitedBlock {
    /// The formatted block (starts with `\n\n`, or is empty).
    pub block: String,
    /// How many skills it lists.
    pub included: usize,
    /// Whether skills were left out.
    pub truncated: bool,
    /// Whether descriptions were dropped.
    pub compact: bool,
}

/// Applies the count cap, then full → compact → compact prefix (binary search).
pub fn apply_prompt_limits(skills: &[PromptSkill<'_>], limits: PromptLimits) -> LimitedBlock {
    let by_count = &skills[..skills.len().min(limits.max_skills)];
    let mut truncated = skills.len() > by_count.len();
    let full = format_skills_full(by_count);
    if js_length(&full) <= limits.max_chars {
        return LimitedBlock {
            block: full,
            included: by_count.len(),
            truncated,
            compact: false,
        };
    }
    let compact_budget = limits.max_chars.saturating_sub(COMPACT_WARNING_OVERHEAD);
    let fits_compact =
        |count: usize| js_length(&format_skills_compact(&by_count[..count])) <= compact_budget;
    let mut included = by_count.len();
    if !fits_compact(included) {
        let (mut low, mut high) = (0, by_count.len());
        while low < high {
            let mid = (low + high).div_ceil(2);
            if fits_compact(mid) {
                low = mid
            } else {
                high = mid - 1
            }
        }
        included = low;
        truncated = true;
    }
    LimitedBlock {
        block: format_skills_compact(&by_count[..included]),
        included,
        truncated,
        compact: true,
    }
}

/// The warning line for a cut block, if it was cut; `visible` is the number of skills
/// that would be listed without limits.
pub fn limits_note(limited: &LimitedBlock, visible: usize) -> Option<String> {
    if limited.truncated {
        let compact = if limited.compact {
            " (compact format, descriptions omitted)"
        } else {
            ""
        };
        Some(format!(
            "⚠️ Skills truncated: included {} of {visible}{compact}. Run `{AUDIT_COMMAND}` to audit.",
            limited.included
        ))
    } else if limited.compact {
        Some(format!(
            "⚠️ Skills catalog using compact format (descriptions omitted). Run `{AUDIT_COMMAND}` to audit."
        ))
    } else {
        None
    }
}

/// Joins the optional node note, the limits note and the block, skipping empty parts.
pub fn assemble_prompt(node_note: Option<&str>, limits_note: Option<&str>, block: &str) -> String {
    [node_note.map(str::trim), limits_note, Some(block)]
        .into_iter()
        .flatten()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}
