//! `clawless config schema` and `clawless config check` as a user runs them: the real binary.
//! The schema must validate every example config in the repo and reject a broken one; every
//! key in it has a description and a default; the schema file and the key reference in
//! `docs/configuration.md` are what the binary prints today; every `yaml` block in the docs
//! is a config `config check` accepts.
//!
//! `CLAWLESS_BLESS=1 cargo test -p clawless --test config_cli` rewrites the schema file and
//! the reference instead of failing on them.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The modeline every example config starts with, before the relative path to the schema.
const MODELINE: &str = "# yaml-language-server: $schema=";

/// Markers around the generated key reference in `docs/configuration.md`.
const REFERENCE_BEGIN: &str = "<!-- BEGIN GENERATED REFERENCE";
const REFERENCE_END: &str = "<!-- END GENERATED REFERENCE -->";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Runs `clawless` in `cwd` with an empty environment plus `env`.
fn clawless_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clawless"))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("HOME", cwd)
        .envs(env.iter().copied())
        .output()
        .expect("run clawless")
}

fn clawless(args: &[&str]) -> Output {
    clawless_in(&repo_root(), args, &[])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn succeeded(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}\n{}",
        text(&output.stderr),
        text(&output.stdout)
    );
    text(&output.stdout)
}

fn schema_text() -> String {
    succeeded(&clawless(&["config", "schema"]))
}

fn schema() -> Value {
    serde_json::from_str(&schema_text()).unwrap()
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::new(schema).expect("a valid draft 2020-12 schema")
}

/// The schema's complaints about a YAML document, as `instance path: message`.
fn schema_errors(validator: &jsonschema::Validator, yaml: &str) -> Vec<String> {
    let document: Value = serde_yaml::from_str(yaml).unwrap();
    validator
        .iter_errors(&document)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect()
}

/// Every example config in the repo: `examples/*.yaml` and `events/clawless.yaml`.
fn example_configs() -> Vec<PathBuf> {
    let root = repo_root();
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
        })
        .collect();
    examples.sort();
    examples.push(root.join("events/clawless.yaml"));
    examples
}

/// `path` relative to the repo root, as the binary is run from there.
fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn the_schema_validates_every_example_config() {
    // GIVEN the schema the binary prints
    let schema = schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["title"], "clawless.yaml");
    let validator = validator(&schema);
    let examples = example_configs();
    assert!(examples.len() >= 5, "{examples:?}");

    for example in examples {
        let yaml = std::fs::read_to_string(&example).unwrap();
        // THEN each example points an editor at the schema file in the repo…
        let first_line = yaml.lines().next().unwrap_or_default();
        let schema_path = first_line
            .strip_prefix(MODELINE)
            .unwrap_or_else(|| panic!("{} does not start with {MODELINE}", example.display()));
        let target = example.parent().unwrap().join(schema_path);
        assert_eq!(
            target.canonicalize().unwrap(),
            repo_root().join("clawless.schema.json"),
            "{}",
            example.display()
        );
        // …and is valid against it
        let errors = schema_errors(&validator, &yaml);
        assert!(errors.is_empty(), "{}: {errors:#?}", example.display());
    }
}

#[test]
fn config_check_says_ok_for_each_example() {
    for example in example_configs() {
        let shown = relative(&example);
        let output = clawless(&["config", "check", &shown]);
        assert_eq!(succeeded(&output), format!("ok: {shown}\n"));
        assert_eq!(text(&output.stderr), "", "{shown}: no warnings");
    }
}

#[test]
fn the_schema_and_config_check_reject_a_broken_config() {
    // GIVEN a config with an unknown key inside a section, a wrong type and an invalid enum
    // value, in that order
    let fixture = "cli/tests/fixtures/broken.yaml";
    let yaml = std::fs::read_to_string(repo_root().join(fixture)).unwrap();

    // THEN the schema rejects all three
    let errors = schema_errors(&validator(&schema()), &yaml);
    for (at, problem) in [
        ("/agents/defaults", "contxtTokens"),
        ("/models/maxTokens", "\"lots\""),
        ("/session/dmScope", "\"per-person\""),
    ] {
        assert!(
            errors
                .iter()
                .any(|error| error.starts_with(at) && error.contains(problem)),
            "{at} {problem} not in {errors:#?}"
        );
    }

    // AND config check stops at the first, with its file, line and column
    let output = clawless(&["config", "check", fixture]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "");
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: {fixture}:9:5: agents.defaults.contxtTokens: unknown field `contxtTokens`, expected one of"
        )),
        "{stderr}"
    );
}

