//! `clawless local`: the whole system in one process on 127.0.0.1. The same HTTP routes and
//! the same turn service as in AWS, over SQLite (sessions, inbox, turn queue) and directory
//! trees (skills, workspace, transcript blobs).
//!
//! Everything lives under one state directory: `clawless.db`, `blobs/`, `workspace/` (the
//! default agent workspace) and `generic.secret` (the generic channel's HMAC secret, created
//! on first start with mode 0600, which `clawless chat` reads to sign its messages, and from
//! which the key of the `/media/` route's links is derived). On first
//! start, a brand-new agent workspace gets the default bootstrap files
//! ([`clawless_core::system_prompt::seed`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawless_base::model::ModelProvider;
use clawless_base::object_store::ObjectStore;
use clawless_channels::media_links::{MediaPublisher, SignedMediaLinks};
use clawless_core::session::offload::OffloadingSessionStore;
use clawless_core::session::{Inbox, SessionStore, TurnQueue};
use clawless_core::system_prompt::seed::{SeedScope, seed_workspace};
use clawless_local::DirObjectStore;
use clawless_local::sqlite::{
    SqliteBackgroundProcesses, SqliteCronStore, SqliteDb, SqliteExecJobs, SqliteExecQueue,
    SqliteInbox, SqliteNodeRegistry, SqliteSessionStore, SqliteTimers, SqliteTurnQueue,
};
use tokio::net::TcpListener;

use crate::aws_app::ADMIN_TOKEN_ENV;
use crate::channels::{ChannelSet, ChannelSetup};
use crate::config::ClawlessConfig;
use crate::cron_routes::cron_admin_router;
use crate::cron_service::{CronDeps, CronService};
use crate::ingress::{Ingress, webhook_router};
use crate::local_machine::local_context;
use crate::local_media::media_router;
use crate::local_replies::LocalReplies;
use crate::node_routes::{AdminToken, RegistryNodeAuth, nodes_router};
use crate::nodes_service::{BackgroundSettings, NodesDeps, NodesService};
use crate::routes::skills_bins_router;
use crate::secrets::SecretValues;
use crate::skills_service::SkillsService;
use crate::sources::{SourceUri, StoreFactory};
use crate::turn_service::{HeartbeatTimers, HostFacts, TurnDeps, TurnService};
use crate::turn_worker::{WorkerLanes, run_worker};
use clawless_base::clock::{Clock, SystemClock};
use clawless_base::ids::random_hex;

/// Default port of `clawless local`.
pub const DEFAULT_PORT: u16 = 8787;

/// Sender id `clawless chat` uses.
pub const LOCAL_CHAT_SENDER: &str = "local-user";

/// File in the state directory holding the generic channel's secret.
pub const SECRET_FILE: &str = "generic.secret";

/// Why local mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The state directory or a file in it is unusable.
    #[error("state directory {path}: {source}")]
    State {
        /// The path.
        path: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// Something else failed while assembling the system.
    #[error("{0}")]
    Setup(String),
}

fn state_error(path: &Path) -> impl FnOnce(std::io::Error) -> LocalError + '_ {
    move |source| LocalError::State {
        path: path.display().to_string(),
        source,
    }
}

