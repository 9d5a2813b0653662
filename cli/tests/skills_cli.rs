//! `clawless skills …` as a user runs it: the real binary, real directories, and S3 on moto.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use clawless_aws::testing::{fresh_bucket, moto_endpoint, moto_sdk_config, s3_client};

fn repo_skills() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills")
}

/// A PATH holding only fake executables with these names (their content never runs).
fn path_with(bins: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for bin in bins {
        let path = dir.path().join(bin);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// Runs `clawless` in an empty directory with a controlled PATH and no AWS access besides moto.
fn clawless(args: &[&str], path_dir: &Path) -> Output {
    let cwd = tempfile::tempdir().unwrap();
    clawless_in(cwd.path(), args, path_dir)
}

fn clawless_in(cwd: &Path, args: &[&str], path_dir: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawless"));
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path_dir)
        .env("HOME", cwd)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("CLAWLESS_S3_FORCE_PATH_STYLE", "true");
    if let Ok(endpoint) = std::env::var("CLAWLESS_TEST_AWS_ENDPOINT") {
        command.env("AWS_ENDPOINT_URL", endpoint);
    }
    command.output().expect("run clawless")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn bundled() -> String {
    repo_skills().display().to_string()
}

#[test]
fn prompt_lists_the_eligible_bundled_skills_in_the_exact_block() {
    let path = path_with(&["curl"]);
    let text = stdout(&clawless(
        &["skills", "--bundled", &bundled(), "prompt"],
        path.path(),
    ));
    assert!(text.starts_with(
        "\n\nThe following skills provide specialized instructions for specific tasks.\n"
    ));
    assert!(text.contains("<name>weather</name>"));
    assert!(!text.contains("<name>github</name>"), "gh is not on PATH");
    let location = repo_skills()
        .join("weather/SKILL.md")
        .canonicalize()
        .unwrap();
    assert!(text.contains(&format!("<location>{}</location>", location.display())));
}

#[test]
fn check_explains_what_is_missing() {
    let path = path_with(&["curl"]);
    let text = stdout(&clawless(
        &["skills", "--bundled", &bundled(), "check"],
        path.path(),
    ));
    assert!(
        text.contains("✗ github [bundled]: missing bins: gh"),
        "{text}"
    );
    assert!(text.contains("✓ weather [bundled]"), "{text}");
    let with_gh = path_with(&["curl", "gh"]);
    let text = stdout(&clawless(
        &["skills", "--bundled", &bundled(), "check"],
        with_gh.path(),
    ));
    assert!(text.contains("✓ github [bundled]"), "{text}");
}

#[test]
fn list_json_bins_and_commands_describe_the_bundled_skills() {
    let path = path_with(&[]);
    let list: serde_json::Value = serde_json::from_str(&stdout(&clawless(
        &["skills", "--bundled", &bundled(), "list", "--json"],
        path.path(),
    )))
    .unwrap();
    let github = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "github")
        .unwrap();
    assert_eq!(github["eligible"], false);
    assert_eq!(github["source"], "bundled");
    assert_eq!(github["metadata"]["requires"]["bins"][0], "gh");

    let bins = stdout(&clawless(
        &["skills", "--bundled", &bundled(), "bins"],
        path.path(),
    ));
    assert_eq!(
        bins.lines().collect::<Vec<_>>(),
        ["curl", "df", "gh", "uname", "wget"]
    );

    let all = path_with(&["curl", "gh"]);
    let commands = stdout(&clawless(
        &["skills", "--bundled", &bundled(), "commands"],
        all.path(),
    ));
    assert!(
        commands.lines().any(|l| l.starts_with("/github — ")),
        "{commands}"
    );
    assert!(
        commands.lines().any(|l| l.starts_with("/summarize_url — ")),
        "{commands}"
    );
}

#[test]
fn workspace_skills_override_bundled_ones_and_the_config_file_is_read() {
    let path = path_with(&["curl"]);
    let cwd = tempfile::tempdir().unwrap();
    let ws = cwd.path().join("ws");
    std::fs::create_dir_all(ws.join("skills/weather")).unwrap();
    std::fs::write(
        ws.join("skills/weather/SKILL.md"),
        "---\nname: weather\ndescription: My own weather\n---\n",
    )
    .unwrap();
    std::fs::write(
        cwd.path().join("clawless.yaml"),
        format!("skills:\n  bundled: {}\nagents:\n  defaults:\n    workspace: ./ws\n    skills: [weather]\n", bundled()),
    )
    .unwrap();
    let text = stdout(&clawless_in(cwd.path(), &["skills", "prompt"], path.path()));
    assert!(
        text.contains("<description>My own weather</description>"),
        "{text}"
    );
    assert!(
        !text.contains("summarize-url"),
        "the agent's filter keeps only weather"
    );
}

#[test]
fn errors_are_one_line_with_a_failing_exit_code() {
    let path = path_with(&[]);
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("bad.yaml"), "skills: [oops\n").unwrap();
    for (args, needle) in [
        (
            vec!["skills", "--config", "missing.yaml", "list"],
            "missing.yaml",
        ),
        (vec!["skills", "--config", "bad.yaml", "list"], "bad.yaml"),
        (
            vec!["skills", "--bundled", "ftp://host/skills", "list"],
            "ftp://host/skills",
        ),
        (vec!["skills", "--agent", "ghost", "list"], "ghost"),
        (
            vec!["skills", "sync", "does-not-exist", "out"],
            "does-not-exist",
        ),
    ] {
        let output = clawless_in(cwd.path(), &args, path.path());
        assert!(!output.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn sync_between_directories_copies_only_changes_and_can_delete() {
    let path = path_with(&[]);
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("copy");
    let target_str = target.display().to_string();
    let first = stdout(&clawless(
        &["skills", "sync", &bundled(), &target_str],
        path.path(),
    ));
    assert!(
        first.contains("uploaded 5, unchanged 0, deleted 0"),
        "{first}"
    );
    assert!(target.join("weather/SKILL.md").is_file());
    let again = stdout(&clawless(
        &["skills", "sync", &bundled(), &target_str],
        path.path(),
    ));
    assert!(
        again.contains("uploaded 0, unchanged 5, deleted 0"),
        "{again}"
    );
    std::fs::create_dir_all(target.join("stale")).unwrap();
    std::fs::write(target.join("stale/SKILL.md"), "old").unwrap();
    let dry = stdout(&clawless(
        &[
            "skills",
            "sync",
            "--delete",
            "--dry-run",
            &bundled(),
            &target_str,
        ],
        path.path(),
    ));
    assert!(
        dry.contains("would upload 0, unchanged 5, deleted 1"),
        "{dry}"
    );
    assert!(
        target.join("stale/SKILL.md").is_file(),
        "dry run writes nothing"
    );
    stdout(&clawless(
        &["skills", "sync", "--delete", &bundled(), &target_str],
        path.path(),
    ));
    assert!(!target.join("stale/SKILL.md").exists());
}

#[tokio::test]
async fn skills_synced_to_s3_are_served_from_s3() {
    let client = s3_client(&moto_sdk_config().await);
    let bucket = fresh_bucket(&client, "cli").await;
    moto_endpoint();
    let path = path_with(&["curl"]);
    let uri = format!("s3://{bucket}/skills/bundled");
    let synced = stdout(&clawless(
        &["skills", "sync", &bundled(), &uri],
        path.path(),
    ));
    assert!(synced.contains("uploaded 5"), "{synced}");
    let prompt = stdout(&clawless(
        &["skills", "--bundled", &uri, "prompt"],
        path.path(),
    ));
    assert!(
        prompt.contains(&format!(
            "<location>s3://{bucket}/skills/bundled/weather/SKILL.md</location>"
        )),
        "{prompt}"
    );
    let bins = stdout(&clawless(
        &["skills", "--bundled", &uri, "bins", "--json"],
        path.path(),
    ));
    assert_eq!(bins.trim(), r#"{"bins":["curl","df","gh","uname","wget"]}"#);
    let missing = clawless(
        &[
            "skills",
            "--bundled",
            "s3://no-such-bucket-clawless/skills",
            "list",
        ],
        path.path(),
    );
    assert!(!missing.status.success());
}

#[test]
fn every_bundled_skill_loads_cleanly_and_declares_what_it_runs() {
    let path = path_with(&[]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&clawless(
        &["skills", "--bundled", &bundled(), "check", "--json"],
        path.path(),
    )))
    .unwrap();
    assert_eq!(
        report["skipped"],
        serde_json::json!([]),
        "no bundled skill may be skipped"
    );
    let skills = report["skills"].as_array().unwrap();
    let on_disk = std::fs::read_dir(repo_skills())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(
        skills.len(),
        on_disk,
        "every folder in skills/ is a loaded skill"
    );
    for skill in skills {
        let name = skill["name"].as_str().unwrap();
        let description = skill["description"].as_str().unwrap();
        assert!(
            description.contains("Use when"),
            "{name}: the description says when to use it"
        );
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{name}"
        );
        let requires = &skill["metadata"]["requires"];
        let declares = ["bins", "anyBins"]
            .iter()
            .any(|k| requires[k].as_array().is_some_and(|a| !a.is_empty()));
        // skill-author only writes files with the agent's own tools
        assert!(
            declares || name == "skill-author",
            "{name} declares the binaries its commands run"
        );
    }
}
