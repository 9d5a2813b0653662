//! `clawless nodes …` (the operator's side: pairing codes, the registry) and `clawless node …`
//! (the node host's side: pairing this machine, running the worker).
//!
//! `clawless nodes` reads the local registry of `clawless local` (`--state-dir`), or, with
//! `--url` (or `$CLAWLESS_URL`), a deployed backend's operator routes with the admin token from
//! `$CLAWLESS_ADMIN_TOKEN` ([`crate::admin_client`]). Both print the same output.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawless_base::clock::SystemClock;
use clawless_core::nodes::{GrantedEntry, NodeExecReport, NodeFactsRef, node_exec_facts};
use clawless_exec::check::NodeExecFacts;
use clawless_exec::{AllowlistEntry, SkillBin};
use clawless_local::sqlite::{SqliteDb, SqliteTurnQueue};
use clawless_node::client::BackendClient;
use clawless_node::state::{NodeConfig, StateDir};
use clawless_node::worker::{NodeWorker, facts_of};
use clawless_runtime::local_mode::local_nodes_service;
use clawless_runtime::node_routes::node_view;
use clawless_runtime::nodes_service::NodesService;
use serde::Deserialize;
use serde_json::Value;

use crate::admin_client::AdminClient;

/// `clawless nodes` options.
#[derive(Debug, Args)]
pub(crate) struct NodesArgs {
    /// State directory of `clawless local` (holds the node registry).
    #[arg(long, default_value = ".clawless", global = true)]
    state_dir: PathBuf,
    /// A deployed backend's base URL: use its operator routes (token from
    /// $CLAWLESS_ADMIN_TOKEN) instead of the local registry.
    #[arg(long, global = true, env = "CLAWLESS_URL")]
    url: Option<String>,
    #[command(subcommand)]
    command: NodesCommand,
}

#[derive(Debug, Subcommand)]
enum NodesCommand {
    /// Print a one-time pairing code (valid for 10 minutes).
    Pair,
    /// List paired nodes.
    List {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Show one node: facts, last seen, granted allowlist entries.
    Show {
        /// Node id.
        node_id: String,
    },
    /// Revoke a node: its requests get 401 and it receives no jobs.
    Revoke {
        /// Node id.
        node_id: String,
    },
}

/// `clawless node` options.
#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    /// The node's state dir (default: $CLAWLESS_NODE_HOME, else ~/.clawless/node).
    #[arg(long, global = true)]
    node_home: Option<PathBuf>,
    #[command(subcommand)]
    command: NodeCommand,
}

#[derive(Debug, Subcommand)]
enum NodeCommand {
    /// Pair this machine with a clawless backend.
    Pair {
        /// The backend's base URL (e.g. http://127.0.0.1:8787).
        #[arg(long)]
        url: String,
        /// The code from `clawless nodes pair`.
        #[arg(long)]
        code: String,
        /// A name for this node.
        #[arg(long)]
        name: Option<String>,
    },
    /// Run the node host worker until interrupted.
    Run {
        /// Seconds between heartbeats (the backend calls a node offline after two misses).
        #[arg(long, default_value_t = 60)]
        heartbeat_secs: u64,
    },
}

fn local_nodes(state_dir: &std::path::Path) -> anyhow::Result<NodesService> {
    let db_path = state_dir.join("clawless.db");
    if !db_path.is_file() {
        bail!(
            "no local registry at {}: start `clawless local` once (or pass --state-dir)",
            db_path.display()
        );
    }
    let db = SqliteDb::open(&db_path).context("opening the local database")?;
    Ok(local_nodes_service(
        &db,
        Arc::new(SqliteTurnQueue::new(db.clone())),
        Arc::new(SystemClock),
        Default::default(),
    ))
}

/// Where `clawless nodes` reads and changes the registry.
enum Registry {
    /// The SQLite registry of `clawless local`.
    Local(NodesService),
    /// A deployed backend's operator routes.
    Remote(AdminClient),
}