/// The generic channel secret of a state directory, created on first use.
pub fn local_secret(state_dir: &Path) -> Result<String, LocalError> {
    let path = state_dir.join(SECRET_FILE);
    match std::fs::read_to_string(&path) {
        Ok(secret) if !secret.trim().is_empty() => return Ok(secret.trim().to_owned()),
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(state_error(&path)(err)),
    }
    std::fs::create_dir_all(state_dir).map_err(state_error(state_dir))?;
    let secret = random_hex(32)
        .map_err(std::io::Error::other)
        .map_err(state_error(&path))?;
    write_private(&path, secret.as_bytes()).map_err(state_error(&path))?;
    Ok(secret)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

/// What `clawless local` is started with.
#[derive(Debug)]
pub struct LocalOptions {
    /// The configuration (skills sources, agents, channels, tools).
    pub config: ClawlessConfig,
    /// Where state lives.
    pub state_dir: PathBuf,
    /// Address to listen on (loopback).
    pub listen: SocketAddr,
    /// The model to use.
    pub model: Arc<dyn ModelProvider>,
    /// Values fetched for the config's `secrets:` entries
    /// ([`crate::secrets::fetch_with_ambient_aws`]); other `…Env` names come from the
    /// environment.
    pub secrets: SecretValues,
}

/// A started local system.
pub struct RunningLocal {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The turn service (tests reach the sessions through it).
    pub turns: Arc<TurnService>,
    /// Replies received by the built-in reply receiver.
    pub replies: LocalReplies,
    /// Node hosts (pairing codes for the in-process node and `clawless nodes`).
    pub nodes: Arc<NodesService>,
    server: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
    /// Set to `true` to stop the worker. A watch keeps its value, so a stop sent before the
    /// worker first waits is still seen (a `Notify` wakes only tasks already waiting).
    stop: tokio::sync::watch::Sender<bool>,
}

impl std::fmt::Debug for RunningLocal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningLocal")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RunningLocal {
    /// Waits until the server stops (it runs until the process ends or [`Self::stop`]).
    pub async fn wait(self) {
        if let Err(err) = self.server.await {
            tracing::error!(error = ?err, "local server task failed");
        }
    }

    /// Stops the worker and the server.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        self.server.abort();
        if let Err(err) = self.worker.await {
            tracing::debug!(error = ?err, "worker task ended");
        }
    }
}

/// Assembles and starts the whole system.
pub async fn start_local(mut options: LocalOptions) -> Result<RunningLocal, LocalError> {
    let state_dir = prepare_state_dir(&mut options.config, &options.state_dir)?;
    let listener = TcpListener::bind(options.listen)
        .await
        .map_err(|err| LocalError::Setup(format!("cannot listen on {}: {err}", options.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|err| LocalError::Setup(err.to_string()))?;

    let (secret, reply_url) = generic_secret_and_reply_url(&options, &state_dir, addr)?;

    let core = open_core(&options, &state_dir, Seeding::NewWorkspaces).await?;
    let media_links = SignedMediaLinks::new(
        &format!("http://{addr}"),
        secret.as_bytes(),
        Arc::clone(&core.clock),
    );
    let media_route = media_router(
        Arc::clone(&core.blobs),
        media_links.clone(),
        Arc::clone(&core.clock),
    );
    let client = clawless_http::client_builder()
        .build()
        .map_err(|err| LocalError::Setup(err.to_string()))?;
    let env = |name: &str| options.secrets.lookup(name);
    let channels = ChannelSet::build(&ChannelSetup {
        config: &options.config,
        env: &env,
        http: client,
        generic_secret: Some(secret.clone()),
        generic_reply_url: Some(reply_url),
        // `clawless chat` speaks as the machine's owner unless the config names owners.
        generic_owners: vec![LOCAL_CHAT_SENDER.to_owned()],
        sent_chunks: Arc::clone(&core.inbox),
    })
    // Files people send land in `blobs/media/inbound/`.
    .with_blob_store(Arc::clone(&core.blobs))
    // Files the agent sends on the generic channel land in `blobs/media/outbound/`, linked
    // through this server's `/media/` route.
    .with_reply_links(MediaPublisher::new(
        Arc::clone(&core.blobs),
        Arc::new(media_links.clone()),
    ));
    let turns = Arc::new(local_turn_service(
        &options,
        &state_dir,
        &core,
        Arc::new(channels.outbox),
    ));
    let LocalCore {
        inbox,
        queue,
        clock,
        nodes,
        skills,
        cron,
        ..
    } = core;
    arm_timers(&turns, &cron).await?;
    let ingress = Arc::new(Ingress {
        inbox,
        queue: Arc::clone(&queue),
        channels: channels.inbound,
        agent_id: crate::config::DEFAULT_AGENT_ID.to_owned(),
        dm_scope: options.config.session.dm_scope,
        clock,
    });
    let replies = LocalReplies::new(secret.as_bytes());
    let app =
        local_app(&options.secrets, ingress, skills, &nodes, &replies, &cron)?.merge(media_route);
    let server = tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!(error = ?err, "local server stopped");
        }
    });
    let (stop, worker) = spawn_worker(
        &options.config,
        Arc::clone(&turns),
        Arc::clone(&nodes),
        queue,
    );
    tracing::info!(%addr, state = %state_dir.display(), "clawless local is listening");
    Ok(RunningLocal {
        addr,
        turns,
        replies,
        nodes,
        server,
        worker,
        stop,
    })
}

