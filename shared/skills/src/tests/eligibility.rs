//! Eligibility (spec §3.1) and the agent skill filter (§3.2).

use serde_json::{Value, json};

use super::*;
use crate::eligibility::{
    config_path_truthy, filter_entries, filters_match, ineligibility, is_eligible,
    normalize_skill_filter,
};
use crate::{EligibilityContext, EligibilityInputs, Ineligibility, SkillEntryConfig, SkillsConfig};

async fn spec_skills() -> Arc<LoadedSkills> {
    let store = store_with(&[
        (
            "s/bin-skill/SKILL.md",
            skill_md(
                "bin-skill",
                "Needs a bin",
                Some(r#"{"openclaw":{"requires":{"bins":["fakebin"]}}}"#),
            ),
        ),
        (
            "s/anybin-skill/SKILL.md",
            skill_md(
                "anybin-skill",
                "Needs any bin",
                Some(r#"{"openclaw":{"requires":{"anyBins":["missingbin","fakebin"]}}}"#),
            ),
        ),
        (
            "s/config-skill/SKILL.md",
            skill_md(
                "config-skill",
                "Needs config",
                Some(r#"{"openclaw":{"requires":{"config":["browser.enabled"]}}}"#),
            ),
        ),
        (
            "s/always-skill/SKILL.md",
            skill_md(
                "always-skill",
                "Always",
                Some(r#"{"openclaw":{"always":true,"requires":{"env":["MISSING"]}}}"#),
            ),
        ),
        (
            "s/env-skill/SKILL.md",
            skill_md(
                "env-skill",
                "Needs env",
                Some(r#"{"openclaw":{"requires":{"env":["ENV_KEY"]},"primaryEnv":"ENV_KEY"}}"#),
            ),
        ),
    ]);
    load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await
}

fn eligible_names(
    loaded: &LoadedSkills, skills: &SkillsConfig, config: &Value, context: &EligibilityContext,
) -> Vec<String> {
    let inputs = EligibilityInputs {
        skills,
        config,
        context,
    };
    let mut names: Vec<String> = loaded
        .entries
        .iter()
        .filter(|e| is_eligible(e, inputs))
        .map(|e| e.name.clone())
        .collect();
    names.sort();
    names
}

fn linux_without_bins() -> EligibilityContext {
    EligibilityContext {
        platforms: ["linux".to_owned()].into(),
        ..EligibilityContext::default()
    }
}

#[tokio::test]
async fn with_no_bins_and_no_env_only_config_default_and_always_skills_are_eligible() {
    let loaded = spec_skills().await;
    let names = eligible_names(
        &loaded,
        &SkillsConfig::default(),
        &json!({}),
        &linux_without_bins(),
    );
    assert_eq!(names, ["always-skill", "config-skill"]);
}

#[tokio::test]
async fn node_bins_and_api_keys_satisfy_requirements_and_false_config_excludes() {
    let loaded = spec_skills().await;
    let mut skills = SkillsConfig::default();
    skills.entries.insert(
        "env-skill".into(),
        SkillEntryConfig {
            api_key: Some("ok".into()),
            ..Default::default()
        },
    );
    let mut context = linux_without_bins();
    context.bins.insert("fakebin".into());
    let names = eligible_names(
        &loaded,
        &skills,
        &json!({"browser": {"enabled": false}}),
        &context,
    );
    assert_eq!(
        names,
        ["always-skill", "anybin-skill", "bin-skill", "env-skill"]
    );
}

#[tokio::test]
async fn disabled_skill_key_excludes_the_skill_under_its_own_name() {
    let store = store_with(&[(
        "s/alias-skill/SKILL.md",
        skill_md(
            "alias-skill",
            "Aliased",
            Some(r#"{"openclaw":{"skillKey":"alias"}}"#),
        ),
    )]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    let mut skills = SkillsConfig::default();
    skills.entries.insert(
        "alias".into(),
        SkillEntryConfig {
            enabled: Some(false),
            ..Default::default()
        },
    );
    let context = EligibilityContext::empty();
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &json!({}),
        context: &context,
    };
    assert_eq!(
        ineligibility(&loaded.entries[0], inputs),
        [Ineligibility::Disabled]
    );
}

#[tokio::test]
async fn an_empty_api_key_does_not_satisfy_the_primary_env() {
    let store = store_with(&[(
        "s/gemini/SKILL.md",
        skill_md(
            "gemini",
            "Gemini",
            Some(
                r#"{"openclaw":{"requires":{"env":["GEMINI_API_KEY"]},"primaryEnv":"GEMINI_API_KEY"}}"#,
            ),
        ),
    )]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    let context = EligibilityContext::empty();
    for (key, expected) in [("", false), ("test-key", true)] {
        let mut skills = SkillsConfig::default();
        skills.entries.insert(
            "gemini".into(),
            SkillEntryConfig {
                api_key: Some(key.into()),
                ..Default::default()
            },
        );
        let inputs = EligibilityInputs {
            skills: &skills,
            config: &json!({}),
            context: &context,
        };
        assert_eq!(
            is_eligible(&loaded.entries[0], inputs),
            expected,
            "apiKey {key:?}"
        );
    }
}

#[tokio::test]
async fn entry_env_and_context_env_satisfy_requires_env() {
    let store = store_with(&[(
        "s/trello/SKILL.md",
        skill_md(
            "trello",
            "Trello",
            Some(r#"{"openclaw":{"requires":{"env":["TRELLO_API_KEY","TRELLO_TOKEN"]}}}"#),
        ),
    )]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    let mut skills = SkillsConfig::default();
    skills.entries.insert(
        "trello".into(),
        SkillEntryConfig {
            env: [("TRELLO_TOKEN".to_owned(), "t".to_owned())].into(),
            ..Default::default()
        },
    );
    let mut context = EligibilityContext::empty();
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &json!({}),
        context: &context,
    };
    assert_eq!(
        ineligibility(&loaded.entries[0], inputs),
        [Ineligibility::MissingEnv {
            env: vec!["TRELLO_API_KEY".into()]
        }]
    );
    context.env.insert("TRELLO_API_KEY".into());
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &json!({}),
        context: &context,
    };
    assert!(is_eligible(&loaded.entries[0], inputs));
}

#[tokio::test]
async fn os_is_checked_before_always() {
    let store = store_with(&[(
        "s/mac-only/SKILL.md",
        skill_md(
            "mac-only",
            "Mac",
            Some(r#"{"openclaw":{"always":true,"os":["darwin"]}}"#),
        ),
    )]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    let skills = SkillsConfig::default();
    let linux = linux_without_bins();
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &json!({}),
        context: &linux,
    };
    assert!(matches!(
        ineligibility(&loaded.entries[0], inputs).as_slice(),
        [Ineligibility::Os { .. }]
    ));
    let mac = EligibilityContext {
        platforms: ["darwin".to_owned()].into(),
        ..Default::default()
    };
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &json!({}),
        context: &mac,
    };
    assert!(is_eligible(&loaded.entries[0], inputs));
}

#[tokio::test]
async fn allow_bundled_only_restricts_bundled_skills() {
    let store = store_with(&[
        ("b/allowed/SKILL.md", skill_md("allowed", "Allowed", None)),
        ("b/blocked/SKILL.md", skill_md("blocked", "Blocked", None)),
        (
            "w/workspace-skill/SKILL.md",
            skill_md("workspace-skill", "Workspace", None),
        ),
    ]);
    let loaded = load(
        &[
            source(SkillSourceKind::Bundled, &store, "b"),
            source(SkillSourceKind::Workspace, &store, "w"),
        ],
        SkillLimits::default(),
    )
    .await;
    let skills = SkillsConfig {
        allow_bundled: vec![" allowed ".into(), "".into()],
        ..Default::default()
    };
    let names = eligible_names(&loaded, &skills, &json!({}), &EligibilityContext::empty());
    assert_eq!(names, ["allowed", "workspace-skill"]);
}

#[test]
fn config_truthiness_follows_javascript_with_browser_defaults() {
    let config = json!({"a": {"zero": 0, "one": 1, "blank": "  ", "text": "x", "list": [], "off": false, "nil": null}});
    for (path, expected) in [
        ("a.zero", false),
        ("a.one", true),
        ("a.blank", false),
        ("a.text", true),
        ("a.list", true),
        ("a.off", false),
        ("a.nil", false),
        ("a.missing", false),
        ("browser.enabled", true),
        ("browser.evaluateEnabled", true),
        ("channels.discord.token", false),
    ] {
        assert_eq!(config_path_truthy(&config, path), expected, "{path}");
    }
}

#[test]
fn skill_filters_are_normalised_and_compared_as_sets() {
    let raw: Vec<String> = [" weather ", "", "meme-factory"].map(String::from).to_vec();
    assert_eq!(
        normalize_skill_filter(Some(&raw)),
        Some(vec!["weather".to_owned(), "meme-factory".to_owned()])
    );
    assert_eq!(normalize_skill_filter(None), None);
    assert_eq!(normalize_skill_filter(Some(&[])), Some(vec![]));
    let a: Vec<String> = ["weather", "meme-factory"].map(String::from).to_vec();
    let b: Vec<String> = [" meme-factory ", "weather"].map(String::from).to_vec();
    assert!(filters_match(Some(&a), Some(&b)));
    assert!(filters_match(None, None));
    assert!(!filters_match(Some(&[]), None));
}

#[tokio::test]
async fn filter_keeps_named_skills_and_an_empty_filter_keeps_none() {
    let store = store_with(&[
        ("s/alpha/SKILL.md", skill_md("alpha", "A", None)),
        ("s/beta/SKILL.md", skill_md("beta", "B", None)),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    let setting = Setting::default();
    let inputs = setting.inputs();
    let only_alpha = vec!["alpha".to_owned()];
    let kept: Vec<&str> = filter_entries(&loaded.entries, inputs, Some(&only_alpha))
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(kept, ["alpha"]);
    assert!(filter_entries(&loaded.entries, inputs, Some(&[])).is_empty());
    assert_eq!(filter_entries(&loaded.entries, inputs, None).len(), 2);
}