#[test]
fn config_check_points_at_a_wrong_type_and_an_invalid_enum_value() {
    let dir = tempfile::tempdir().unwrap();
    let validator = validator(&schema());
    for (yaml, expected) in [
        (
            "models:\n  primary: openai/gpt-4o-mini\n  maxTokens: lots\n",
            "clawless.yaml:3:14: models.maxTokens: invalid type: string \"lots\", expected u32",
        ),
        (
            "channels:\n  telegram:\n    botTokenEnv: T\n    groupPolicy: everyone\n",
            "clawless.yaml:4:18: channels.telegram.groupPolicy: unknown variant `everyone`, expected one of `open`, `allowlist`, `disabled`",
        ),
        (
            "agents:\n  list:\n    - id: main\n    - workspace: ./elsewhere\n",
            "clawless.yaml:4:7: agents.list[1]: missing field `id`",
        ),
    ] {
        assert!(!schema_errors(&validator, yaml).is_empty(), "{yaml}");
        std::fs::write(dir.path().join("clawless.yaml"), yaml).unwrap();
        // The default file: ./clawless.yaml.
        let output = clawless_in(dir.path(), &["config", "check"], &[]);
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(text(&output.stderr), format!("error: {expected}\n"));
    }
}

#[test]
fn a_top_level_key_clawless_does_not_read_is_a_warning_with_its_line() {
    // GIVEN a config with a key a skill's requires.config gates on
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("my.yaml");
    std::fs::write(
        &path,
        "# a comment\nagents:\n  defaults: {}\nbrowser:\n  enabled: false\n\"plugins\": {}\n",
    )
    .unwrap();

    // WHEN it is checked through $CLAWLESS_CONFIG
    let output = clawless_in(
        dir.path(),
        &["config", "check"],
        &[("CLAWLESS_CONFIG", "my.yaml")],
    );

    // THEN it is fine, with a warning per key at its line
    assert_eq!(succeeded(&output), "ok: my.yaml\n");
    assert_eq!(
        text(&output.stderr),
        "warning: my.yaml:4:1: top-level key `browser` is not read by clawless; it is kept for skills' requires.config\n\
         warning: my.yaml:6:1: top-level key `plugins` is not read by clawless; it is kept for skills' requires.config\n"
    );
    // AND the schema lets the top level stay open
    let validator = validator(&schema());
    assert!(schema_errors(&validator, &std::fs::read_to_string(&path).unwrap()).is_empty());
}

#[test]
fn config_check_without_a_file_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let output = clawless_in(dir.path(), &["config", "check"], &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("error: cannot read config clawless.yaml"),
        "{stderr}"
    );
    // --config names the file too, before $CLAWLESS_CONFIG; a blank variable is unset.
    std::fs::write(
        dir.path().join("other.yaml"),
        "session: {dmScope: per-peer}\n",
    )
    .unwrap();
    let output = clawless_in(
        dir.path(),
        &["config", "--config", "other.yaml", "check"],
        &[("CLAWLESS_CONFIG", "elsewhere.yaml")],
    );
    assert_eq!(succeeded(&output), "ok: other.yaml\n");
    std::fs::write(dir.path().join("clawless.yaml"), "").unwrap();
    let output = clawless_in(
        dir.path(),
        &["config", "check"],
        &[("CLAWLESS_CONFIG", " ")],
    );
    assert_eq!(succeeded(&output), "ok: clawless.yaml\n");
}

/// Walks every schema in `node`, calling `check` with each object property's path, its schema
/// and whether its object requires it.
fn each_property(node: &Value, path: &str, check: &mut dyn FnMut(&str, &Value, bool)) {
    let Value::Object(object) = node else {
        return;
    };
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (name, property) in properties {
            let property_path = format!("{path}.{name}");
            check(&property_path, property, required.contains(&name.as_str()));
            each_property(property, &property_path, check);
        }
    }
    if let Some(Value::Object(defs)) = object.get("$defs") {
        for (name, def) in defs {
            each_property(def, &format!("$defs.{name}"), check);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = object.get(key) {
            each_property(sub, &format!("{path}/{key}"), check);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for sub in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            each_property(sub, &format!("{path}/{key}"), check);
        }
    }
}

