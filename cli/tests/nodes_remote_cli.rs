//! `clawless nodes --url URL …` against a stand-in backend on 127.0.0.1 that answers the
//! operator routes as the deployed backend does (`/nodes/admin/…`, admin bearer token, views
//! from `node_view`). The real binary runs each command.
//!
//! Covered: a pairing code is printed; list (table and `--json`), show and revoke print what
//! the local variant prints and reach the backend (a revoked node then lists as revoked);
//! unknown nodes fail with "no node"; a wrong or missing admin token fails clearly with a
//! non-zero exit; `CLAWLESS_URL` works like `--url`; `exec check --node --url` evaluates against
//! the node's reported exec facts and the entries granted to it.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_core::nodes::{GrantedEntry, NodeExecReport, NodeRecord};
use clawless_exec::AllowlistEntry;
use clawless_exec::evaluate::ExecPolicy;
use clawless_exec::fs::DescribedFs;
use clawless_runtime::node_routes::node_view;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
const TOKEN: &str = "operator-admin-token";

struct Registry {
    nodes: Mutex<BTreeMap<String, NodeRecord>>,
    codes: Mutex<Vec<String>>,
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        == Some(format!("Bearer {TOKEN}").as_str())
}

async fn pairing_code(State(registry): State<Arc<Registry>>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let mut codes = registry.codes.lock().unwrap();
    let code = format!("PAIR-{:04}", codes.len() + 17);
    codes.push(code.clone());
    Json(json!({"code": code, "expiresAtMs": 4_000_000_000_000u64})).into_response()
}

async fn list(State(registry): State<Arc<Registry>>, headers: HeaderMap) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let nodes: Vec<Value> = registry
        .nodes
        .lock()
        .unwrap()
        .values()
        .map(node_view)
        .collect();
    Json(json!({ "nodes": nodes })).into_response()
}

async fn show(
    State(registry): State<Arc<Registry>>, headers: HeaderMap, Path(id): Path<String>,
) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match registry.nodes.lock().unwrap().get(&id) {
        Some(node) => Json(node_view(node)).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn revoke(
    State(registry): State<Arc<Registry>>, headers: HeaderMap, Path(id): Path<String>,
) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match registry.nodes.lock().unwrap().get_mut(&id) {
        Some(node) => {
            node.revoked = true;
            node.revoked_at_ms = Some(1_700_000_500_000);
            Json(json!({"revoked": true})).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn record(node_id: &str, display_name: Option<&str>, platform: &str) -> NodeRecord {
    NodeRecord {
        node_id: node_id.to_owned(),
        display_name: display_name.map(str::to_owned),
        secret_hash: "0".repeat(64),
        platform: platform.to_owned(),
        path: vec!["/usr/bin".to_owned(), "/bin".to_owned()],
        skill_bins: Vec::new(),
        queue: format!("https://sqs.us-east-1.amazonaws.com/123456789012/clawless-node-{node_id}"),
        paired_at_ms: 1_700_000_000_000,
        last_seen_ms: 1_700_000_060_000,
        revoked: false,
        revoked_at_ms: None,
        granted: Vec::new(),
        policy_version: 0,
        exec: None,
    }
}

/// Starts the stand-in backend with two nodes; returns its URL and registry.
async fn start() -> (String, Arc<Registry>) {
    let mut laptop = record("laptop-1", Some("laptop"), "darwin");
    laptop.granted.push(GrantedEntry {
        agent_id: "main".to_owned(),
        entry: AllowlistEntry::pattern("/usr/bin/uname"),
        granted_at_ms: 1_700_000_030_000,
    });
    laptop.policy_version = 1;
    laptop.exec = Some(NodeExecReport {
        home: Some("/Users/lena".to_owned()),
        default_policy: ExecPolicy::default(),
        agents: BTreeMap::new(),
        fs: DescribedFs {
            executables: ["/usr/bin/uname", "/bin/zsh"].map(str::to_owned).into(),
            symlinks: [("/bin/sh".to_owned(), "/bin/zsh".to_owned())].into(),
            ..DescribedFs::default()
        },
        truncated: false,
        sandbox_backends: Vec::new(),
    });
    let server = record("server-2", None, "linux");
    let registry = Arc::new(Registry {
        nodes: Mutex::new(
            [laptop, server]
                .into_iter()
                .map(|node| (node.node_id.clone(), node))
                .collect(),
        ),
        codes: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/nodes/admin/pairing-codes", post(pairing_code))
        .route("/nodes/admin/nodes", get(list))
        .route("/nodes/admin/nodes/{id}", get(show))
        .route("/nodes/admin/nodes/{id}/revoke", post(revoke))
        .with_state(registry.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, registry)
}

/// Runs the binary with `env` (and no inherited `CLAWLESS_URL`/`CLAWLESS_ADMIN_TOKEN`);
/// returns (success, stdout, stderr).
async fn clawless(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let output = Command::new(BIN)
            .args(&args)
            .current_dir(dir.path())
            .env_remove("CLAWLESS_URL")
            .env_remove("CLAWLESS_ADMIN_TOKEN")
            .envs(env)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    })
    .await
    .unwrap()
}

const WITH_TOKEN: &[(&str, &str)] = &[("CLAWLESS_ADMIN_TOKEN", TOKEN)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_list_show_and_revoke_speak_to_the_backends_operator_routes() {
    let (url, registry) = start().await;

    let (ok, out, err) = clawless(&["nodes", "--url", &url, "pair"], WITH_TOKEN).await;
    assert!(ok, "{err}");
    let issued = registry.codes.lock().unwrap().clone();
    assert_eq!(issued.len(), 1);
    assert_eq!(out.trim(), issued[0]);
    assert!(
        err.contains(&format!(
            "clawless node pair --url {url} --code {}",
            issued[0]
        )),
        "{err}"
    );

    let (ok, out, err) = clawless(&["nodes", "list", "--url", &url], WITH_TOKEN).await;
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "laptop-1\tlaptop\tdarwin\tactive",
            "server-2\t-\tlinux\tactive"
        ]
    );

    let (ok, out, err) = clawless(&["nodes", "--url", &url, "list", "--json"], WITH_TOKEN).await;
    assert!(ok, "{err}");
    let expected: Vec<Value> = registry
        .nodes
        .lock()
        .unwrap()
        .values()
        .map(node_view)
        .collect();
    assert_eq!(out.trim(), serde_json::to_string_pretty(&expected).unwrap());

    let (ok, out, err) = clawless(&["nodes", "--url", &url, "show", "laptop-1"], WITH_TOKEN).await;
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["granted"][0]["pattern"], "/usr/bin/uname");
    let laptop = node_view(&registry.nodes.lock().unwrap()["laptop-1"]);
    assert_eq!(out.trim(), serde_json::to_string_pretty(&laptop).unwrap());

    let (ok, out, err) =
        clawless(&["nodes", "--url", &url, "revoke", "server-2"], WITH_TOKEN).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "revoked server-2");
    assert!(registry.nodes.lock().unwrap()["server-2"].revoked);
    let (_, out, _) = clawless(&["nodes", "--url", &url, "list"], WITH_TOKEN).await;
    assert!(out.contains("server-2\t-\tlinux\trevoked"), "{out}");

    for command in ["show", "revoke"] {
        let (ok, out, err) =
            clawless(&["nodes", "--url", &url, command, "nobody-9"], WITH_TOKEN).await;
        assert!(!ok, "{command}: {out}");
        assert!(err.contains("no node nobody-9"), "{command}: {err}");
    }
}

