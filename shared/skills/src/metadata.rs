//! The typed view of a skill's frontmatter: `metadata.openclaw` (and the legacy `clawdbot`
//! / `moltbot` keys), install specs, invocation flags and command dispatch (spec §2.3–§2.4).
//!
//! Every rule is lenient in OpenClaw's way: a field of the wrong type is ignored, an invalid
//! install entry is dropped, and unparseable `metadata` means "no metadata" (so no
//! requirements), never an error. `metadata` is read as JSON5 after a nesting pre-scan, so
//! hostile input can neither panic nor exhaust the stack.

mod http_url;
mod install;

use indexmap::IndexMap;
use serde::Serialize;

use self::install::parse_install_spec;
use super::frontmatter::Frontmatter;
use super::frontmatter::js::{JsValue, MAX_DEPTH, js_trim};

/// Manifest keys tried in order; the first whose value is an object wins. OpenClaw reads only
/// `openclaw` today; clawless also honours the names skills were published under before.
const MANIFEST_KEYS: [&str; 3] = ["openclaw", "clawdbot", "moltbot"];

/// `metadata.openclaw` of a skill, after OpenClaw's lenient per-field rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillMetadata {
    /// `always: true` skips the `requires` checks (but not `os`). Only a JSON boolean counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always: Option<bool>,
    /// Display emoji.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// Homepage shown by status views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
    /// Key for `skills.entries.<key>` and `allowBundled` (defaults to the skill name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_key: Option<String>,
    /// The env var an entry's `apiKey` satisfies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_env: Option<String>,
    /// Platforms the skill runs on (`darwin`, `linux`, `win32`…); empty means any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    /// Requirements; `None` when the block has no `requires` object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires: Option<Requirements>,
    /// Valid install specs (invalid ones are dropped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub install: Vec<InstallSpec>,
}

/// `metadata.openclaw.requires`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    /// Every one of these must be on PATH.
    pub bins: Vec<String>,
    /// At least one of these must be on PATH.
    pub any_bins: Vec<String>,
    /// Each must be set (env, entry env, or entry apiKey for `primaryEnv`).
    pub env: Vec<String>,
    /// Dotted config paths that must be truthy.
    pub config: Vec<String>,
}

/// Accepted install kinds; anything else drops the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InstallKind {
    /// Homebrew formula or cask.
    Brew,
    /// npm package.
    Node,
    /// `go install` module.
    Go,
    /// `uv tool install` package.
    Uv,
    /// Direct download URL.
    Download,
}

/// One valid `metadata.openclaw.install[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallSpec {
    /// Installer kind.
    pub kind: InstallKind,
    /// Optional id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Optional label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Binaries the install provides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<String>,
    /// Platforms this spec applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    /// Brew formula (or cask).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// npm or uv package spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Go module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Download URL (http or https).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Archive type, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// Whether to extract, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extract: Option<bool>,
    /// Path components to strip, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strip_components: Option<f64>,
    /// Target directory, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_dir: Option<String>,
}

/// Who may invoke a skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillInvocation {
    /// `user-invocable` (default true): the skill gets a slash command.
    pub user_invocable: bool,
    /// `disable-model-invocation` (default false): hidden from the model's skills block.
    pub disable_model_invocation: bool,
}

/// `command-dispatch: tool`: the slash command calls a tool directly, without the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDispatch {
    /// Tool to call (`command-tool`).
    pub tool_name: String,
    /// How arguments are passed; only `raw` exists.
    pub arg_mode: ArgMode,
}

/// Argument passing for tool-dispatched commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgMode {
    /// The trimmed argument text, as one string.
    Raw,
}

/// OpenClaw's boolean words: `true/1/yes/on`, `false/0/no/off`, anything else → `default`.
///
/// The value is trimmed and lowercased first, so `" YES "` is true.
pub fn parse_frontmatter_bool(value: Option<&str>, default: bool) -> bool {
    let Some(value) = value else {
        return default;
    };
    match js_trim(value).to_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => true,
        "false" | "0" | "no" | "off" => false,
        _ => default,
    }
}

