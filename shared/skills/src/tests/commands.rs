//! Slash command specs, parsing, rewrite and dispatch (spec §5), and `skills.bins` (§6).

use serde_json::json;

use super::*;
use crate::bins::collect_skill_bins;
use crate::commands::{
    RESERVED_COMMAND_NAMES, SkillCommandSpec, build_command_specs, dispatched_tool_call,
    may_be_skill_command, normalize_command_body, resolve_skill_command, sanitize_command_name,
    skill_rewrite_text, unique_command_name,
};
use crate::eligibility::filter_entries;
use crate::metadata::{ArgMode, ToolDispatch};

async fn specs_for(files: &[(&str, String)], reserved: &[&str]) -> Vec<SkillCommandSpec> {
    let store = store_with(files);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    let setting = Setting::default();
    let inputs = setting.inputs();
    build_command_specs(&filter_entries(&loaded.entries, inputs, None), reserved)
}

#[tokio::test]
async fn command_names_are_sanitised_and_made_unique_against_builtins() {
    let specs = specs_for(
        &[
            (
                "s/hello-world/SKILL.md",
                skill_md("hello-world", "Hello", None),
            ),
            (
                "s/hello_world/SKILL.md",
                skill_md("hello_world", "Hello again", None),
            ),
            ("s/help/SKILL.md", skill_md("help", "Help skill", None)),
            (
                "s/hidden-skill/SKILL.md",
                "---\nname: hidden-skill\ndescription: H\nuser-invocable: false\n---\n".into(),
            ),
        ],
        &["help"],
    )
    .await;
    let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["hello_world", "hello_world_2", "help_2"]);
    assert_eq!(
        specs
            .iter()
            .find(|s| s.name == "hello_world")
            .unwrap()
            .skill_name,
        "hello-world"
    );
}

#[tokio::test]
async fn hidden_from_the_model_still_gets_a_command() {
    let specs = specs_for(
        &[(
            "s/quiet/SKILL.md",
            "---\nname: quiet\ndescription: Q\ndisable-model-invocation: true\n---\n".into(),
        )],
        RESERVED_COMMAND_NAMES,
    )
    .await;
    assert_eq!(specs.len(), 1);
}

#[tokio::test]
async fn long_descriptions_are_cut_to_100_characters_with_an_ellipsis() {
    let long = "word ".repeat(40);
    let specs = specs_for(
        &[
            ("s/long/SKILL.md", skill_md("long", &long, None)),
            (
                "s/short/SKILL.md",
                skill_md("short", "Short description", None),
            ),
        ],
        &[],
    )
    .await;
    let long_spec = specs.iter().find(|s| s.skill_name == "long").unwrap();
    assert_eq!(long_spec.description.chars().count(), 100);
    assert!(long_spec.description.ends_with('…'));
    assert_eq!(
        specs
            .iter()
            .find(|s| s.skill_name == "short")
            .unwrap()
            .description,
        "Short description"
    );
}

#[tokio::test]
async fn tool_dispatch_is_carried_into_the_spec() {
    let specs = specs_for(
        &[("s/send/SKILL.md", "---\nname: send\ndescription: Send\ncommand-dispatch: tool\ncommand-tool: sessions_send\n---\n".into())],
        &[],
    )
    .await;
    assert_eq!(
        specs[0].dispatch,
        Some(ToolDispatch {
            tool_name: "sessions_send".into(),
            arg_mode: ArgMode::Raw
        })
    );
}

#[test]
fn sanitising_handles_symbols_unicode_and_length() {
    assert_eq!(sanitize_command_name("Hello World!"), "hello_world");
    assert_eq!(sanitize_command_name("__a--b__"), "a_b");
    assert_eq!(sanitize_command_name("日本語"), "skill");
    assert_eq!(sanitize_command_name(""), "skill");
    let long = sanitize_command_name(&"a".repeat(40));
    assert_eq!(long.len(), 32);
    // the cut happens after stripping, so a trailing underscore can survive
    assert_eq!(
        sanitize_command_name(&format!("{}-b", "a".repeat(31))),
        format!("{}_", "a".repeat(31))
    );
}

#[test]
fn unique_names_keep_within_32_characters() {
    let base = "x".repeat(32);
    let used = [base.clone()].into_iter().collect();
    let unique = unique_command_name(&base, &used);
    assert_eq!(unique, format!("{}_2", "x".repeat(30)));
    assert!(unique.len() <= 32);
}

fn demo_specs() -> Vec<SkillCommandSpec> {
    vec![SkillCommandSpec {
        name: "demo_skill".into(),
        skill_name: "demo-skill".into(),
        description: "Demo".into(),
        dispatch: None,
    }]
}