/// `clawless exec check --node ID --url URL [extra…]` with `request` on stdin.
async fn exec_check(
    url: &str, node: &str, extra: &[&str], request: Value,
) -> (bool, Value, String) {
    let mut args: Vec<String> = ["exec", "check", "--node", node, "--url", url]
        .map(str::to_owned)
        .into();
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = Command::new(BIN)
            .args(&args)
            .env_remove("CLAWLESS_URL")
            .env("CLAWLESS_ADMIN_TOKEN", TOKEN)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        (
            output.status.success(),
            serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
            String::from_utf8(output.stderr).unwrap(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_check_against_a_deployed_backend_uses_the_nodes_report_and_grants() {
    let (url, _registry) = start().await;
    let (ok, granted, err) =
        exec_check(&url, "laptop-1", &[], json!({"command": "uname -a"})).await;
    assert!(ok, "{err}");
    assert_eq!(granted["nodeDecision"], "allowed", "{granted}");
    assert_eq!(granted["satisfiedBy"], json!(["allowlist"]));
    let (ok, other, err) = exec_check(
        &url,
        "laptop-1",
        &["--agent", "ops"],
        json!({"command": "uname -a"}),
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(
        other["nodeDecision"], "SYSTEM_RUN_DENIED: approval required",
        "the grant was for main only: {other}"
    );
    let (ok, _, err) = exec_check(&url, "server-2", &[], json!({"command": "ls"})).await;
    assert!(!ok);
    assert!(
        err.contains("node server-2 has not reported its exec policy"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clawless_url_in_the_environment_works_like_the_flag() {
    let (url, _registry) = start().await;
    let (ok, out, err) = clawless(
        &["nodes", "show", "server-2"],
        &[("CLAWLESS_URL", &url), ("CLAWLESS_ADMIN_TOKEN", TOKEN)],
    )
    .await;
    assert!(ok, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["nodeId"], "server-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_admin_token_fails_clearly_and_changes_nothing() {
    let (url, registry) = start().await;

    for command in [
        vec!["pair"],
        vec!["list"],
        vec!["show", "laptop-1"],
        vec!["revoke", "laptop-1"],
    ] {
        let mut args = vec!["nodes", "--url", &url];
        args.extend(&command);
        let (ok, out, err) = clawless(&args, &[("CLAWLESS_ADMIN_TOKEN", "guessed")]).await;
        assert!(!ok, "{command:?}: {out}");
        assert!(out.is_empty(), "{command:?}: {out}");
        assert!(
            err.contains("refused the admin token (CLAWLESS_ADMIN_TOKEN)"),
            "{command:?}: {err}"
        );

        let (ok, _, err) = clawless(&args, &[]).await;
        assert!(!ok, "{command:?}");
        assert!(
            err.contains("CLAWLESS_ADMIN_TOKEN is not set"),
            "{command:?}: {err}"
        );
    }
    assert!(registry.codes.lock().unwrap().is_empty());
    assert!(!registry.nodes.lock().unwrap()["laptop-1"].revoked);
}
