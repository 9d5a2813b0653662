//! `clawless local` (the whole system on 127.0.0.1) and `clawless chat` (send a message to
//! it and print the reply).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use clawless_channels::{SIGNATURE_HEADER, sign};
use clawless_node::state::StateDir;
use clawless_node::worker::NodeWorker;
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{
    DEFAULT_PORT, LOCAL_CHAT_SENDER, LocalOptions, RunningLocal, local_secret, start_local,
};
use clawless_runtime::local_replies::ReceivedReply;
use clawless_runtime::sources::looks_like_skills_dir;

/// Options shared by `local` and `chat`.
#[derive(Debug, Args)]
pub(crate) struct LocalArgs {
    /// Configuration file (default: ./clawless.yaml when present).
    #[arg(long)]
    config: Option<PathBuf>,
    /// State directory: database, blobs, workspace, channel secret.
    #[arg(long, default_value = ".clawless")]
    state_dir: PathBuf,
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Don't start a node host for this machine in-process (pair one with `clawless node`).
    #[arg(long)]
    no_node: bool,
}

/// The local system and, unless `--no-node`, the in-process node host for this machine.
pub(crate) struct LocalSystem {
    running: RunningLocal,
    node: Option<(
        tokio::task::JoinHandle<()>,
        tokio::sync::watch::Sender<bool>,
    )>,
}

impl LocalSystem {
    async fn stop(self) {
        if let Some((task, stop)) = self.node {
            if stop.send(true).is_err() {
                tracing::debug!("the in-process node had already stopped");
            }
            if let Err(err) = task.await {
                tracing::debug!(error = ?err, "in-process node task ended");
            }
        }
        self.running.stop().await;
    }
}

/// The in-process node's exec policy, written on first start to `<state>/node/` where the
/// user can read and change it. It is the explicit policy that lets the demo run `uname` and
/// `df` (with exactly these argument shapes) without asking; anything else asks in the chat.
const DEMO_APPROVALS: &str = r#"{
  "version": 1,
  "defaults": { "security": "allowlist", "ask": "on-miss", "askFallback": "deny", "autoAllowSkills": false },
  "agents": {
    "*": {
      "allowlist": [
        { "pattern": "/usr/bin/uname", "argPattern": "^(-[a-z]+)?$" },
        { "pattern": "/bin/uname", "argPattern": "^(-[a-z]+)?$" },
        { "pattern": "/usr/bin/df", "argPattern": "^(-[hkPT]+)?( /)?$" },
        { "pattern": "/bin/df", "argPattern": "^(-[hkPT]+)?( /)?$" }
      ]
    }
  }
}
"#;

/// Pairs (once) and starts the node host for this machine, polling the local system.
async fn start_local_node(
    args: &LocalArgs, running: &RunningLocal,
) -> anyhow::Result<(
    tokio::task::JoinHandle<()>,
    tokio::sync::watch::Sender<bool>,
)> {
    let state = StateDir::at(args.state_dir.join("node"));
    state.ensure()?;
    let approvals = state.approvals_path();
    if !approvals.exists() {
        std::fs::write(&approvals, DEMO_APPROVALS)
            .with_context(|| format!("writing {}", approvals.display()))?;
    }
    let url = format!("http://{}", running.addr);
    let known = match state.load_config() {
        Ok(config) => running
            .nodes
            .authenticate(&config.node_id, &config.secret)
            .await
            .ok()
            .map(|_| config),
        Err(_) => None,
    };
    match known {
        Some(mut config) if config.url != url => {
            config.url = url;
            state.save_config(&config)?;
        }
        Some(_) => {}
        None => {
            let (code, _) = running.nodes.create_pairing_code().await?;
            crate::node_cmd::pair_node(&state, &url, &code, Some("this machine".to_owned()))
                .await?;
        }
    }
    let worker = NodeWorker::open(&state)?;
    eprintln!(
        "clawless local: node host {} runs commands on this machine under {}",
        worker.node_id(),
        approvals.display()
    );
    worker.heartbeat().await.context("first node heartbeat")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        if let Err(err) = worker.run(stop_rx).await {
            tracing::error!(error = %err, "the in-process node host stopped");
        }
    });
    Ok((task, stop_tx))
}

/// `clawless chat` options.
#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    /// The message.
    text: String,
    #[command(flatten)]
    local: LocalArgs,
    /// Conversation id.
    #[arg(long, default_value = "local-chat")]
    chat_id: String,
    /// Start the local system in this process if none is listening.
    #[arg(long)]
    spawn_local: bool,
    /// Seconds to wait for the reply.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

/// The configuration `clawless local` reads: `path`, else ./clawless.yaml when present, else
/// the defaults (`clawless cron` reads the same).
pub(crate) fn read_config(path: Option<&Path>) -> anyhow::Result<ClawlessConfig> {
    let default = Path::new("clawless.yaml");
    Ok(match path {
        Some(path) => ClawlessConfig::from_file(path)?,
        None if default.is_file() => ClawlessConfig::from_file(default)?,
        None => ClawlessConfig::default(),
    })
}