#[test]
fn slash_commands_resolve_by_command_name() {
    let hit = resolve_skill_command("/demo_skill do the thing", &demo_specs()).unwrap();
    assert_eq!(hit.spec.skill_name, "demo-skill");
    assert_eq!(hit.args.as_deref(), Some("do the thing"));
    assert_eq!(
        resolve_skill_command("/DEMO_SKILL", &demo_specs())
            .unwrap()
            .args,
        None
    );
}

#[test]
fn the_skill_command_resolves_by_name_or_skill_name() {
    let hit = resolve_skill_command("/skill demo_skill do the thing", &demo_specs()).unwrap();
    assert_eq!(hit.spec.name, "demo_skill");
    assert_eq!(hit.args.as_deref(), Some("do the thing"));
    let hit = resolve_skill_command("/skill demo-skill", &demo_specs()).unwrap();
    assert_eq!(hit.spec.name, "demo_skill");
    assert_eq!(hit.args, None);
    assert!(
        resolve_skill_command("/skill Demo Skill", &demo_specs()).is_none(),
        "only the first word names the skill"
    );
    assert!(resolve_skill_command("/skill", &demo_specs()).is_none());
}

#[test]
fn unknown_commands_do_not_resolve() {
    assert!(resolve_skill_command("/unknown arg", &demo_specs()).is_none());
    assert!(resolve_skill_command("not a command", &demo_specs()).is_none());
    assert!(resolve_skill_command("/", &demo_specs()).is_none());
}

#[test]
fn command_bodies_keep_only_the_first_line_and_drop_colons_and_mentions() {
    assert_eq!(
        normalize_command_body("  /demo_skill: go\nsecond line", None),
        "/demo_skill go"
    );
    assert_eq!(
        normalize_command_body("/demo_skill@ClawBot args", Some("clawbot")),
        "/demo_skill args"
    );
    assert_eq!(
        normalize_command_body("/demo_skill@other args", Some("clawbot")),
        "/demo_skill@other args"
    );
    assert_eq!(normalize_command_body("hello\nworld", None), "hello\nworld");
}

#[test]
fn builtins_are_not_looked_up_as_skill_commands_except_skill() {
    assert!(!may_be_skill_command("/help"));
    assert!(!may_be_skill_command("/status now"));
    assert!(may_be_skill_command("/skill demo"));
    assert!(may_be_skill_command("/demo_skill x"));
    assert!(!may_be_skill_command("hello"));
}

#[test]
fn a_non_dispatch_command_rewrites_the_message() {
    assert_eq!(
        skill_rewrite_text("demo-skill", None),
        "Use the \"demo-skill\" skill for this request."
    );
    assert_eq!(
        skill_rewrite_text("demo-skill", Some("do it")),
        "Use the \"demo-skill\" skill for this request.\n\nUser input:\ndo it"
    );
}

#[test]
fn a_dispatch_command_becomes_a_direct_tool_call() {
    let mut specs = demo_specs();
    specs[0].dispatch = Some(ToolDispatch {
        tool_name: "sessions_send".into(),
        arg_mode: ArgMode::Raw,
    });
    let hit = resolve_skill_command("/demo_skill  hello there ", &specs).unwrap();
    let call = dispatched_tool_call(&hit).unwrap();
    assert_eq!(call.tool_name, "sessions_send");
    assert_eq!(
        call.params,
        json!({"command": "hello there", "commandName": "demo_skill", "skillName": "demo-skill"})
    );
    let bare = resolve_skill_command("/demo_skill", &specs).unwrap();
    assert_eq!(dispatched_tool_call(&bare).unwrap().params["command"], "");
    assert!(
        dispatched_tool_call(&resolve_skill_command("/demo_skill", &demo_specs()).unwrap())
            .is_none()
    );
}

#[tokio::test]
async fn skills_bins_is_the_sorted_union_ignoring_eligibility() {
    let store = store_with(&[
        (
            "s/a/SKILL.md",
            skill_md(
                "a",
                "A",
                Some(r#"{"openclaw":{"os":["darwin"],"requires":{"bins":["memo"," gh "]}}}"#),
            ),
        ),
        (
            "s/b/SKILL.md",
            skill_md(
                "b",
                "B",
                Some(
                    r#"{"openclaw":{"requires":{"anyBins":["claude","codex"]},"install":[{"kind":"brew","formula":"jq","bins":["jq","gh"]}]}}"#,
                ),
            ),
        ),
        (
            "s/c/SKILL.md",
            skill_md(
                "c",
                "C",
                Some(r#"{"openclaw":{"requires":{"bins":["", "Zeta"]}}}"#),
            ),
        ),
        ("s/d/SKILL.md", skill_md("d", "No metadata", None)),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(
        collect_skill_bins(&loaded.entries),
        ["Zeta", "claude", "codex", "gh", "jq", "memo"]
    );
}
