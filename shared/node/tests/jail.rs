//! The node's jail, run for real (bubblewrap is installed by the test command; a machine
//! without it fails here rather than skipping): a jailed command runs as another uid with no
//! capabilities, no network and a read-only root; it writes only its own `/workspace`, which
//! is the node's folder for that sandbox; `..`, symlinks and absolute paths reach nothing of
//! the host; no credential reaches its environment; the timeout ends it.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use clawless_exec::node::wire::JobSandbox;
use clawless_node::jail::{JAIL_UID, Jail};
use clawless_node::runner::{RunOutcome, run_command};
use tokio::sync::watch;

const SLUG: &str = "agent-main-generic-group-family-1a2b3c4d";

fn jail(root: &Path) -> Jail {
    Jail::probe(root).expect("bubblewrap works on this machine (infra/test installs it)")
}

async fn run_in(jail: &Jail, sandbox: &JobSandbox, script: &str) -> RunOutcome {
    run_with(
        jail,
        sandbox,
        script,
        &BTreeMap::new(),
        Duration::from_secs(20),
    )
    .await
}

async fn run_with(
    jail: &Jail, sandbox: &JobSandbox, script: &str, env: &BTreeMap<String, String>,
    timeout: Duration,
) -> RunOutcome {
    let argv = ["/bin/sh", "-lc", script].map(str::to_owned);
    let spec = jail.run_spec(sandbox, &argv, env, None, timeout).unwrap();
    let (_stop, stop) = watch::channel(false);
    run_command(&spec, stop).await
}

#[tokio::test]
async fn a_jailed_command_runs_as_another_uid_with_no_capabilities() {
    let root = tempfile::tempdir().unwrap();
    let jail = jail(root.path());
    let outcome = run_in(
        &jail,
        &JobSandbox::new(SLUG),
        "id -u; id -g; id -G; grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status",
    )
    .await;
    assert!(outcome.success, "{outcome:?}");
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines[0], JAIL_UID.to_string());
    assert_eq!(lines[1], JAIL_UID.to_string());
    assert_eq!(lines[2], JAIL_UID.to_string(), "no supplementary groups");
    assert_ne!(JAIL_UID, nix::unistd::getuid().as_raw());
    let caps = &lines[3..];
    assert_eq!(caps.len(), 4, "{caps:?}");
    for cap in caps {
        assert!(cap.ends_with("0000000000000000"), "{cap}");
    }
}

#[tokio::test]
async fn the_root_is_read_only_and_only_the_workspace_and_tmp_are_writable() {
    let root = tempfile::tempdir().unwrap();
    let jail = jail(root.path());
    let sandbox = JobSandbox::new(SLUG);
    let outcome = run_in(
        &jail,
        &sandbox,
        "for target in /probe /usr/probe /bin/probe /etc/probe /lib/probe; do \
           if touch $target 2>/dev/null; then echo WROTE $target; fi; done; \
         echo made-in-jail > /workspace/notes.txt && echo workspace-ok; \
         echo scratch > /tmp/scratch && echo tmp-ok; pwd",
    )
    .await;
    assert!(outcome.success, "{outcome:?}");
    assert!(!outcome.stdout.contains("WROTE"), "{}", outcome.stdout);
    assert!(
        outcome.stdout.contains("workspace-ok"),
        "{}",
        outcome.stdout
    );
    assert!(outcome.stdout.contains("tmp-ok"), "{}", outcome.stdout);
    assert!(outcome.stdout.trim_end().ends_with("/workspace"));
    // The workspace is the node's folder for this sandbox, and lasts.
    let written = root.path().join(SLUG).join("notes.txt");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "made-in-jail\n");
    let again = run_in(&jail, &sandbox, "cat notes.txt").await;
    assert_eq!(again.stdout, "made-in-jail\n");
    // Another sandbox never sees it.
    let other = run_in(
        &jail,
        &JobSandbox::new("agent-main-other-00000000"),
        "ls -A",
    )
    .await;
    assert!(other.success, "{other:?}");
    assert_eq!(other.stdout, "");
}

#[tokio::test]
async fn there_is_no_network_unless_the_sandbox_shares_the_nodes() {
    let root = tempfile::tempdir().unwrap();
    let jail = jail(root.path());
    // The host's interfaces (at least one besides loopback on any machine that reached a
    // package registry) are not in the jail's network namespace.
    let host = std::fs::read_to_string("/proc/net/dev").unwrap();
    let interfaces = |table: &str| -> Vec<String> {
        table
            .lines()
            .skip(2)
            .filter_map(|line| line.split(':').next())
            .map(|name| name.trim().to_owned())
            .collect()
    };
    assert!(interfaces(&host).iter().any(|name| name != "lo"), "{host}");
    let isolated = run_in(&jail, &JobSandbox::new(SLUG), "cat /proc/net/dev").await;
    assert!(isolated.success, "{isolated:?}");
    assert_eq!(interfaces(&isolated.stdout), ["lo"]);

    let shared = JobSandbox {
        network: true,
        ..JobSandbox::new(SLUG)
    };
    let networked = run_in(&jail, &shared, "cat /proc/net/dev").await;
    assert_eq!(interfaces(&networked.stdout), interfaces(&host));
}

