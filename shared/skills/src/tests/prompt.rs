//! The skills block (spec §4.2–§4.5): exact formats, compaction and the three limit tiers.

use crate::prompt::{
    COMPACT_WARNING_OVERHEAD, LimitedBlock, PromptLimits, PromptSkill, apply_prompt_limits,
    assemble_prompt, compact_location, format_skills_compact, format_skills_full, js_length,
    limits_note,
};

const HOME: &str = "/Users/openclaw-test-user";

struct Owned {
    name: String,
    description: String,
    location: String,
}

fn many(count: usize, description_len: usize) -> Vec<Owned> {
    (0..count)
        .map(|i| Owned {
            name: format!("skill-{i}"),
            description: "d".repeat(description_len),
            location: format!("~/skills/skill-{i}/SKILL.md"),
        })
        .collect()
}

fn view(skills: &[Owned]) -> Vec<PromptSkill<'_>> {
    skills
        .iter()
        .map(|s| PromptSkill {
            name: &s.name,
            description: &s.description,
            location: &s.location,
        })
        .collect()
}

/// The prompt text as the snapshot assembles it.
fn prompt(
    skills: &[PromptSkill<'_>], max_skills: usize, max_chars: usize,
) -> (String, LimitedBlock) {
    let limited = apply_prompt_limits(
        skills,
        PromptLimits {
            max_skills,
            max_chars,
        },
    );
    let note = limits_note(&limited, skills.len());
    (
        assemble_prompt(None, note.as_deref(), &limited.block),
        limited,
    )
}

#[test]
fn full_format_matches_the_spec_vector_byte_for_byte() {
    let skills = [PromptSkill {
        name: "weather",
        description: "Get weather <data> & forecasts",
        location: "/skills/weather/SKILL.md",
    }];
    assert_eq!(
        format_skills_full(&skills),
        "\n\nThe following skills provide specialized instructions for specific tasks.\nUse the read tool to load a skill's file when the task matches its description.\nWhen a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.\n\n<available_skills>\n  <skill>\n    <name>weather</name>\n    <description>Get weather &lt;data&gt; &amp; forecasts</description>\n    <location>/skills/weather/SKILL.md</location>\n  </skill>\n</available_skills>"
    );
    assert_eq!(format_skills_full(&[]), "");
}

#[test]
fn compact_format_names_the_task_by_name_and_escapes() {
    let skills = [PromptSkill {
        name: "a<b&c",
        description: "unused",
        location: "/x/'q\"/SKILL.md",
    }];
    let block = format_skills_compact(&skills);
    assert!(
        block.contains("Use the read tool to load a skill's file when the task matches its name.")
    );
    assert!(block.contains("<name>a&lt;b&amp;c</name>"));
    assert!(block.contains("<location>/x/&apos;q&quot;/SKILL.md</location>"));
    assert!(!block.contains("<description>"));
}

#[test]
fn home_prefixes_compact_to_a_tilde_longest_first() {
    let homes = vec![HOME.to_owned(), format!("{HOME}/nested")];
    assert_eq!(
        compact_location(&format!("{HOME}/nested/s/SKILL.md"), &homes),
        "~/s/SKILL.md"
    );
    assert_eq!(
        compact_location(&format!("{HOME}/s/SKILL.md"), &homes),
        "~/s/SKILL.md"
    );
    assert_eq!(
        compact_location(&format!("{HOME}x/s/SKILL.md"), &homes),
        format!("{HOME}x/s/SKILL.md")
    );
    assert_eq!(
        compact_location("s3://bucket/skills/SKILL.md", &homes),
        "s3://bucket/skills/SKILL.md"
    );
}

#[test]
fn one_skill_with_a_large_budget_keeps_descriptions_and_no_warning() {
    let skills = many(1, 20);
    let (text, _) = prompt(&view(&skills), 150, 50_000);
    assert!(text.contains("<description>"));
    assert!(!text.contains("⚠️"));
}

#[test]
fn a_budget_between_compact_and_full_switches_to_compact_with_every_skill() {
    let skills = many(20, 200);
    let views = view(&skills);
    let full = js_length(&format_skills_full(&views));
    let compact = js_length(&format_skills_compact(&views));
    let budget = (compact + COMPACT_WARNING_OVERHEAD + full) / 2;
    assert!(budget > compact + COMPACT_WARNING_OVERHEAD && budget < full);
    let (text, _) = prompt(&views, 150, budget);
    assert!(!text.contains("<description>"));
    assert!(text.contains("compact format (descriptions omitted)"));
    assert!(!text.contains("included"));
    assert!(text.contains("skill-0<") && text.contains("skill-19<"));
    assert!(text.starts_with(
        "⚠️ Skills catalog using compact format (descriptions omitted). Run `clawless skills check` to audit.\n\n\n"
    ));
}

#[test]
fn a_tight_budget_keeps_a_compact_prefix() {
    let skills = many(100, 50);
    let (text, limited) = prompt(&view(&skills), 150, 2_000);
    assert!(text.contains("compact format, descriptions omitted"));
    assert!(limited.included > 0 && limited.included < 100);
    assert!(text.contains(&format!("included {} of 100", limited.included)));
    assert!(text.contains("skill-0<"));
    assert!(js_length(&limited.block) <= 2_000 - COMPACT_WARNING_OVERHEAD);
    // the prefix is the largest that fits
    let one_more = format_skills_compact(&view(&skills)[..limited.included + 1]);
    assert!(js_length(&one_more) > 2_000 - COMPACT_WARNING_OVERHEAD);
}

#[test]
fn count_cap_and_compact_combine_in_the_note() {
    let skills = many(30, 200);
    let views = view(&skills);
    let budget = js_length(&format_skills_compact(&views[..10])) + 200;
    let (text, _) = prompt(&views, 10, budget);
    assert!(text.contains("included 10 of 30"));
    assert!(text.contains("compact format, descriptions omitted"));
}

#[test]
fn a_budget_too_small_for_any_skill_includes_none() {
    let skills = many(1, 20);
    let (text, limited) = prompt(&view(&skills), 150, 10);
    assert!(text.contains("included 0 of 1"));
    assert!(!text.contains("skill-0"));
    assert_eq!(limited.block, "");
}

#[test]
fn a_count_cap_alone_keeps_the_full_format() {
    let skills = many(20, 10);
    let (text, _) = prompt(&view(&skills), 5, 50_000);
    assert!(text.contains("included 5 of 20"));
    assert!(!text.contains("compact"));
    assert!(text.contains("<description>"));
    assert_eq!(
        text.lines().next().unwrap(),
        "⚠️ Skills truncated: included 5 of 20. Run `clawless skills check` to audit."
    );
}

#[test]
fn a_budget_inside_the_warning_overhead_falls_into_the_prefix_search() {
    let skills = many(50, 30);
    let views = view(&skills);
    let budget = js_length(&format_skills_compact(&views)) + 50;
    let (text, _) = prompt(&views, 150, budget);
    assert!(text.contains("included"));
}

#[test]
fn budgets_are_measured_on_compacted_locations() {
    // GIVEN 30 skills under a long home directory
    let long_home = format!("/home/{}", "h".repeat(80));
    let homes = std::slice::from_ref(&long_home);
    let canonical: Vec<Owned> = (0..30)
        .map(|i| Owned {
            name: format!("skill-{i}"),
            description: "x".repeat(100),
            location: format!("{long_home}/skills/skill-{i}/SKILL.md"),
        })
        .collect();
    let compacted: Vec<Owned> = canonical
        .iter()
        .map(|s| Owned {
            location: compact_location(&s.location, homes),
            name: s.name.clone(),
            description: s.description.clone(),
        })
        .collect();
    // WHEN the budget fits the compact format with compacted paths but not with canonical ones
    let compacted_len = js_length(&format_skills_compact(&view(&compacted)));
    let canonical_len = js_length(&format_skills_compact(&view(&canonical)));
    let budget = COMPACT_WARNING_OVERHEAD + (compacted_len + canonical_len) / 2;
    let (text, limited) = prompt(&view(&compacted), 150, budget);
    // THEN all 30 skills are kept, in compact form
    assert_eq!(limited.included, 30);
    assert!(limited.compact);
    assert!(!text.contains("included"));
    assert!(text.contains("<location>~/skills/skill-29/SKILL.md</location>"));
}

#[test]
fn the_node_note_comes_first_and_stands_alone_without_skills() {
    assert_eq!(
        assemble_prompt(Some("  Node available.  "), None, ""),
        "Node available."
    );
    assert_eq!(assemble_prompt(None, None, ""), "");
    assert_eq!(
        assemble_prompt(Some("N"), Some("W"), "\n\nB"),
        "N\nW\n\n\nB"
    );
}
