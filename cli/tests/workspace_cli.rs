//! `clawless workspace init` as a user runs it: the real binary on a directory, and on an S3
//! prefix in moto.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::Path;
use std::process::{Command, Output};

use clawless_aws::testing::{fresh_bucket, moto_endpoint, moto_sdk_config, s3_client};
use clawless_core::system_prompt::seed::SEED_FILES;

/// Runs `clawless` in `cwd` with no AWS access besides moto.
fn clawless(cwd: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawless"));
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
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

#[test]
fn init_fills_a_new_directory_once_and_never_overwrites() {
    // GIVEN a workspace directory that does not exist yet
    let cwd = tempfile::tempdir().unwrap();
    let workspace = cwd.path().join("agents/main/workspace");

    // WHEN it is initialised (by a relative path)
    let out = stdout(&clawless(
        cwd.path(),
        &["workspace", "init", "agents/main/workspace"],
    ));

    // THEN every default file is there, the ritual included
    for file in SEED_FILES {
        assert_eq!(
            std::fs::read_to_string(workspace.join(file.name)).unwrap(),
            file.content
        );
        assert!(out.contains(&format!("wrote {}", file.name)), "{out}");
    }
    assert!(out.contains("7 written, 0 kept"), "{out}");
    assert!(out.contains("first-conversation ritual"), "{out}");

    // AND a second run, after the user edited USER.md, changes nothing
    std::fs::write(workspace.join("USER.md"), "Ada\n").unwrap();
    let again = stdout(&clawless(
        cwd.path(),
        &["workspace", "init", "agents/main/workspace"],
    ));
    assert!(again.contains("0 written, 7 kept"), "{again}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("USER.md")).unwrap(),
        "Ada\n"
    );
}

#[test]
fn init_of_a_workspace_in_use_adds_the_missing_files_but_no_ritual() {
    let cwd = tempfile::tempdir().unwrap();
    let workspace = cwd.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("AGENTS.md"), "My own rules.\n").unwrap();

    let out = stdout(&clawless(
        cwd.path(),
        &["workspace", "init", &workspace.display().to_string()],
    ));

    assert!(out.contains("kept AGENTS.md"), "{out}");
    assert!(out.contains("5 written, 1 kept"), "{out}");
    assert!(out.contains("already in use, so no BOOTSTRAP.md"), "{out}");
    assert!(!workspace.join("BOOTSTRAP.md").exists());
    assert!(workspace.join("SOUL.md").is_file());
    assert_eq!(
        std::fs::read_to_string(workspace.join("AGENTS.md")).unwrap(),
        "My own rules.\n"
    );
}

#[test]
fn init_refuses_a_location_it_cannot_use() {
    let cwd = tempfile::tempdir().unwrap();
    let out = clawless(cwd.path(), &["workspace", "init", "https://example.com/ws"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only directories and s3:// URIs"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn init_seeds_an_s3_prefix() {
    // GIVEN an empty bucket in moto
    let client = s3_client(&moto_sdk_config().await);
    let bucket = fresh_bucket(&client, "ws").await;
    moto_endpoint();
    let cwd = tempfile::tempdir().unwrap();
    let uri = format!("s3://{bucket}/agents/main/workspace");

    // WHEN its workspace prefix is initialised twice
    let out = stdout(&clawless(cwd.path(), &["workspace", "init", &uri]));
    let again = stdout(&clawless(cwd.path(), &["workspace", "init", &uri]));

    // THEN every default file is stored under the prefix, once
    assert!(out.contains("7 written, 0 kept"), "{out}");
    assert!(again.contains("0 written, 7 kept"), "{again}");
    for file in SEED_FILES {
        let object = client
            .get_object()
            .bucket(&bucket)
            .key(format!("agents/main/workspace/{}", file.name))
            .send()
            .await
            .unwrap();
        let bytes = object.body.collect().await.unwrap().into_bytes();
        assert_eq!(std::str::from_utf8(&bytes).unwrap(), file.content);
    }
}