/// Creates the state directory and its workspace, which the agents use unless the config
/// names one.
fn prepare_state_dir(config: &mut ClawlessConfig, state_dir: &Path) -> Result<PathBuf, LocalError> {
    let state_dir = state_dir.to_path_buf();
    std::fs::create_dir_all(&state_dir).map_err(state_error(&state_dir))?;
    let workspace_dir = state_dir.join("workspace");
    std::fs::create_dir_all(&workspace_dir).map_err(state_error(&workspace_dir))?;
    if config.agents.defaults.workspace.is_none() {
        config.agents.defaults.workspace = Some(workspace_dir.display().to_string());
    }
    Ok(state_dir)
}

/// Arms the heartbeats and the cron jobs (catching up on what was missed while stopped).
async fn arm_timers(turns: &TurnService, cron: &CronService) -> Result<(), LocalError> {
    turns
        .arm_heartbeats()
        .await
        .map_err(|err| LocalError::Setup(format!("cannot arm the heartbeats: {err}")))?;
    let started = cron
        .start_up()
        .await
        .map_err(|err| LocalError::Setup(format!("cannot start the cron jobs: {err}")))?;
    tracing::info!(armed = started.armed, caught_up = ?started.caught_up, interrupted = ?started.interrupted, "cron jobs armed");
    Ok(())
}

/// Local mode's storage and the services every part of it shares.
struct LocalCore {
    db: SqliteDb,
    sessions: Arc<dyn SessionStore>,
    blobs: Arc<dyn ObjectStore>,
    inbox: Arc<dyn Inbox>,
    queue: Arc<dyn TurnQueue>,
    clock: Arc<dyn Clock>,
    nodes: Arc<NodesService>,
    stores: Arc<StoreFactory>,
    skills: Arc<SkillsService>,
    /// The binaries the skills declare, for this machine's eligibility.
    bins: Vec<String>,
    cron: Arc<CronService>,
}

/// Whether opening local mode seeds the workspaces it finds new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seeding {
    /// Seeds them (a running system).
    NewWorkspaces,
    /// Writes nothing (a report).
    None,
}

/// Opens the storage in `state_dir` and builds the services over it (no server, no worker).
/// New workspaces are seeded, with `seeding`, before anything lists them.
async fn open_core(
    options: &LocalOptions, state_dir: &Path, seeding: Seeding,
) -> Result<LocalCore, LocalError> {
    let LocalStorage {
        db,
        sessions,
        blobs,
        inbox,
        queue,
    } = open_storage(state_dir).await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // Files node hosts upload with their results land in `blobs/media/outbound/`.
    let nodes = Arc::new(
        local_nodes_service(
            &db,
            Arc::clone(&queue),
            Arc::clone(&clock),
            options.config.exec.clone(),
        )
        .with_media_store(Arc::clone(&blobs))
        .with_background_settings(
            BackgroundSettings::from_tools_exec(options.config.tools.policy.exec.as_ref())
                .map_err(LocalError::Setup)?,
        ),
    );
    let stores = Arc::new(store_factory(&options.config).await);
    if seeding == Seeding::NewWorkspaces {
        seed_new_workspaces(&options.config, &stores).await?;
    }
    let skills = Arc::new(
        SkillsService::new(options.config.clone(), &stores)
            .map_err(|err| LocalError::Setup(err.to_string()))?,
    );
    let bins = declared_bins(&skills).await;
    let cron = Arc::new(local_cron_service(
        &db,
        state_dir,
        Arc::clone(&queue),
        Arc::clone(&clock),
        options.config.clone(),
    ));
    Ok(LocalCore {
        db,
        sessions,
        blobs,
        inbox,
        queue,
        clock,
        nodes,
        stores,
        skills,
        bins,
        cron,
    })
}