#[test]
fn every_key_in_the_schema_has_a_description_and_a_default() {
    let schema = schema();
    let mut missing = Vec::new();
    let mut required = Vec::new();
    let mut count = 0;
    each_property(&schema, "", &mut |path, property, is_required| {
        count += 1;
        let described = property
            .get("description")
            .and_then(Value::as_str)
            .is_some_and(|text| !text.trim().is_empty());
        if !described {
            missing.push(format!("{path}: description"));
        }
        // A required key has no default: leaving it out is an error.
        if is_required {
            required.push(path.to_owned());
        } else if property.get("default").is_none() {
            missing.push(format!("{path}: default"));
        }
    });
    assert!(count > 100, "only {count} keys found: is the walk broken?");
    assert!(missing.is_empty(), "{missing:#?}");
    assert_eq!(
        required,
        [
            "$defs.AgentConfig.id",
            "$defs.AudioModelConfig.provider",
            "$defs.AudioModelConfig.model",
            "$defs.DiscordConfig.applicationId",
            "$defs.DiscordConfig.publicKey"
        ]
    );
}

/// Whether the test should rewrite generated files instead of failing on them.
fn blessing() -> bool {
    std::env::var_os("CLAWLESS_BLESS").is_some_and(|value| value == "1")
}

#[test]
fn the_schema_file_in_the_repo_is_up_to_date() {
    let path = repo_root().join("clawless.schema.json");
    let printed = schema_text();
    if blessing() {
        std::fs::write(&path, &printed).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == printed,
        "clawless.schema.json is not what `clawless config schema` prints; regenerate it:\n  \
         cargo run -q -p clawless -- config schema > clawless.schema.json"
    );
}

#[test]
fn the_configuration_reference_in_the_docs_is_up_to_date() {
    let path = repo_root().join("docs/configuration.md");
    let reference = succeeded(&clawless(&["config", "schema", "--markdown"]));
    let doc = std::fs::read_to_string(&path).unwrap();
    let begin = doc.find(REFERENCE_BEGIN).expect("the begin marker");
    let body_start = begin + doc[begin..].find('\n').unwrap() + 1;
    let end = doc.find(REFERENCE_END).expect("the end marker");
    let expected = format!("\n{reference}\n");
    if blessing() {
        let updated = format!("{}{expected}{}", &doc[..body_start], &doc[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert!(
        doc[body_start..end] == expected,
        "the reference in docs/configuration.md is not what the schema generates; regenerate it \
         with\n  CLAWLESS_BLESS=1 cargo test -p clawless --test config_cli\n(or paste the \
         output of `cargo run -q -p clawless -- config schema --markdown` between the markers)"
    );
}

/// The ```yaml blocks of a Markdown text, with the line each starts at.
fn yaml_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut current {
            None if trimmed == "```yaml" => current = Some((index + 2, String::new())),
            Some(_) if trimmed.starts_with("```") => blocks.extend(current.take()),
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

#[test]
fn every_yaml_block_in_the_docs_is_a_valid_config() {
    let root = repo_root();
    let mut documents = vec![root.join("README.md")];
    for dir in ["docs", "shared"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let readme = path.join("README.md");
            if path.extension().is_some_and(|ext| ext == "md") {
                documents.push(path);
            } else if readme.is_file() {
                documents.push(readme);
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let validator = validator(&schema());
    let mut checked = 0;
    for document in documents {
        let markdown = std::fs::read_to_string(&document).unwrap();
        for (line, block) in yaml_blocks(&markdown) {
            let at = format!("{}:{line}", relative(&document));
            let file = dir.path().join(format!("block-{checked}.yaml"));
            std::fs::write(&file, &block).unwrap();
            let output = clawless_in(
                dir.path(),
                &["config", "check", file.to_str().unwrap()],
                &[],
            );
            assert!(
                output.status.success() && output.stderr.is_empty(),
                "{at}: {}",
                text(&output.stderr)
            );
            let errors = schema_errors(&validator, &block);
            assert!(errors.is_empty(), "{at}: {errors:#?}");
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} yaml blocks found");
}