/// Reads `metadata` as JSON5 and resolves the `openclaw` (or legacy) block.
///
/// `None` when there is no `metadata`, it is not a JSON5 object (or nests deeper than 64
/// levels), or none of `openclaw`, `clawdbot`, `moltbot` holds an object.
pub fn resolve_metadata(frontmatter: &Frontmatter) -> Option<SkillMetadata> {
    let raw = frontmatter.get("metadata")?;
    if !json5_nesting_within(raw, MAX_DEPTH) {
        return None;
    }
    let JsValue::Object(manifest) = json5::from_str::<JsValue>(raw).ok()? else {
        return None;
    };
    let block = MANIFEST_KEYS
        .iter()
        .find_map(|key| match manifest.get(*key) {
            Some(JsValue::Object(block)) => Some(block),
            _ => None,
        })?;
    Some(metadata_from_block(block))
}

fn metadata_from_block(block: &IndexMap<String, JsValue>) -> SkillMetadata {
    let string = |key: &str| match block.get(key) {
        Some(JsValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let requires = match block.get("requires") {
        Some(JsValue::Object(requires)) => Some(Requirements {
            bins: normalize_string_list(requires.get("bins")),
            any_bins: normalize_string_list(requires.get("anyBins")),
            env: normalize_string_list(requires.get("env")),
            config: normalize_string_list(requires.get("config")),
        }),
        _ => None,
    };
    let install = match block.get("install") {
        Some(JsValue::Array(entries)) => entries.iter().filter_map(parse_install_spec).collect(),
        _ => Vec::new(),
    };
    SkillMetadata {
        always: match block.get("always") {
            Some(JsValue::Bool(always)) => Some(*always),
            _ => None,
        },
        emoji: string("emoji"),
        homepage: string("homepage"),
        skill_key: string("skillKey"),
        primary_env: string("primaryEnv"),
        os: normalize_string_list(block.get("os")),
        requires,
        install,
    }
}

/// OpenClaw's `normalizeStringList`: an array's elements as `String(x).trim()`, or a string
/// split on `,` and trimmed; empty entries dropped; anything else is an empty list.
fn normalize_string_list(value: Option<&JsValue>) -> Vec<String> {
    match value.map(JsValue::resolved) {
        Some(JsValue::Array(items)) => items
            .iter()
            .map(|item| js_trim(&item.to_js_string()).to_owned())
            .filter(|item| !item.is_empty())
            .collect(),
        Some(JsValue::String(list)) => list
            .split(',')
            .map(js_trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `[`/`{` nesting in JSON5 `text` stays within `limit`, skipping strings and
/// comments. The JSON5 parser recurses per level, so deeper input is refused before it runs.
/// Where this scan and the parser could disagree (an unterminated string), the parser stops
/// with an error at that point, before descending any further.
fn json5_nesting_within(text: &str, limit: usize) -> bool {
    #[derive(Clone, Copy)]
    enum State {
        Code,
        String(char),
        LineComment,
        BlockComment,
    }
    let mut state = State::Code;
    let mut depth = 0_usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match state {
            State::Code => match c {
                '[' | '{' => {
                    depth += 1;
                    if depth > limit {
                        return false;
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '"' | '\'' => state = State::String(c),
                '/' if chars.next_if_eq(&'/').is_some() => state = State::LineComment,
                '/' if chars.next_if_eq(&'*').is_some() => state = State::BlockComment,
                _ => {}
            },
            State::String(quote) => {
                if c == '\\' {
                    chars.next();
                } else if c == quote {
                    state = State::Code;
                }
            }
            State::LineComment => {
                if matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}') {
                    state = State::Code;
                }
            }
            State::BlockComment => {
                if c == '*' && chars.next_if_eq(&'/').is_some() {
                    state = State::Code;
                }
            }
        }
    }
    true
}

/// Reads `user-invocable` and `disable-model-invocation`.
pub fn resolve_invocation(frontmatter: &Frontmatter) -> SkillInvocation {
    SkillInvocation {
        user_invocable: parse_frontmatter_bool(
            frontmatter.get("user-invocable").map(String::as_str),
            true,
        ),
        disable_model_invocation: parse_frontmatter_bool(
            frontmatter
                .get("disable-model-invocation")
                .map(String::as_str),
            false,
        ),
    }
}

/// Reads `command-dispatch` / `command-tool` / `command-arg-mode` (and their `_` spellings).
///
/// Only `command-dispatch: tool` with a non-empty `command-tool` dispatches; every
/// `command-arg-mode` value means [`ArgMode::Raw`], the only mode there is.
pub fn resolve_tool_dispatch(frontmatter: &Frontmatter) -> Option<ToolDispatch> {
    let dispatch = first_present(frontmatter, &["command-dispatch", "command_dispatch"])?;
    if js_trim(dispatch).to_lowercase() != "tool" {
        return None;
    }
    let tool_name = js_trim(first_present(
        frontmatter,
        &["command-tool", "command_tool"],
    )?);
    if tool_name.is_empty() {
        return None;
    }
    Some(ToolDispatch {
        tool_name: tool_name.to_owned(),
        arg_mode: ArgMode::Raw,
    })
}

/// `metadata.homepage ?? homepage ?? website ?? url`.
///
/// The first one present is used (even if blank, as with JS `??`); it is trimmed, and a blank
/// result is `None`.
pub fn resolve_homepage(
    frontmatter: &Frontmatter, metadata: Option<&SkillMetadata>,
) -> Option<String> {
    let raw = metadata
        .and_then(|metadata| metadata.homepage.as_deref())
        .or_else(|| first_present(frontmatter, &["homepage", "website", "url"]))?;
    let homepage = js_trim(raw);
    (!homepage.is_empty()).then(|| homepage.to_owned())
}

/// The first of `keys` present in the frontmatter (JS `a ?? b`).
fn first_present<'a>(frontmatter: &'a Frontmatter, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|key| frontmatter.get(*key))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;
    use crate::frontmatter::parse_frontmatter;
    use crate::frontmatter::tests::fm;

    fn metadata_of(json5: &str) -> Option<SkillMetadata> {
        resolve_metadata(&fm(&[("metadata", json5)]))
    }

    fn install_of(entries: &str) -> Vec<InstallSpec> {
        metadata_of(&format!(r#"{{"openclaw": {{"install": {entries}}}}}"#))
            .map(|m| m.install)
            .unwrap_or_default()
    }

    fn only_kind(kind: InstallKind) -> InstallSpec {
        InstallSpec {
            kind,
            id: None,
            label: None,
            bins: Vec::new(),
            os: Vec::new(),
            formula: None,
            package: None,
            module: None,
            url: None,
            archive: None,
            extract: None,
            strip_components: None,
            target_dir: None,
        }
    }

    // --- Booleans and invocation (spec §2.4) ---

    #[test]
    fn boolean_words_are_recognised_after_trim_and_lowercase() {
        for word in ["true", "1", "yes", "on", " YES ", "On"] {
            assert!(parse_frontmatter_bool(Some(word), false), "{word}");
        }
        for word in ["false", "0", "no", "off", "\tNO\n", "OFF"] {
            assert!(!parse_frontmatter_bool(Some(word), true), "{word}");
        }
        for default in [true, false] {
            assert_eq!(parse_frontmatter_bool(Some("maybe"), default), default);
            assert_eq!(parse_frontmatter_bool(Some(""), default), default);
            assert_eq!(parse_frontmatter_bool(None, default), default);
        }
    }

    #[test]
    fn invocation_flags_follow_the_spec_vectors() {
        let explicit = resolve_invocation(&fm(&[
            ("user-invocable", "no"),
            ("disable-model-invocation", "yes"),
        ]));
        assert_eq!(
            explicit,
            SkillInvocation {
                user_invocable: false,
                disable_model_invocation: true
            }
        );
        let defaults = resolve_invocation(&Frontmatter::new());
        assert_eq!(
            defaults,
            SkillInvocation {
                user_invocable: true,
                disable_model_invocation: false
            }
        );
    }

    // --- Command dispatch ---

    #[test]
    fn tool_dispatch_needs_dispatch_tool_and_a_tool_name() {
        let expected = Some(ToolDispatch {
            tool_name: "exec".to_owned(),
            arg_mode: ArgMode::Raw,
        });
        assert_eq!(
            resolve_tool_dispatch(&fm(&[
                ("command-dispatch", "Tool"),
                ("command-tool", " exec ")
            ])),
            expected
        );
        assert_eq!(
            resolve_tool_dispatch(&fm(&[
                ("command_dispatch", "tool"),
                ("command_tool", "exec")
            ])),
            expected
        );
        let with_mode = fm(&[
            ("command-dispatch", "tool"),
            ("command-tool", "exec"),
            ("command-arg-mode", "json"),
        ]);
        assert_eq!(resolve_tool_dispatch(&with_mode), expected);
        assert_eq!(
            resolve_tool_dispatch(&fm(&[("command-dispatch", "tool")])),
            None
        );
        assert_eq!(
            resolve_tool_dispatch(&fm(&[("command-dispatch", "tool"), ("command-tool", "  ")])),
            None
        );
        assert_eq!(
            resolve_tool_dispatch(&fm(&[
                ("command-dispatch", "model"),
                ("command-tool", "exec")
            ])),
            None
        );
        assert_eq!(resolve_tool_dispatch(&Frontmatter::new()), None);
    }

    // --- Homepage ---

    #[test]
    fn homepage_prefers_metadata_then_homepage_website_url() {
        let all = fm(&[("url", "u"), ("website", "w"), ("homepage", " h ")]);
        let metadata = SkillMetadata {
            homepage: Some("m".to_owned()),
            ..SkillMetadata::default()
        };
        assert_eq!(
            resolve_homepage(&all, Some(&metadata)).as_deref(),
            Some("m")
        );
        assert_eq!(resolve_homepage(&all, None).as_deref(), Some("h"));
        assert_eq!(
            resolve_homepage(&fm(&[("url", "u"), ("website", "w")]), None).as_deref(),
            Some("w")
        );
        assert_eq!(
            resolve_homepage(&fm(&[("url", "u")]), Some(&SkillMetadata::default())).as_deref(),
            Some("u")
        );
        assert_eq!(resolve_homepage(&fm(&[("homepage", "  ")]), None), None);
        assert_eq!(resolve_homepage(&Frontmatter::new(), None), None);
    }

    // --- metadata block (spec §2.3 / §2.4) ---

    #[test]
    fn bundled_skill_metadata_resolves_requirements_and_drops_apt() {
        let content = r#"---
name: github
description: "Interact with GitHub using the `gh` CLI."
metadata:
  {
    "openclaw":
      {
        "emoji": "🐙",
        "requires": { "bins": ["gh"] },
        "install":
          [
            { "id": "brew", "kind": "brew", "formula": "gh", "bins": ["gh"], "label": "Install GitHub CLI (brew)" },
            { "id": "apt", "kind": "apt", "package": "gh", "bins": ["gh"] },
          ],
      },
  }
---

# GitHub
"#;
        let frontmatter = parse_frontmatter(content);
        assert_eq!(frontmatter["name"], "github");
        assert_eq!(
            frontmatter["description"],
            "Interact with GitHub using the `gh` CLI."
        );
        let metadata = resolve_metadata(&frontmatter).expect("metadata resolves");
        assert_eq!(metadata.emoji.as_deref(), Some("🐙"));
        let requires = metadata.requires.expect("requires present");
        assert_eq!(requires.bins, vec!["gh"]);
        assert!(
            requires.any_bins.is_empty() && requires.env.is_empty() && requires.config.is_empty()
        );
        assert_eq!(
            metadata.install,
            vec![InstallSpec {
                id: Some("brew".to_owned()),
                label: Some("Install GitHub CLI (brew)".to_owned()),
                bins: vec!["gh".to_owned()],
                formula: Some("gh".to_owned()),
                ..only_kind(InstallKind::Brew)
            }]
        );
        assert_eq!(
            resolve_invocation(&frontmatter),
            SkillInvocation {
                user_invocable: true,
                disable_model_invocation: false
            }
        );
    }

    #[test]
    fn bundled_download_skill_style_resolves_os_env_and_archive_fields() {
        let content = r#"---
name: offline-tts
description: "Speak text offline. Usage: /offline-tts [--voice v] [--rate -3]"
user-invocable: true
metadata:
  {
    "openclaw":
      {
        "emoji": "🔉",
        "os": ["darwin", "linux", "win32"],
        "primaryEnv": "TTS_KEY",
        "requires": { "env": ["TTS_RUNTIME_DIR", "TTS_MODEL_DIR"], "anyBins": ["say", "espeak"] },
        "install":
          [
            {
              "id": "runtime-linux",
              "kind": "download",
              "os": ["linux"],
              "url": "https://example.com/releases/v1.0/runtime-linux-x64.tar.bz2",
              "sha256": "not-a-recognised-field",
              "archive": "tar.bz2",
              "extract": true,
              "stripComponents": 1,
              "targetDir": "runtime",
            },
            { "id": "cli", "kind": "npm", "package": "@example/tts" },
            { "id": "cli-node", "kind": "node", "package": "@example/tts@^2", "bins": ["tts"] },
          ],
      },
  }
---
"#;
        let frontmatter = parse_frontmatter(content);
        assert_eq!(
            frontmatter["description"],
            "Speak text offline. Usage: /offline-tts [--voice v] [--rate -3]"
        );
        assert_eq!(frontmatter["user-invocable"], "true");
        let metadata = resolve_metadata(&frontmatter).expect("metadata resolves");
        assert_eq!(metadata.os, vec!["darwin", "linux", "win32"]);
        assert_eq!(metadata.primary_env.as_deref(), Some("TTS_KEY"));
        let requires = metadata.requires.expect("requires present");
        assert_eq!(requires.env, vec!["TTS_RUNTIME_DIR", "TTS_MODEL_DIR"]);
        assert_eq!(requires.any_bins, vec!["say", "espeak"]);
        assert!(requires.bins.is_empty());
        assert_eq!(
            metadata.install,
            vec![
                InstallSpec {
                    id: Some("runtime-linux".to_owned()),
                    os: vec!["linux".to_owned()],
                    url: Some(
                        "https://example.com/releases/v1.0/runtime-linux-x64.tar.bz2".to_owned()
                    ),
                    archive: Some("tar.bz2".to_owned()),
                    extract: Some(true),
                    strip_components: Some(1.0),
                    target_dir: Some("runtime".to_owned()),
                    ..only_kind(InstallKind::Download)
                },
                InstallSpec {
                    id: Some("cli-node".to_owned()),
                    bins: vec!["tts".to_owned()],
                    package: Some("@example/tts@^2".to_owned()),
                    ..only_kind(InstallKind::Node)
                },
            ]
        );
    }

    #[test]
    fn metadata_prefers_openclaw_over_legacy_keys() {
        let metadata =
            metadata_of(r#"{"clawdbot": {"emoji": "old"}, "openclaw": {"emoji": "new"}}"#);
        assert_eq!(metadata.and_then(|m| m.emoji).as_deref(), Some("new"));
    }

    #[test]
    fn metadata_honours_legacy_clawdbot_and_moltbot_keys() {
        let clawdbot = metadata_of(r#"{clawdbot: {primaryEnv: "KEY"}}"#);
        assert_eq!(clawdbot.and_then(|m| m.primary_env).as_deref(), Some("KEY"));
        let moltbot = metadata_of(r#"{"moltbot": {"skillKey": "k"}}"#);
        assert_eq!(moltbot.and_then(|m| m.skill_key).as_deref(), Some("k"));
        let both = metadata_of(r#"{"moltbot": {"skillKey": "m"}, "clawdbot": {"skillKey": "c"}}"#);
        assert_eq!(both.and_then(|m| m.skill_key).as_deref(), Some("c"));
    }

    #[test]
    fn metadata_skips_manifest_keys_that_are_not_objects() {
        let metadata = metadata_of(r#"{"openclaw": true, "clawdbot": {"emoji": "x"}}"#);
        assert_eq!(metadata.and_then(|m| m.emoji).as_deref(), Some("x"));
        assert_eq!(metadata_of(r#"{"openclaw": null}"#), None);
        assert_eq!(metadata_of(r#"{"other": {}}"#), None);
    }

    #[test]
    fn unparseable_or_missing_metadata_is_none() {
        assert_eq!(metadata_of("{not json5"), None);
        assert_eq!(metadata_of("[1, 2]"), None);
        assert_eq!(metadata_of("\"openclaw\""), None);
        assert_eq!(metadata_of(""), None);
        assert_eq!(resolve_metadata(&Frontmatter::new()), None);
    }

    #[test]
    fn metadata_fields_keep_only_their_json_types() {
        let metadata = metadata_of(
            r#"{openclaw: {always: "true", emoji: 5, homepage: " https://x ", skillKey: null, primaryEnv: ["A"], requires: "bins"}}"#,
        )
        .expect("block is an object");
        assert_eq!(
            metadata,
            SkillMetadata {
                homepage: Some(" https://x ".to_owned()),
                ..SkillMetadata::default()
            }
        );
        let always =
            metadata_of(r#"{openclaw: {always: true, requires: {}}}"#).expect("block is an object");
        assert_eq!(always.always, Some(true));
        assert_eq!(always.requires, Some(Requirements::default()));
    }

    #[test]
    fn string_lists_accept_arrays_and_comma_strings() {
        let metadata = metadata_of(
            r#"{openclaw: {os: "darwin, linux,,", requires: {bins: [" a ", "", 1, true, null, [2, 3]], anyBins: "x,y", env: 7, config: ["c.d"]}}}"#,
        )
        .expect("block is an object");
        assert_eq!(metadata.os, vec!["darwin", "linux"]);
        let requires = metadata.requires.expect("requires present");
        assert_eq!(requires.bins, vec!["a", "1", "true", "null", "2,3"]);
        assert_eq!(requires.any_bins, vec!["x", "y"]);
        assert!(requires.env.is_empty());
        assert_eq!(requires.config, vec!["c.d"]);
    }

    // --- install[] (spec §2.4 vectors) ---

    #[test]
    fn valid_install_specs_of_every_kind_are_kept() {
        let install = install_of(
            r#"[{"kind":"brew","formula":"python@3.12"},{"kind":"node","package":"@scope/pkg@1.2.3"},{"kind":"go","module":"example.com/tool/cmd@v1.2.3"},{"kind":"uv","package":"uvicorn[standard]==0.31.0"},{"kind":"download","url":"https://example.com/tool.tar.gz"}]"#,
        );
        assert_eq!(
            install,
            vec![
                InstallSpec {
                    formula: Some("python@3.12".to_owned()),
                    ..only_kind(InstallKind::Brew)
                },
                InstallSpec {
                    package: Some("@scope/pkg@1.2.3".to_owned()),
                    ..only_kind(InstallKind::Node)
                },
                InstallSpec {
                    module: Some("example.com/tool/cmd@v1.2.3".to_owned()),
                    ..only_kind(InstallKind::Go)
                },
                InstallSpec {
                    package: Some("uvicorn[standard]==0.31.0".to_owned()),
                    ..only_kind(InstallKind::Uv)
                },
                InstallSpec {
                    url: Some("https://example.com/tool.tar.gz".to_owned()),
                    ..only_kind(InstallKind::Download)
                },
            ]
        );
    }

    #[test]
    fn unsafe_install_specs_are_dropped() {
        assert_eq!(
            install_of(r#"[{"kind":"brew","formula":"wget --HEAD"}]"#),
            vec![]
        );
        assert_eq!(
            install_of(r#"[{"kind":"node","package":"file:../malicious"}]"#),
            vec![]
        );
        assert_eq!(
            install_of(r#"[{"kind":"go","module":"https://evil.example/mod"}]"#),
            vec![]
        );
        assert_eq!(
            install_of(r#"[{"kind":"download","url":"file:///tmp/payload.tgz"}]"#),
            vec![]
        );
    }

    #[test]
    fn install_specs_need_a_known_kind_and_their_required_field() {
        let install = install_of(
            r#"[{"kind":"apt","package":"gh"},{"kind":"npm","package":"x"},{"kind":"brew"},{"kind":"node","formula":"gh"},
               {"type":" BREW ","cask":"firefox"},{"kind":"go","module":"m","formula":"bad formula"},"brew",null,{"kind":3,"type":"brew","formula":"x"}]"#,
        );
        assert_eq!(
            install,
            vec![
                InstallSpec {
                    formula: Some("firefox".to_owned()),
                    ..only_kind(InstallKind::Brew)
                },
                InstallSpec {
                    module: Some("m".to_owned()),
                    ..only_kind(InstallKind::Go)
                },
            ]
        );
    }

    #[test]
    fn download_specs_pass_through_archive_fields_and_normalise_the_url() {
        let install = install_of(
            r#"[{"kind":"download","url":"HTTPS://Example.com","archive":"tar.gz","extract":true,"stripComponents":1,"targetDir":"tools","os":["linux"],"bins":"a, b"},
               {"kind":"download","url":"https://x/y","archive":1,"extract":"yes","stripComponents":"1","targetDir":false}]"#,
        );
        assert_eq!(
            install,
            vec![
                InstallSpec {
                    url: Some("https://example.com/".to_owned()),
                    archive: Some("tar.gz".to_owned()),
                    extract: Some(true),
                    strip_components: Some(1.0),
                    target_dir: Some("tools".to_owned()),
                    os: vec!["linux".to_owned()],
                    bins: vec!["a".to_owned(), "b".to_owned()],
                    ..only_kind(InstallKind::Download)
                },
                InstallSpec {
                    url: Some("https://x/y".to_owned()),
                    ..only_kind(InstallKind::Download)
                },
            ]
        );
    }

    #[test]
    fn install_spec_serialises_in_camel_case() {
        let spec = InstallSpec {
            strip_components: Some(2.0),
            ..only_kind(InstallKind::Download)
        };
        let json = serde_json::to_string(&spec).expect("serialises");
        assert_eq!(json, r#"{"kind":"download","stripComponents":2.0}"#);
    }

    // --- Hostile input ---

    #[test]
    fn deeply_nested_metadata_json5_does_not_overflow_the_stack() {
        let started = Instant::now();
        assert_eq!(metadata_of(&"[".repeat(100_000)), None);
        assert_eq!(
            metadata_of(&format!("{{\"openclaw\": {}", "{\"a\": ".repeat(100_000))),
            None
        );
        let closed = format!(
            "{{openclaw: {{emoji: \"x\", deep: {}1{}}}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(metadata_of(&closed), None);
        assert!(started.elapsed() < Duration::from_secs(5));
        // Brackets inside strings and comments do not count towards the nesting limit.
        let quoted = format!(
            "{{openclaw: {{emoji: \"{}\", /* {} */ homepage: '{}'}}}}",
            "[".repeat(500),
            "{".repeat(500),
            "]".repeat(500)
        );
        assert_eq!(
            metadata_of(&quoted).and_then(|m| m.emoji).map(|e| e.len()),
            Some(500)
        );
    }

    #[test]
    fn json5_nesting_scan_counts_only_code_brackets() {
        assert!(json5_nesting_within("[[1]]", 2));
        assert!(!json5_nesting_within("[[[1]]]", 2));
        assert!(json5_nesting_within(
            r#"["[[[", '\'[[[', // [[[
 [1]]"#,
            2
        ));
        assert!(!json5_nesting_within(r#""\"" [[["#, 2));
    }

    #[test]
    fn deeply_nested_yaml_metadata_does_not_overflow_the_stack() {
        let content = format!("---\nname: deep\nmetadata: {}\n---\n", "[".repeat(100_000));
        let frontmatter = parse_frontmatter(&content);
        assert_eq!(resolve_metadata(&frontmatter), None);
    }

    #[test]
    fn binary_junk_metadata_does_not_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for round in 0..200 {
            let bytes: Vec<u8> = (0..(round * 13 % 700))
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state.to_le_bytes()[1]
                })
                .collect();
            let junk = String::from_utf8_lossy(&bytes).into_owned();
            assert_metadata_is_clean(metadata_of(&junk).as_ref());
            assert_metadata_is_clean(
                metadata_of(&format!("{{openclaw: {{install: [{junk}]}}}}")).as_ref(),
            );
        }
    }

    // --- Property tests ---

    /// Checks what resolved metadata promises (no empty or untrimmed list items, every install
    /// spec carrying what its kind needs); `true` when there was metadata to check.
    fn assert_metadata_is_clean(metadata: Option<&SkillMetadata>) -> bool {
        let Some(metadata) = metadata else {
            return false;
        };
        let lists = metadata
            .requires
            .iter()
            .flat_map(|r| [&r.bins, &r.any_bins, &r.env, &r.config])
            .chain([&metadata.os])
            .chain(
                metadata
                    .install
                    .iter()
                    .flat_map(|spec| [&spec.bins, &spec.os]),
            );
        for list in lists {
            for item in list {
                assert!(!item.is_empty());
                assert_eq!(js_trim(item), item.as_str());
            }
        }
        for spec in &metadata.install {
            let required = match spec.kind {
                InstallKind::Brew => spec.formula.is_some(),
                InstallKind::Node | InstallKind::Uv => spec.package.is_some(),
                InstallKind::Go => spec.module.is_some(),
                InstallKind::Download => spec.url.as_deref().is_some_and(|u| u.starts_with("http")),
            };
            assert!(required, "{spec:?}");
        }
        true
    }

    /// A string field's value: words, URLs, padding, empties, and the wrong types.
    fn field_value() -> impl Strategy<Value = serde_json::Value> {
        prop_oneof![
            "[ a-z0-9./:_-]{0,12}".prop_map(serde_json::Value::from),
            Just(serde_json::Value::from("https://example.com/tool.tgz")),
            Just(serde_json::Value::from("  jq  ")),
            Just(serde_json::Value::from("")),
            any::<i32>().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
        ]
    }

    /// A list field's value: usually a list of field values, sometimes one bare value.
    fn list_value() -> impl Strategy<Value = serde_json::Value> {
        prop_oneof![
            3 => prop::collection::vec(field_value(), 0..4).prop_map(serde_json::Value::Array),
            1 => field_value(),
        ]
    }

    /// An object with some of `keys`, each holding what `value` makes.
    fn object_of<S>(
        keys: &'static [&'static str], value: S,
    ) -> impl Strategy<Value = serde_json::Value>
    where
        S: Strategy<Value = serde_json::Value>,
    {
        prop::collection::vec((prop::sample::select(keys), value), 0..keys.len() + 1).prop_map(
            |pairs| {
                serde_json::Value::Object(
                    pairs
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect(),
                )
            },
        )
    }

    /// Metadata built from the real keys with junk values, so it usually parses and the checks
    /// of [`assert_metadata_is_clean`] run.
    fn structured_metadata() -> impl Strategy<Value = String> {
        let kind = prop::sample::select(vec!["brew", "node", "uv", "go", "download", "apt", ""])
            .prop_map(serde_json::Value::from);
        let install_entry = (
            kind,
            object_of(&["formula", "package", "module", "url"], field_value()),
            object_of(&["bins", "os"], list_value()),
        )
            .prop_map(|(kind, strings, lists)| {
                let mut entry = serde_json::Map::new();
                entry.insert("kind".to_owned(), kind);
                for object in [strings, lists] {
                    if let serde_json::Value::Object(fields) = object {
                        entry.extend(fields);
                    }
                }
                serde_json::Value::Object(entry)
            });
        (
            object_of(&["bins", "anyBins", "env", "config"], list_value()),
            prop::collection::vec(install_entry, 0..3),
            list_value(),
            field_value(),
        )
            .prop_map(|(requires, install, os, homepage)| {
                serde_json::json!({"openclaw": {
                    "requires": requires,
                    "install": install,
                    "os": os,
                    "homepage": homepage,
                }})
                .to_string()
            })
    }

    #[test]
    fn structured_metadata_resolves_clean() {
        clawless_base::testing::run_with_floor(
            "structured_metadata_resolves_clean",
            structured_metadata(),
            512,
            100,
            |json| {
                let metadata = metadata_of(&json);
                let checked = assert_metadata_is_clean(metadata.as_ref());
                if let Some(metadata) = &metadata {
                    let homepage = resolve_homepage(&Frontmatter::new(), Some(metadata));
                    prop_assert!(homepage.is_none_or(|h| !h.is_empty()));
                }
                Ok(checked)
            },
        );
    }

    fn json5ish() -> impl Strategy<Value = String> {
        let token = prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "openclaw",
            "clawdbot",
            "\"openclaw\"",
            "\"install\"",
            "\"requires\"",
            "\"bins\"",
            "\"kind\"",
            "\"brew\"",
            "\"node\"",
            "\"download\"",
            "\"formula\"",
            "\"package\"",
            "\"url\"",
            "\"gh\"",
            "\"https://x\"",
            "\"file:/x\"",
            "true",
            "null",
            "1",
            "-0x1F",
            "Infinity",
            "NaN",
            ".5",
            "'s'",
            "// c\n",
            "/* c */",
            "\"\\\"\"",
            "\n",
            " ",
        ]);
        prop::collection::vec(token, 0..60).prop_map(|tokens| tokens.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_frontmatter_resolves_without_panicking(text in any::<String>()) {
            let frontmatter = parse_frontmatter(&format!("---\nmetadata: {text}\nuser-invocable: {text}\n---\n"));
            assert_metadata_is_clean(resolve_metadata(&frontmatter).as_ref());
            let _invocation = resolve_invocation(&frontmatter);
            let _dispatch = resolve_tool_dispatch(&frontmatter);
            assert_metadata_is_clean(metadata_of(&text).as_ref());
        }

        #[test]
        fn json5ish_metadata_resolves_without_panicking(json5 in json5ish()) {
            let metadata = metadata_of(&json5);
            assert_metadata_is_clean(metadata.as_ref());
            if let Some(metadata) = &metadata {
                let homepage = resolve_homepage(&Frontmatter::new(), Some(metadata));
                prop_assert!(homepage.is_none_or(|h| !h.is_empty()));
            }
        }

        #[test]
        fn invocation_flags_match_the_boolean_words(value in "[ \t]{0,2}(true|TRUE|1|yes|On|false|0|No|off|x|)[ \t]{0,2}") {
            let invocation = resolve_invocation(&fm(&[("user-invocable", &value), ("disable-model-invocation", &value)]));
            let word = value.trim().to_lowercase();
            let truthy = ["true", "1", "yes", "on"].contains(&word.as_str());
            let falsy = ["false", "0", "no", "off"].contains(&word.as_str());
            prop_assert_eq!(invocation.user_invocable, !falsy);
            prop_assert_eq!(invocation.disable_model_invocation, truthy);
        }
    }
}