/// Local mode's turn service: the embedded adapters, this machine's facts, and every port.
fn local_turn_service(
    options: &LocalOptions, state_dir: &Path, core: &LocalCore,
    outbox: Arc<dyn clawless_core::outbox::Outbox>,
) -> TurnService {
    let turns = TurnService::new(TurnDeps {
        skills: Arc::clone(&core.skills),
        stores: Arc::clone(&core.stores),
        sessions: Arc::clone(&core.sessions),
        model: Arc::clone(&options.model),
        outbox,
        web: crate::web_fetcher::default_web_fetcher(),
        clock: Arc::clone(&core.clock),
        eligibility: local_context(core.bins.iter().map(String::as_str)),
        home_dirs: std::env::var("HOME")
            .map(|home| vec![home])
            .unwrap_or_default(),
        host: HostFacts {
            host: Some("local".to_owned()),
            os: Some(std::env::consts::OS.to_owned()),
            arch: Some(std::env::consts::ARCH.to_owned()),
        },
        nodes: Some(Arc::clone(&core.nodes)),
    });
    with_local_ports(
        turns.with_blobs(Arc::clone(&core.blobs)),
        &options.config,
        &options.secrets,
        &core.db,
        state_dir,
        &core.cron,
        &core.queue,
    )
}

/// What the next request of session `session_key` in the local state would carry (`/context`
/// as `clawless sessions context` prints it); `None` when there is no such session. Nothing
/// runs and nothing is stored: no server, no worker, no timers.
pub async fn local_context_report(
    mut options: LocalOptions, session_key: &str, detail: bool,
) -> Result<Option<String>, LocalError> {
    let state_dir = prepare_state_dir(&mut options.config, &options.state_dir)?;
    let core = open_core(&options, &state_dir, Seeding::None).await?;
    let turns = local_turn_service(&options, &state_dir, &core, Arc::new(NoReplies));
    turns
        .context_report(session_key, detail)
        .await
        .map_err(|err| LocalError::Setup(err.to_string()))
}

/// The outbox of a service that only reports: it never sends.
#[derive(Debug)]
struct NoReplies;

#[async_trait::async_trait]
impl clawless_core::outbox::Outbox for NoReplies {
    async fn send(
        &self, _reply: &clawless_core::turn::OutboundReply,
    ) -> Result<(), clawless_core::outbox::OutboxError> {
        Err(clawless_core::outbox::OutboxError::Rejected {
            message: "this service only reports".to_owned(),
        })
    }
}

/// `turns` with local mode's model choice, heartbeats, cron, sub-agents, session listing
/// and secrets, all over the same SQLite database and turn queue (the tools' cache, in the
/// blob store, is added by the caller).
fn with_local_ports(
    turns: TurnService, config: &ClawlessConfig, secrets: &SecretValues, db: &SqliteDb,
    state_dir: &Path, cron: &Arc<CronService>, queue: &Arc<dyn TurnQueue>,
) -> TurnService {
    turns
        .with_model_factory({
            let secrets = secrets.clone();
            clawless_llm::model_factory(
                config.models.clone(),
                move |name: &str| secrets.lookup(name),
                clawless_llm::ModelBuild::default(),
            )
        })
        // Heartbeat and cron firings wait in the same timers table as job deadlines, and
        // reach the turn queue the same way.
        .with_heartbeats(HeartbeatTimers {
            timers: Arc::new(SqliteTimers::new(db.clone())),
            seed: state_dir.display().to_string(),
        })
        .with_cron(Arc::clone(cron))
        // Sub-agents are sessions of their own on the same turn queue.
        .with_subagents(Arc::clone(queue))
        .with_subagent_timers(Arc::new(SqliteTimers::new(db.clone())))
        .with_session_lister(Arc::new(SqliteSessionStore::new(db.clone())))
        .with_secrets(secrets.clone())
}

/// The generic channel's secret (configured, else the state directory's own) and where its
/// replies go (configured, else this server's `/local/replies`).
fn generic_secret_and_reply_url(
    options: &LocalOptions, state_dir: &Path, addr: SocketAddr,
) -> Result<(String, String), LocalError> {
    let secret = match options
        .config
        .channels
        .generic
        .as_ref()
        .and_then(|generic| generic.resolve_secret(&|name| options.secrets.lookup(name)))
    {
        Some(secret) => secret,
        None => local_secret(state_dir)?,
    };
    let generic_config = options.config.channels.generic.clone().unwrap_or_default();
    let reply_url = generic_config
        .reply_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}/local/replies"));
    Ok((secret, reply_url))
}