impl Registry {
    fn open(args: &NodesArgs) -> anyhow::Result<Self> {
        Self::at(&args.state_dir, args.url.as_deref())
    }

    /// The deployed backend at `url` when one is given, else the local registry in `state_dir`.
    fn at(state_dir: &std::path::Path, url: Option<&str>) -> anyhow::Result<Self> {
        Ok(match url.map(str::trim).filter(|url| !url.is_empty()) {
            Some(url) => Self::Remote(AdminClient::from_env(url)?),
            None => Self::Local(local_nodes(state_dir)?),
        })
    }

    async fn create_pairing_code(&self) -> anyhow::Result<String> {
        Ok(match self {
            Self::Local(nodes) => nodes.create_pairing_code().await?.0,
            Self::Remote(client) => client.create_pairing_code().await?,
        })
    }

    /// Every node as `node_view` shows it.
    async fn list(&self) -> anyhow::Result<Vec<Value>> {
        Ok(match self {
            Self::Local(nodes) => nodes.list().await?.iter().map(node_view).collect(),
            Self::Remote(client) => client.list().await?,
        })
    }

    async fn show(&self, node_id: &str) -> anyhow::Result<Option<Value>> {
        Ok(match self {
            Self::Local(nodes) => nodes
                .list()
                .await?
                .iter()
                .find(|node| node.node_id == node_id)
                .map(node_view),
            Self::Remote(client) => client.show(node_id).await?,
        })
    }

    async fn revoke(&self, node_id: &str) -> anyhow::Result<bool> {
        Ok(match self {
            Self::Local(nodes) => nodes.revoke(node_id).await?,
            Self::Remote(client) => client.revoke(node_id).await?,
        })
    }
}

/// What `clawless exec check --node` needs of a node's view (`node_view`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecView {
    platform: String,
    #[serde(default)]
    path: Vec<String>,
    #[serde(default)]
    skill_bins: Vec<SkillBin>,
    #[serde(default)]
    granted: Vec<GrantView>,
    #[serde(default)]
    exec: Option<NodeExecReport>,
}

/// One granted entry as `node_view` shows it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GrantView {
    agent_id: String,
    pattern: String,
    #[serde(default)]
    arg_pattern: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    granted_at_ms: u64,
}

/// A paired node's exec facts for `agent_id` (its reported policy with the entries granted
/// from the chat), read from the local registry in `state_dir`, or from the deployed backend
/// at `url`. Both go through the node's operator view, so they answer alike.
pub(crate) async fn paired_node_exec_facts(
    state_dir: &std::path::Path, url: Option<&str>, node_id: &str, agent_id: &str,
) -> anyhow::Result<NodeExecFacts> {
    let registry = Registry::at(state_dir, url)?;
    let Some(view) = registry.show(node_id).await? else {
        bail!("no node {node_id}");
    };
    let view: ExecView =
        serde_json::from_value(view).with_context(|| format!("reading node {node_id}"))?;
    let Some(report) = &view.exec else {
        bail!(
            "node {node_id} has not reported its exec policy: it reports it with each heartbeat \
             of `clawless node run` (nodes older than this clawless never do)"
        );
    };
    let granted: Vec<GrantedEntry> = view
        .granted
        .into_iter()
        .map(|grant| GrantedEntry {
            agent_id: grant.agent_id,
            entry: AllowlistEntry {
                pattern: grant.pattern,
                arg_pattern: grant.arg_pattern,
                source: grant.source,
            },
            granted_at_ms: grant.granted_at_ms,
        })
        .collect();
    Ok(node_exec_facts(
        report,
        &NodeFactsRef {
            platform: &view.platform,
            path: &view.path,
            skill_bins: &view.skill_bins,
            granted: &granted,
        },
        agent_id,
    ))
}