#[tokio::test]
async fn dot_dot_symlinks_and_absolute_paths_reach_nothing_of_the_host() {
    let root = tempfile::tempdir().unwrap();
    let jail = jail(root.path());
    let sandbox = JobSandbox::new(SLUG);
    // A secret of the host, next to the node's state, and a link to it planted in the
    // sandbox's folder (as a hostile earlier command or a careless operator might).
    let secret = root.path().join("node-secret.txt");
    std::fs::write(&secret, "HOST-SECRET-42").unwrap();
    let workspace = jail.workspace(&sandbox).unwrap();
    std::os::unix::fs::symlink(&secret, workspace.join("planted")).unwrap();
    std::os::unix::fs::symlink("../node-secret.txt", workspace.join("relative")).unwrap();
    let script = format!(
        "cat planted relative ../node-secret.txt ../../node-secret.txt {secret} \
           /etc/shadow /etc/passwd /root/.bashrc 2>/dev/null; \
         ln -s / /workspace/rootlink 2>/dev/null; cat rootlink{secret} 2>/dev/null; \
         ls {root} 2>/dev/null; ls /home 2>/dev/null; cd /workspace/../.. && ls -A",
        secret = secret.display(),
        root = root.path().display(),
    );
    let outcome = run_in(&jail, &sandbox, &script).await;
    assert!(!outcome.stdout.contains("HOST-SECRET-42"), "{outcome:?}");
    assert!(!outcome.stderr.contains("HOST-SECRET-42"), "{outcome:?}");
    assert!(
        !outcome.stdout.contains("root:"),
        "no /etc/passwd: {outcome:?}"
    );
    // `/` of the jail holds only what the jail put there.
    let listed: Vec<&str> = outcome.stdout.lines().collect();
    for entry in &listed {
        assert!(
            [
                "bin",
                "dev",
                "etc",
                "lib",
                "lib64",
                "proc",
                "sbin",
                "tmp",
                "usr",
                "var",
                "workspace"
            ]
            .contains(entry),
            "unexpected {entry} in the jail's root: {listed:?}"
        );
    }
    assert!(listed.contains(&"workspace"), "{listed:?}");
}

#[tokio::test]
async fn no_credential_and_nothing_of_the_nodes_environment_reaches_the_jail() {
    let root = tempfile::tempdir().unwrap();
    let jail = jail(root.path());
    let env = BTreeMap::from([
        ("OPENAI_API_KEY".to_owned(), "sk-live-1".to_owned()),
        ("SLACK_BOT_TOKEN".to_owned(), "xoxb-2".to_owned()),
        ("GREETING".to_owned(), "hello".to_owned()),
    ]);
    let outcome = run_with(
        &jail,
        &JobSandbox::new(SLUG),
        "env | sort",
        &env,
        Duration::from_secs(20),
    )
    .await;
    assert!(outcome.success, "{outcome:?}");
    let names: Vec<&str> = outcome
        .stdout
        .lines()
        .filter_map(|line| line.split('=').next())
        .collect();
    assert!(
        outcome.stdout.contains("GREETING=hello"),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome.stdout.contains("HOME=/workspace"),
        "{}",
        outcome.stdout
    );
    for leaked in ["sk-live-1", "xoxb-2", "CARGO", "RUST", "AWS_"] {
        assert!(!outcome.stdout.contains(leaked), "{leaked}: {names:?}");
    }
}

#[tokio::test]
async fn limits_hold_and_the_timeout_ends_the_whole_jail() {
    let root = tempfile::tempdir().unwrap();
    let jail = jail(root.path());
    let sandbox = JobSandbox {
        memory_mb: 256,
        max_processes: 32,
        ..JobSandbox::new(SLUG)
    };
    let limits = run_in(&jail, &sandbox, "cat /proc/self/limits").await;
    let line = |name: &str| {
        limits
            .stdout
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("Max address space").contains(&(256u64 * 1024 * 1024).to_string()),
        "{}",
        limits.stdout
    );
    assert!(line("Max cpu time").contains("21"), "{}", limits.stdout);
    if nix::unistd::geteuid().is_root() {
        assert!(line("Max processes").contains("32"), "{}", limits.stdout);
    }

    let started = std::time::Instant::now();
    let outcome = run_with(
        &jail,
        &sandbox,
        "sleep 60 & sleep 60",
        &BTreeMap::new(),
        Duration::from_secs(1),
    )
    .await;
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
}