/// The SQLite database and blob store of local mode, and what is opened over them.
struct LocalStorage {
    db: SqliteDb,
    sessions: Arc<dyn SessionStore>,
    /// `blobs/`: offloaded session documents and tools' caches.
    blobs: Arc<dyn ObjectStore>,
    inbox: Arc<dyn Inbox>,
    queue: Arc<dyn TurnQueue>,
}

/// Opens local mode's storage in `state_dir`; turns the last process left in flight are
/// released to run again.
async fn open_storage(state_dir: &Path) -> Result<LocalStorage, LocalError> {
    let db = SqliteDb::open(state_dir.join("clawless.db"))
        .map_err(|err| LocalError::Setup(format!("cannot open the local database: {err}")))?;
    let blobs: Arc<dyn ObjectStore> = Arc::new(
        DirObjectStore::open(state_dir.join("blobs"))
            .map_err(|err| LocalError::Setup(format!("cannot open the blob store: {err}")))?,
    );
    let inner_sessions: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db.clone()));
    let sessions: Arc<dyn SessionStore> = Arc::new(OffloadingSessionStore::new(
        inner_sessions,
        Arc::clone(&blobs),
        "sessions/",
    ));
    let inbox: Arc<dyn Inbox> = Arc::new(SqliteInbox::new(db.clone()));
    let turn_queue = SqliteTurnQueue::new(db.clone());
    // A turn the previous process was running when it died resumes now, not after the
    // queue's visibility timeout.
    match turn_queue.release_in_flight().await {
        Ok(0) => {}
        Ok(released) => tracing::info!(released, "resuming turns left in flight by the last run"),
        Err(err) => {
            return Err(LocalError::Setup(format!(
                "cannot read the turn queue: {err}"
            )));
        }
    }
    let queue: Arc<dyn TurnQueue> = Arc::new(turn_queue);
    Ok(LocalStorage {
        db,
        sessions,
        blobs,
        inbox,
        queue,
    })
}

/// Starts the worker: the turn queue's events (sub-agents' in a lane of their own) and the
/// due timers, until the returned sender says stop.
fn spawn_worker(
    config: &ClawlessConfig, turns: Arc<TurnService>, nodes: Arc<NodesService>,
    queue: Arc<dyn TurnQueue>,
) -> (
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    // Sub-agent sessions' events run in a lane of their own, `maxConcurrent` wide.
    let lanes = WorkerLanes::local(&config.agents.defaults.subagents.clone().unwrap_or_default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = {
        let timer_nodes = nodes;
        let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
            // An error means the sender is gone: stop too.
            let _ = stopped.wait_for(|stop| *stop).await;
        };
        let timers_stop = until_stopped(stopped.clone());
        let turns_stop = until_stopped(stopped);
        tokio::spawn(async move {
            let timers = fire_timers(timer_nodes, timers_stop);
            let turns = run_worker(turns, queue, lanes, turns_stop);
            tokio::join!(timers, turns);
        })
    };
    (stop, worker)
}

/// The local server's routes: webhooks, skills' bins, nodes, the local replies, and the cron
/// admin route once an admin token is set.
fn local_app(
    secrets: &SecretValues, ingress: Arc<Ingress>, skills: Arc<SkillsService>,
    nodes: &Arc<NodesService>, replies: &LocalReplies, cron: &Arc<CronService>,
) -> Result<axum::Router, LocalError> {
    let mut app = webhook_router(ingress)
        .merge(skills_bins_router(
            skills,
            Arc::new(RegistryNodeAuth::new(Arc::clone(nodes))),
        ))
        .merge(nodes_router(Arc::clone(nodes), true))
        .merge(replies.clone().router());
    // `clawless cron` opens the database itself; `clawless cron --url` (the operator route of
    // the `nodes` function) is served too once an admin token is set, and never without one.
    if let Some(token) = secrets.lookup(ADMIN_TOKEN_ENV) {
        let token = AdminToken::known(ADMIN_TOKEN_ENV, &token)
            .map_err(|err| LocalError::Setup(err.to_string()))?;
        app = app.merge(cron_admin_router(Arc::clone(cron), token));
    }
    Ok(app)
}