/// One `clawless nodes list` row: id, name, platform, state.
fn list_row(view: &Value) -> String {
    let text = |key: &str| view.get(key).and_then(Value::as_str);
    format!(
        "{}\t{}\t{}\t{}",
        text("nodeId").unwrap_or("-"),
        text("displayName").unwrap_or("-"),
        text("platform").unwrap_or("-"),
        if view.get("revoked").and_then(Value::as_bool) == Some(true) {
            "revoked"
        } else {
            "active"
        }
    )
}

/// Runs `clawless nodes …`.
pub(crate) async fn run_nodes(args: NodesArgs) -> anyhow::Result<ExitCode> {
    let registry = Registry::open(&args)?;
    match args.command {
        NodesCommand::Pair => {
            let code = registry.create_pairing_code().await?;
            let url = match &registry {
                Registry::Remote(_) => args.url.as_deref().unwrap_or_default().trim().to_owned(),
                Registry::Local(_) => "<this backend's URL>".to_owned(),
            };
            println!("{code}");
            eprintln!(
                "On the node machine, within 10 minutes: clawless node pair --url {url} --code {code}"
            );
        }
        NodesCommand::List { json } => {
            let list = registry.list().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("no nodes paired (clawless nodes pair)");
            } else {
                for view in &list {
                    println!("{}", list_row(view));
                }
            }
        }
        NodesCommand::Show { node_id } => {
            let Some(view) = registry.show(&node_id).await? else {
                bail!("no node {node_id}");
            };
            println!("{}", serde_json::to_string_pretty(&view)?);
        }
        NodesCommand::Revoke { node_id } => {
            if !registry.revoke(&node_id).await? {
                bail!("no node {node_id}");
            }
            println!("revoked {node_id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn state_dir(node_home: Option<PathBuf>) -> anyhow::Result<StateDir> {
    Ok(match node_home {
        Some(path) => StateDir::at(path),
        None => StateDir::from_env()?,
    })
}

/// Pairs this machine: exchanges the code for a node id and secret, stored 0600.
pub(crate) async fn pair_node(
    state: &StateDir, url: &str, code: &str, name: Option<String>,
) -> anyhow::Result<NodeConfig> {
    let path_env = std::env::var("PATH").unwrap_or_default();
    let client = BackendClient::new(url)?;
    // Skill bins are reported at the first heartbeat, once the node can ask for them.
    let facts = facts_of(&path_env, Vec::new(), name.clone());
    let paired = client.pair(code, &facts).await.context("pairing")?;
    let config = NodeConfig {
        node_id: paired.node_id,
        secret: paired.secret,
        url: url.trim_end_matches('/').to_owned(),
        display_name: name,
        queue: Some(paired.queue),
    };
    state.save_config(&config)?;
    Ok(config)
}

/// Runs `clawless node …`.
pub(crate) async fn run_node(args: NodeArgs) -> anyhow::Result<ExitCode> {
    let state = state_dir(args.node_home)?;
    match args.command {
        NodeCommand::Pair { url, code, name } => {
            let config = pair_node(&state, &url, &code, name).await?;
            println!(
                "paired as {} (secret stored in {})",
                config.node_id,
                state.node_config_path().display()
            );
        }
        NodeCommand::Run { heartbeat_secs } => {
            let worker = NodeWorker::open(&state)?
                .with_heartbeat_interval(std::time::Duration::from_secs(heartbeat_secs));
            let config = state.load_config()?;
            let source = if worker.reads_sqs() {
                format!(
                    "reading its SQS queue {} (credentials from {})",
                    config.queue.as_deref().unwrap_or("-"),
                    config.url
                )
            } else {
                format!("polling {}", config.url)
            };
            eprintln!(
                "clawless node: {} {source} (policy: {})",
                worker.node_id(),
                state.approvals_path().display()
            );
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            let signal = tokio::spawn(async move {
                shutdown_signal().await;
                if stop_tx.send(true).is_err() {
                    tracing::debug!("worker already stopped");
                }
            });
            let outcome = worker.run(stop_rx).await;
            signal.abort();
            outcome?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return ctrl_c.await,
            };
        tokio::select! {
            () = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}