fn load_config(args: &LocalArgs) -> anyhow::Result<ClawlessConfig> {
    local_config(args.config.as_deref())
}

/// The configuration as `clawless local` runs it: [`read_config`], with the bundled skills
/// of a `skills/` folder here when none are configured.
pub(crate) fn local_config(path: Option<&Path>) -> anyhow::Result<ClawlessConfig> {
    let mut config = read_config(path)?;
    if config.skills.bundled.is_none() && looks_like_skills_dir(Path::new("skills")) {
        let bundled = std::env::current_dir()?.join("skills");
        config.skills.bundled = Some(bundled.display().to_string());
    }
    Ok(config)
}

async fn start(args: &LocalArgs) -> anyhow::Result<LocalSystem> {
    let config = load_config(args)?;
    // `secrets:` entries come from SSM / Secrets Manager with this machine's AWS credentials.
    let secrets = clawless_runtime::secrets::fetch_with_ambient_aws(&config.secrets)
        .await
        .context("fetching the secrets: entries of clawless.yaml from AWS")?;
    let model = clawless_llm::build_model(&config.models, &|name: &str| secrets.lookup(name))
        .context("model configuration")?;
    let label = model.model_ref();
    let running = start_local(LocalOptions {
        config,
        state_dir: args.state_dir.clone(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)),
        model,
        secrets,
    })
    .await?;
    if label.starts_with("offline/") {
        eprintln!(
            "clawless local: no model key configured, using the OFFLINE scripted model \
             (set ANTHROPIC_API_KEY or OPENAI_API_KEY for real answers)"
        );
    }
    eprintln!(
        "clawless local: listening on http://{} (model {label})",
        running.addr
    );
    let node = if args.no_node {
        None
    } else {
        match start_local_node(args, &running).await {
            Ok(node) => Some(node),
            Err(err) => {
                running.stop().await;
                return Err(err.context("starting the in-process node host (or pass --no-node)"));
            }
        }
    };
    Ok(LocalSystem { running, node })
}

/// Runs `clawless local` until interrupted.
pub(crate) async fn run_local(args: LocalArgs) -> anyhow::Result<ExitCode> {
    let running = start(&args).await?;
    tokio::select! {
        () = running_forever(&running.running) => {}
        result = tokio::signal::ctrl_c() => result.context("waiting for Ctrl-C")?,
    }
    running.stop().await;
    Ok(ExitCode::SUCCESS)
}

async fn running_forever(_running: &RunningLocal) {
    std::future::pending::<()>().await;
}

/// Runs `clawless chat`.
pub(crate) async fn run_chat(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let base = format!("http://127.0.0.1:{}", args.local.port);
    let client = clawless_http::client_builder()
        .no_proxy()
        .build()
        .context("HTTP client")?;
    let spawned = if client
        .get(format!("{base}/local/replies/{}", args.chat_id))
        .send()
        .await
        .is_ok()
    {
        None
    } else if args.spawn_local {
        Some(start(&args.local).await?)
    } else {
        bail!("nothing listens on {base}: start `clawless local` first (or pass --spawn-local)");
    };
    let outcome = chat(&client, &base, &args).await;
    if let Some(running) = spawned {
        running.stop().await;
    }
    let reply = outcome?;
    println!("{}", reply.text);
    for file in &reply.attachments {
        match &file.url {
            Some(url) => println!("📎 {} ({}): {url}", file.name, file.mime),
            None => println!("📎 {} ({})", file.name, file.mime),
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn chat(
    client: &reqwest::Client, base: &str, args: &ChatArgs,
) -> anyhow::Result<ReceivedReply> {
    let secret = local_secret(&args.local.state_dir)?;
    let seen = replies(client, base, &args.chat_id, 0, 0).await?.len();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let body = serde_json::to_vec(&serde_json::json!({
        "message_id": format!("chat-{nanos}"),
        "chat_id": args.chat_id,
        "sender_id": LOCAL_CHAT_SENDER,
        "text": args.text,
        "chat_type": "direct",
    }))?;
    let response = client
        .post(format!("{base}/webhook/generic"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, sign(secret.as_bytes(), &body))
        .body(body)
        .send()
        .await
        .context("sending the message")?;
    let status = response.status();
    if status != reqwest::StatusCode::ACCEPTED {
        let text = response.text().await.unwrap_or_default();
        bail!("the message was not accepted (HTTP {status}): {text}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    loop {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        if remaining.is_zero() {
            bail!("no reply within {} s", args.timeout);
        }
        let wait = remaining.as_secs().clamp(1, 20);
        if let Some(reply) = replies(client, base, &args.chat_id, seen, wait)
            .await?
            .into_iter()
            .next()
        {
            return Ok(reply);
        }
    }
}

async fn replies(
    client: &reqwest::Client, base: &str, chat_id: &str, after: usize, wait: u64,
) -> anyhow::Result<Vec<ReceivedReply>> {
    let response = client
        .get(format!(
            "{base}/local/replies/{chat_id}?after={after}&wait={wait}"
        ))
        .send()
        .await
        .context("polling for the reply")?;
    Ok(response.error_for_status()?.json().await?)
}