/// The node registry, exec jobs, exec queues, timers and background process index of local
/// mode, in the same SQLite database as the sessions.
pub fn local_nodes_service(
    db: &SqliteDb, turns: Arc<dyn TurnQueue>, clock: Arc<dyn Clock>,
    settings: crate::nodes_service::ExecSettings,
) -> NodesService {
    NodesService::new(NodesDeps {
        registry: Arc::new(SqliteNodeRegistry::new(db.clone())),
        jobs: Arc::new(SqliteExecJobs::new(db.clone())),
        queues: Arc::new(SqliteExecQueue::new(db.clone())),
        timers: Arc::new(SqliteTimers::new(db.clone())),
        turns,
        clock,
        settings,
    })
    .with_process_index(Arc::new(SqliteBackgroundProcesses::new(db.clone())))
}

/// The cron jobs of local mode, in the same SQLite database as the sessions, with their
/// firings in its timers table. `clawless cron` opens the same.
pub fn local_cron_service(
    db: &SqliteDb, state_dir: &Path, turns: Arc<dyn TurnQueue>, clock: Arc<dyn Clock>,
    config: ClawlessConfig,
) -> CronService {
    CronService::new(CronDeps {
        store: Arc::new(SqliteCronStore::new(db.clone())),
        timers: Arc::new(SqliteTimers::new(db.clone())),
        queue: turns,
        clock,
        config: Arc::new(config),
        store_label: Some(state_dir.join("clawless.db").display().to_string()),
    })
}

/// Moves due timers (job deadlines, approval timeouts) onto the turn queue until `shutdown`.
async fn fire_timers(nodes: Arc<NodesService>, shutdown: impl std::future::Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let fired = tokio::select! {
            () = &mut shutdown => return,
            fired = nodes.fire_due_timers(std::time::Duration::from_secs(1)) => fired,
        };
        if let Err(err) = fired {
            tracing::error!(error = ?err, "timers could not fire; retrying");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }
}

/// Gives every agent workspace that is still brand new the default bootstrap files (the
/// first-conversation ritual included), so a first start greets the user with an identity
/// rather than `[MISSING]` lines. A workspace already in use is left exactly as it is.
async fn seed_new_workspaces(
    config: &ClawlessConfig, stores: &StoreFactory,
) -> Result<(), LocalError> {
    let mut seen = Vec::new();
    for location in config
        .agents()
        .into_iter()
        .filter_map(|agent| agent.workspace)
    {
        if seen.contains(&location) {
            continue;
        }
        let failed = |err: &dyn std::fmt::Display| {
            LocalError::Setup(format!("cannot seed the workspace {location}: {err}"))
        };
        let uri = SourceUri::parse(&location).map_err(|err| failed(&err))?;
        let (store, prefix) = stores.open(&uri).map_err(|err| failed(&err))?;
        // What was written is logged by the seeding itself.
        seed_workspace(store.as_ref(), &prefix, SeedScope::NewWorkspaceOnly)
            .await
            .map_err(|err| failed(&err))?;
        seen.push(location);
    }
    Ok(())
}

/// The binaries the loaded skills declare, to probe on this machine's PATH.
async fn declared_bins(skills: &SkillsService) -> Vec<String> {
    match skills.bins().await {
        Ok(bins) => bins,
        Err(err) => {
            tracing::warn!(error = %err, "skills could not be loaded to probe their binaries");
            Vec::new()
        }
    }
}

/// A store factory; the AWS SDK is only set up when the config names an `s3://` location,
/// so purely local use never touches AWS configuration.
async fn store_factory(config: &ClawlessConfig) -> StoreFactory {
    let skills = &config.skills;
    let mut locations = skills
        .bundled
        .iter()
        .chain(&skills.managed)
        .chain(&skills.extra)
        .chain(&config.agents.defaults.workspace)
        .chain(
            config
                .agents
                .list
                .iter()
                .filter_map(|agent| agent.workspace.as_ref()),
        );
    if locations.any(|location| location.trim().starts_with("s3://")) {
        StoreFactory::with_s3_client(crate::aws_env::s3_client_from_env().await)
    } else {
        StoreFactory::new(|| unreachable!("no s3:// location is configured in local mode"))
    }
}
