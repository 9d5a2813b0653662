//! `clawless node run`: the node host's loop. It takes signed jobs from its queue, checks
//! them (signature, addressee, deadline, journal), applies this machine's own exec policy,
//! runs what the policy (or a person's grant) allows, and reports a signed result.
//!
//! Jobs come from the node's own SQS queue, read directly with credentials the backend vends
//! ([`crate::sqs_jobs`]), when pairing named an `http(s)://` queue URL (AWS); otherwise (local
//! mode) from the backend over HTTP. Everything else (heartbeats, reports) is HTTP either way.
//!
//! Delivery is at least once; the journal makes each job attempt run at most once. A message
//! is acknowledged only after its report was accepted, so a lost report is re-sent from the
//! journal on redelivery, and a job that was running when the node died is reported as
//! interrupted instead of running again. On SQS a job is held under a short lease that the
//! worker extends while it handles the job, so what a dead node held comes back soon.
//!
//! Background work (spec §4): an exec job with `yieldMs` (or `background`) starts its command
//! in the [`ProcessTable`] and waits at most that long; a command still running then is
//! reported `running` with its session id and goes on without holding the worker. `process`
//! jobs act on those sessions ([`crate::process_actions`]). A third loop, next to the job and
//! heartbeat loops, watches the sessions and posts each ended one's [`ProcessExit`] until
//! the backend accepts it (the exit is on disk until then, so a restart resends it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clawless_exec::node::record::NodeFacts;
use clawless_exec::node::wire::{
    Envelope, ExecDenial, ExecJob, ExecOutcome, ExecReport, NodeMessage, NodeResult, ProcessExit,
    ProcessJob, ProcessReport, RunningProcess, clamp_yield_ms, secret_hash, signing_key,
};
use clawless_exec::{AllowlistEntry, Platform, SkillBin};
use tokio::sync::{Mutex, watch};

use crate::approvals_file::ApprovalsFile;
use crate::client::{BackendClient, ClientError, JobDelivery};
use crate::exec_report::{ReportContext, exec_report};
use crate::jail::Jail;
use crate::journal::{Journal, JournalError, JournalState};
use crate::outbound_media::{CollectedMedia, MediaPlace, collect_media};
use crate::policy::{Decision, JobContext, decide};
use crate::process_actions::run_process_job;
use crate::process_table::{ProcessTable, StartRequest};
use crate::runner::{RunSpec, child_environment, run_command};
use crate::skill_bins::{SKILL_BINS_TTL, SkillBinsCache};
use crate::sqs_jobs::SqsJobs;
use crate::state::{NodeConfig, StateDir};
use clawless_base::clock::{Clock, SystemClock};
use clawless_base::media_lines::mentions_media;

/// How long one poll waits for a job (SQS's longest long poll).
pub const POLL_WAIT: Duration = Duration::from_secs(20);
/// How often the node reports its facts (the backend calls it offline after two misses).
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);
/// How often the node looks at its background sessions and posts their exits.
pub const PROCESS_TICK: Duration = Duration::from_millis(500);
/// The longest pause between two attempts to post an exit the backend did not accept.
const EXIT_RETRY_MAX: Duration = Duration::from_secs(30);
/// How often a yielding exec looks whether its command ended.
const YIELD_CHECK: Duration = Duration::from_millis(20);
/// The answer to a `process` job that was being carried out when the node stopped.
pub const PROCESS_INTERRUPTED_TEXT: &str =
    "interrupted: the node host stopped while carrying out this process action";

/// The error of a job that was running when the node stopped.
pub const INTERRUPTED_TEXT: &str =
    "interrupted: the node host stopped while the command was running; it was not run again";

/// Why the worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The journal is unusable: nothing may run without it.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The backend refused this node (revoked): stop.
    #[error(transparent)]
    Backend(#[from] ClientError),
    /// The state directory is unusable.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
}

type BinsFetch = Box<
    dyn Fn() -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Vec<String>, ClientError>> + Send>,
        > + Send
        + Sync,
>;

/// Where jobs come from.
#[derive(Debug)]
enum JobSource {
    /// The backend's `GET /nodes/jobs` and `POST /nodes/jobs/ack` (local mode).
    Backend,
    /// The node's own SQS queue (AWS).
    Sqs(SqsJobs),
}

impl JobSource {
    /// SQS when pairing named a queue URL, the backend otherwise (a local queue name, or a
    /// `node.json` written before queues were stored).
    fn for_config(config: &NodeConfig, client: &BackendClient) -> Self {
        match config.queue.as_deref() {
            Some(queue) if queue.starts_with("https://") || queue.starts_with("http://") => {
                Self::Sqs(SqsJobs::new(client.clone()))
            }
            _ => Self::Backend,
        }
    }
}

/// The node host worker.
pub struct NodeWorker {
    config: NodeConfig,
    client: BackendClient,
    source: JobSource,
    journal: Journal,
    approvals_path: PathBuf,
    key: Vec<u8>,
    granted: Mutex<Vec<(String, AllowlistEntry)>>,
    bins: SkillBinsCache<BinsFetch>,
    path_env: String,
    home: String,
    platform: Platform,
    clock: Arc<dyn Clock>,
    base_env: BTreeMap<String, String>,
    heartbeat_interval: Duration,
    /// The jail sandbox jobs run in; `None` refuses them.
    jail: Option<Jail>,
    /// The background process sessions (spec §4.3).
    processes: ProcessTable,
}

/// Set to `off` to start a node host without a jail (it then refuses every sandbox job).
pub const JAIL_ENV: &str = "CLAWLESS_NODE_JAIL";

/// The refusal of a sandbox job by a node without a working jail.
pub const NO_JAIL_TEXT: &str = "SYSTEM_RUN_DENIED: this node host has no working jail \
     (bubblewrap) for a sandboxed session's command, and never runs one on the bare host";

impl std::fmt::Debug for NodeWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeWorker")
            .field("node_id", &self.config.node_id)
            .field("url", &self.config.url)
            .finish_non_exhaustive()
    }
}

/// What became of one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Refused without running (bad signature, wrong node, expired); acknowledge it.
    Refused(String),
    /// A policy update was applied (or was a replay); acknowledge it.
    PolicyApplied,
    /// A report was sent for this job attempt; acknowledge it.
    Reported(Box<ExecReport>),
    /// A `process` job was answered; acknowledge it.
    ProcessAnswered(Box<ProcessReport>),
}

impl NodeWorker {
    /// A worker for the node paired in `state`.
    pub fn open(state: &StateDir) -> Result<Self, WorkerError> {
        state.ensure()?;
        let config = state.load_config()?;
        let client = BackendClient::for_node(&config)?;
        let journal = Journal::open(&state.journal_path())?;
        let bins_client = client.clone();
        let fetch: BinsFetch = Box::new(move || {
            let client = bins_client.clone();
            Box::pin(async move { client.skills_bins().await })
        });
        let jail = match std::env::var(JAIL_ENV).as_deref() {
            Ok("off") => None,
            _ => match Jail::probe(&state.sandboxes_path()) {
                Ok(jail) => Some(jail),
                Err(err) => {
                    tracing::warn!(error = %err, "no jail: sandboxed sessions' commands will be refused");
                    None
                }
            },
        };
        let processes = ProcessTable::open(&state.path().join("processes"), &config.node_id)
            .map_err(|err| crate::state::StateError::Write {
                path: state.path().join("processes"),
                source: err,
            })?;
        let path_env = std::env::var("PATH").unwrap_or_else(|_| {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned()
        });
        Ok(Self {
            key: signing_key(&secret_hash(&config.secret)),
            bins: SkillBinsCache::new(fetch, path_env.clone()),
            source: JobSource::for_config(&config, &client),
            config,
            client,
            journal,
            approvals_path: state.approvals_path(),
            granted: Mutex::new(Vec::new()),
            path_env,
            home: std::env::var("HOME").unwrap_or_else(|_| "/".to_owned()),
            platform: Platform::current(),
            clock: Arc::new(SystemClock),
            base_env: std::env::vars().collect(),
            heartbeat_interval: HEARTBEAT_INTERVAL,
            jail,
            processes,
        })
    }

    /// Keeps finished background sessions `cleanup_ms` (clamped to 1 min…3 h) instead of
    /// 30 minutes.
    pub fn with_process_cleanup_ms(mut self, cleanup_ms: u64) -> Self {
        self.processes = self.processes.with_cleanup_ms(cleanup_ms);
        self
    }

    /// The background process sessions.
    pub fn processes(&self) -> &ProcessTable {
        &self.processes
    }

    /// Holds jobs taken from SQS under leases of `lease` instead of
    /// [`crate::sqs_jobs::JOB_LEASE`] (no effect on jobs polled from the backend).
    pub fn with_job_lease(mut self, lease: Duration) -> Self {
        if let JobSource::Sqs(jobs) = self.source {
            self.source = JobSource::Sqs(jobs.with_lease(lease));
        }
        self
    }

    /// Heartbeats every `interval` instead of [`HEARTBEAT_INTERVAL`].
    pub fn with_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval.max(Duration::from_secs(1));
        self
    }

    /// The node's id.
    pub fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// Whether jobs come straight from the node's SQS queue (else from the backend over HTTP).
    pub fn reads_sqs(&self) -> bool {
        matches!(self.source, JobSource::Sqs(_))
    }

    /// Waits up to `wait` for jobs from this node's job source.
    async fn receive(&self, wait: Duration) -> Result<Vec<JobDelivery>, ClientError> {
        match &self.source {
            JobSource::Backend => self.client.poll_jobs(wait).await,
            JobSource::Sqs(jobs) => jobs.receive(wait).await,
        }
    }

    /// Removes a handled job from this node's job source.
    async fn ack(&self, receipt: &str) -> Result<(), ClientError> {
        match &self.source {
            JobSource::Backend => self.client.ack_job(receipt).await,
            JobSource::Sqs(jobs) => jobs.ack(receipt).await,
        }
    }

    /// What this node reports at heartbeats: [`facts_of`] plus its exec report (none when
    /// the approvals file cannot be used; jobs are refused then anyway).
    pub async fn facts(&self) -> NodeFacts {
        let skill_bins = self.bins.current(false).await;
        let exec = match ApprovalsFile::load(&self.approvals_path) {
            Ok(file) => {
                let granted = self.granted.lock().await.clone();
                exec_report(
                    &file,
                    &ReportContext {
                        platform: self.platform,
                        path_env: &self.path_env,
                        home: &self.home,
                        granted: &granted,
                        skill_bins: &skill_bins,
                    },
                )
            }
            Err(err) => {
                tracing::warn!(error = %err, "no exec report: the approvals file is unusable");
                None
            }
        };
        let exec = exec.map(|mut report| {
            report.sandbox_backends = self.jail.iter().flat_map(Jail::backends).collect();
            report
        });
        NodeFacts {
            exec,
            ..facts_of(&self.path_env, skill_bins, self.config.display_name.clone())
        }
    }

    /// Reports facts and takes the granted entries the backend holds for this node.
    pub async fn heartbeat(&self) -> Result<(), ClientError> {
        let answer = self.client.heartbeat(&self.facts().await).await?;
        let now = self.clock.now_ms();
        let mut granted = Vec::new();
        for envelope in &answer.granted {
            match NodeMessage::open_for_node(envelope, &self.key, &self.config.node_id, now) {
                Ok(NodeMessage::PolicyUpdate(update)) => {
                    granted.push((update.agent_id, update.entry))
                }
                Ok(NodeMessage::Job(_) | NodeMessage::Process(_)) => {
                    tracing::warn!("a job in a heartbeat answer; ignored")
                }
                Err(err) => tracing::warn!(error = %err, "refused a granted entry"),
            }
        }
        *self.granted.lock().await = granted;
        Ok(())
    }

    /// Polls and handles jobs until `shutdown` turns true, heartbeating all along. A job that
    /// is running when it does is finished and reported first.
    ///
    /// Heartbeats have their own loop, so they go on while a command runs: a node busy with a
    /// command longer than the backend's offline threshold (two heartbeat intervals) is not
    /// taken for offline, and new jobs are not refused meanwhile.
    pub async fn run(&self, shutdown: watch::Receiver<bool>) -> Result<(), WorkerError> {
        self.recover().await?;
        // The job loop stops when the heartbeat loop does: on `shutdown`, or when the backend
        // refuses the node (revoked; a node reading SQS would otherwise go on with the
        // credentials it holds).
        let (stop_jobs, jobs_stopped) = watch::channel(false);
        let jobs = self.job_loop(jobs_stopped);
        tokio::pin!(jobs);
        let side_loops = async {
            tokio::try_join!(
                self.heartbeat_loop(shutdown.clone()),
                self.process_loop(shutdown)
            )
            .map(|_| ())
        };
        tokio::select! {
            finished = &mut jobs => finished,
            stopped = side_loops => {
                // A running job is finished and reported first.
                let _ = stop_jobs.send(true);
                let finished = jobs.await;
                stopped.and(finished)
            }
        }
    }

    /// Heartbeats every interval until `shutdown` turns true or the backend refuses the node.
    async fn heartbeat_loop(&self, mut shutdown: watch::Receiver<bool>) -> Result<(), WorkerError> {
        loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            let beat = tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                beat = self.heartbeat() => beat,
            };
            match beat {
                Ok(()) => {}
                Err(ClientError::Unauthorized) => return Err(ClientError::Unauthorized.into()),
                Err(err) => tracing::warn!(error = %err, "heartbeat failed; retrying"),
            }
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                () = tokio::time::sleep(self.heartbeat_interval) => {}
            }
        }
    }

    /// Watches the background sessions and posts their exits until `shutdown` turns true or
    /// the backend refuses the node.
    async fn process_loop(&self, mut shutdown: watch::Receiver<bool>) -> Result<(), WorkerError> {
        let mut pause = PROCESS_TICK;
        loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            pause = match self.tick_processes().await {
                Ok(_) => PROCESS_TICK,
                Err(ClientError::Unauthorized) => return Err(ClientError::Unauthorized.into()),
                Err(err) => {
                    tracing::warn!(error = %err, "could not post a background command's exit; retrying");
                    (pause * 2).min(EXIT_RETRY_MAX)
                }
            };
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One look at the background sessions: notes the ended ones, sweeps the expired ones and
    /// posts every exit the backend has not accepted yet. Answers how many it posted.
    pub async fn tick_processes(&self) -> Result<usize, ClientError> {
        let now = self.clock.now_ms();
        self.processes.refresh(now);
        self.processes.sweep(now);
        let mut posted = 0;
        for exit in self.processes.unacknowledged_exits() {
            self.post_exit(&exit).await?;
            self.processes.acknowledge_exit(&exit.session_id);
            posted += 1;
        }
        Ok(posted)
    }

    async fn post_exit(&self, exit: &ProcessExit) -> Result<(), ClientError> {
        let envelope = Envelope::seal(&NodeResult::Exit(exit.clone()), &self.key)
            .map_err(|err| ClientError::Unreachable(err.to_string()))?;
        self.client.report(&envelope).await
    }

    /// Polls and handles jobs until `shutdown` turns true.
    async fn job_loop(&self, mut shutdown: watch::Receiver<bool>) -> Result<(), WorkerError> {
        loop {
            if *shutdown.borrow() {
                return Ok(());
            }
            let polled = tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                polled = self.receive(POLL_WAIT) => polled,
            };
            let deliveries = match polled {
                Ok(deliveries) => deliveries,
                Err(ClientError::Unauthorized) => return Err(ClientError::Unauthorized.into()),
                Err(err) => {
                    tracing::warn!(error = %err, "polling jobs failed; retrying");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    continue;
                }
            };
            for delivery in deliveries {
                match self.handle_leased(&delivery).await {
                    Ok(handled) => {
                        if let Handled::Refused(reason) = &handled {
                            tracing::warn!(%reason, "job refused and deleted without running");
                        }
                        if let Err(err) = self.ack(&delivery.receipt).await {
                            tracing::warn!(error = %err, "ack failed; the job will come back and be answered from the journal");
                        }
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "job not finished; it will be redelivered");
                    }
                }
            }
        }
    }

    /// [`Self::handle`], extending the job's lease on SQS meanwhile, so a job is never handed
    /// out again while it runs, however long that is.
    async fn handle_leased(&self, delivery: &JobDelivery) -> Result<Handled, WorkerError> {
        let JobSource::Sqs(jobs) = &self.source else {
            return self.handle(&delivery.body).await;
        };
        tokio::select! {
            handled = self.handle(&delivery.body) => handled,
            never = keep_leased(jobs, &delivery.receipt) => match never {},
        }
    }

    /// After a restart: a job that was running when the node stopped is reported as
    /// interrupted (never run again), and results that were never accepted are sent again.
    pub async fn recover(&self) -> Result<(), WorkerError> {
        let now = self.clock.now_ms();
        for key in self.journal.started()? {
            let Some((job_id, attempt)) = key
                .rsplit_once('#')
                .and_then(|(id, attempt)| Some((id.to_owned(), attempt.parse::<u32>().ok()?)))
            else {
                continue;
            };
            let report = ExecReport {
                job_id,
                attempt,
                node_id: self.config.node_id.clone(),
                outcome: ExecOutcome {
                    error: Some(INTERRUPTED_TEXT.to_owned()),
                    ..ExecOutcome::default()
                },
                denial: None,
                interrupted: true,
                duration_ms: 0,
                allow_always_entries: Vec::new(),
                files: Vec::new(),
                refused_files: Vec::new(),
                nonce: format!("{key}-recovered-{now}"),
                sent_at_ms: now,
                running: None,
            };
            self.journal.finish(&key, &to_json(&report), now)?;
        }
        for (key, result) in self.journal.unreported()? {
            let Ok(report) = serde_json::from_str::<ExecReport>(&result) else {
                continue;
            };
            let envelope = Envelope::seal(&report, &self.key)
                .map_err(|err| ClientError::Unreachable(err.to_string()))?;
            match self.client.report(&envelope).await {
                Ok(()) => self.journal.mark_reported(&key)?,
                Err(ClientError::Unauthorized) => return Err(ClientError::Unauthorized.into()),
                Err(err) => {
                    tracing::warn!(error = %err, job = %key, "could not re-send a result; will retry on redelivery")
                }
            }
        }
        Ok(())
    }

    /// Handles one queue message. `Err` leaves it on the queue (it comes back).
    pub async fn handle(&self, body: &str) -> Result<Handled, WorkerError> {
        let now = self.clock.now_ms();
        let envelope = match Envelope::parse(body) {
            Ok(envelope) => envelope,
            Err(err) => return Ok(Handled::Refused(err.to_string())),
        };
        let message =
            match NodeMessage::open_for_node(&envelope, &self.key, &self.config.node_id, now) {
                Ok(message) => message,
                Err(err) => return Ok(Handled::Refused(err.to_string())),
            };
        let job = match message {
            NodeMessage::PolicyUpdate(update) => {
                if self
                    .journal
                    .remember_nonce(&update.nonce, update.expires_at_ms, now)?
                {
                    let mut granted = self.granted.lock().await;
                    let pair = (update.agent_id, update.entry);
                    if !granted.contains(&pair) {
                        granted.push(pair);
                    }
                }
                return Ok(Handled::PolicyApplied);
            }
            NodeMessage::Process(job) => return self.handle_process(&job, now).await,
            NodeMessage::Job(job) => job,
        };
        let journal_key = job.journal_key();
        let report = match self.journal.begin(&journal_key, now)? {
            JournalState::Finished { result } => match serde_json::from_str(&result) {
                Ok(report) => report,
                Err(err) => {
                    return Ok(Handled::Refused(format!("unreadable journal entry: {err}")));
                }
            },
            JournalState::Started { .. } => {
                let report = self.report_for(
                    &job,
                    ExecOutcome {
                        error: Some(INTERRUPTED_TEXT.to_owned()),
                        ..ExecOutcome::default()
                    },
                    None,
                    true,
                    Vec::new(),
                    0,
                );
                self.journal.finish(&journal_key, &to_json(&report), now)?;
                report
            }
            JournalState::New => {
                let report = self.execute(&job).await;
                self.journal
                    .finish(&journal_key, &to_json(&report), self.clock.now_ms())?;
                report
            }
        };
        let envelope = Envelope::seal(&report, &self.key)
            .map_err(|err| ClientError::Unreachable(err.to_string()))?;
        self.client.report(&envelope).await?;
        self.journal.mark_reported(&journal_key)?;
        Ok(Handled::Reported(Box::new(report)))
    }

    /// Carries out a `process` job once (journaled like exec jobs: a redelivery is answered
    /// from the journal, never acted on twice) and posts the answer.
    async fn handle_process(&self, job: &ProcessJob, now: u64) -> Result<Handled, WorkerError> {
        let journal_key = format!("process:{}", job.job_id);
        let report = match self.journal.begin(&journal_key, now)? {
            JournalState::Finished { result } => match serde_json::from_str(&result) {
                Ok(report) => report,
                Err(err) => {
                    return Ok(Handled::Refused(format!("unreadable journal entry: {err}")));
                }
            },
            JournalState::Started { .. } => {
                let report = ProcessReport {
                    job_id: job.job_id.clone(),
                    node_id: self.config.node_id.clone(),
                    ok: false,
                    text: PROCESS_INTERRUPTED_TEXT.to_owned(),
                    details: serde_json::json!({"status": "failed"}),
                };
                self.journal.finish(&journal_key, &json_of(&report), now)?;
                report
            }
            JournalState::New => {
                let report = run_process_job(
                    &self.processes,
                    job,
                    &self.config.node_id,
                    self.clock.as_ref(),
                )
                .await;
                self.journal
                    .finish(&journal_key, &json_of(&report), self.clock.now_ms())?;
                report
            }
        };
        let envelope = Envelope::seal(&NodeResult::Process(report.clone()), &self.key)
            .map_err(|err| ClientError::Unreachable(err.to_string()))?;
        self.client.report(&envelope).await?;
        self.journal.mark_reported(&journal_key)?;
        Ok(Handled::ProcessAnswered(Box::new(report)))
    }

    /// Runs an allowed job that may be backgrounded (`yieldMs`/`background`): its command
    /// starts in the process table; when it ends within the yield it is reported like a
    /// foreground run (and forgotten), else it is reported `running` and goes on.
    async fn run_yielding(
        &self, job: &ExecJob, spec: RunSpec, place: MediaPlace,
        allow_always_entries: Vec<AllowlistEntry>,
    ) -> ExecReport {
        let yield_ms = clamp_yield_ms(job.yield_ms.unwrap_or(0));
        let started = std::time::Instant::now();
        let request = StartRequest {
            argv: spec.argv,
            env: spec.env,
            cwd: spec.cwd,
            cwd_label: job.cwd.clone(),
            timeout_ms: Some(job.timeout_ms),
            agent_id: job.agent_id.clone(),
            session_key: job.session_key.clone(),
            exec_job_id: job.job_id.clone(),
            command: job.raw_command.clone(),
            // A sandboxed command never gets a terminal (spec §4.1).
            pty: job.pty && job.sandbox.is_none(),
        };
        let session_id = match self.processes.start(request, self.clock.now_ms()) {
            Ok(session_id) => session_id,
            Err(err) => {
                let outcome = ExecOutcome {
                    error: Some(err.to_string()),
                    ..ExecOutcome::default()
                };
                return self.report_for(job, outcome, None, false, Vec::new(), 0);
            }
        };
        let until = self.clock.now_ms().saturating_add(yield_ms);
        // `background: true` (yield 0) answers `running` at once, however quick the command.
        let ended = loop {
            if yield_ms == 0 {
                break None;
            }
            self.processes.refresh(self.clock.now_ms());
            let ended = self
                .processes
                .get(&job.session_key, &session_id)
                .and_then(|meta| meta.ended);
            let now = self.clock.now_ms();
            if ended.is_some() || now >= until {
                break ended;
            }
            tokio::time::sleep(YIELD_CHECK.min(Duration::from_millis(until - now))).await;
        };
        let duration_ms = millis(started.elapsed());
        let (output, truncated) = self.processes.aggregated(&session_id);
        let mut stdout = output;
        if truncated {
            stdout.insert_str(0, "... (truncated)\n");
        }
        match ended {
            Some(ended) => {
                // Finished within the yield: a foreground run, which leaves no session.
                self.processes.remove(&session_id);
                let outcome = ExecOutcome {
                    exit_code: ended.exit_code,
                    timed_out: ended.timed_out,
                    success: ended.success() && !ended.timed_out,
                    stdout,
                    stderr: String::new(),
                    error: None,
                };
                let media = self.outbound_media(&outcome, place).await;
                let mut report =
                    self.report_for(job, outcome, None, false, allow_always_entries, duration_ms);
                report.files = media.files;
                report.refused_files = media.refused;
                report
            }
            None => {
                let meta = self.processes.mark_backgrounded(&session_id);
                let outcome = ExecOutcome {
                    stdout,
                    ..ExecOutcome::default()
                };
                let mut report =
                    self.report_for(job, outcome, None, false, allow_always_entries, duration_ms);
                report.running = Some(RunningProcess {
                    session_id: session_id.clone(),
                    pid: meta.as_ref().and_then(|meta| meta.pid),
                    started_at_ms: meta
                        .as_ref()
                        .map_or_else(|| self.clock.now_ms(), |meta| meta.started_at_ms),
                    cwd: job.cwd.clone(),
                    tail: self.processes.tail(&session_id),
                });
                report
            }
        }
    }

    /// Decides and (when allowed) runs one job: a sandbox job only in the jail.
    async fn execute(&self, job: &ExecJob) -> ExecReport {
        if job.sandbox.is_some() && self.jail.is_none() {
            return self.denied(job, sandbox_denial(NO_JAIL_TEXT.to_owned()));
        }
        let approvals = match ApprovalsFile::load(&self.approvals_path) {
            Ok(file) => file.resolve(&job.agent_id, &self.granted.lock().await),
            Err(err) => {
                let denial = ExecDenial {
                    reason: "approvals-file-invalid".to_owned(),
                    message: format!("SYSTEM_RUN_DENIED: {err}"),
                    approval_required: false,
                    allowed_decisions: Vec::new(),
                };
                return self.denied(job, denial);
            }
        };
        let skill_bins: Vec<SkillBin> = if approvals.auto_allow_skills {
            self.bins.current(false).await
        } else {
            Vec::new()
        };
        let context = JobContext {
            platform: self.platform,
            path_env: &self.path_env,
            home: &self.home,
            approvals: &approvals,
            skill_bins: &skill_bins,
        };
        match decide(job, &context, &crate::local_fs::LocalFs) {
            Decision::Deny(denial) => self.denied(job, denial),
            Decision::Run {
                argv,
                env,
                allow_always_entries,
            } => {
                let timeout = Duration::from_millis(job.timeout_ms);
                let (spec, place) = match (&job.sandbox, &self.jail) {
                    (Some(sandbox), Some(jail)) => {
                        let built = jail
                            .run_spec(sandbox, &argv, &env, job.cwd.as_deref(), timeout)
                            .and_then(|spec| Ok((spec, jail.workspace(sandbox)?)));
                        match built {
                            Ok((spec, workspace)) => {
                                (spec, MediaPlace::jail(workspace, job.cwd.as_deref()))
                            }
                            Err(err) => {
                                let text = format!("SYSTEM_RUN_DENIED: {err}");
                                return self.denied(job, sandbox_denial(text));
                            }
                        }
                    }
                    (Some(_), None) => {
                        return self.denied(job, sandbox_denial(NO_JAIL_TEXT.to_owned()));
                    }
                    (None, _) => {
                        let mut spec =
                            RunSpec::new(argv, child_environment(&self.base_env, &env), timeout);
                        spec.cwd = job.cwd.as_ref().map(PathBuf::from);
                        (spec, MediaPlace::host(job.cwd.as_deref()))
                    }
                };
                if job.yield_ms.is_some() {
                    return self
                        .run_yielding(job, spec, place, allow_always_entries)
                        .await;
                }
                let (_stop_tx, stop_rx) = watch::channel(false);
                let outcome = run_command(&spec, stop_rx).await;
                let duration_ms = millis(outcome.duration);
                let outcome = ExecOutcome {
                    exit_code: outcome.exit_code,
                    timed_out: outcome.timed_out,
                    success: outcome.success,
                    stdout: outcome.stdout,
                    stderr: outcome.stderr,
                    error: outcome.error,
                };
                let media = self.outbound_media(&outcome, place).await;
                let mut report =
                    self.report_for(job, outcome, None, false, allow_always_entries, duration_ms);
                report.files = media.files;
                report.refused_files = media.refused;
                report
            }
        }
    }

    /// The files a finished command named on `MEDIA:` lines of its output (none for a command
    /// that failed: its result carries no attachments).
    async fn outbound_media(&self, outcome: &ExecOutcome, place: MediaPlace) -> CollectedMedia {
        if !outcome.success || !mentions_media(&outcome.stdout) {
            return CollectedMedia::default();
        }
        let stdout = outcome.stdout.clone();
        // The node host's own state (its secret, journal, approvals) never leaves.
        let excluded: Vec<PathBuf> = self
            .approvals_path
            .parent()
            .map(Path::to_path_buf)
            .into_iter()
            .collect();
        match tokio::task::spawn_blocking(move || collect_media(&stdout, &place, &excluded)).await {
            Ok(collected) => collected,
            Err(err) => {
                tracing::warn!(error = %err, "reading the command's MEDIA files failed");
                CollectedMedia::default()
            }
        }
    }

    fn denied(&self, job: &ExecJob, denial: ExecDenial) -> ExecReport {
        let outcome = ExecOutcome {
            error: Some(denial.message.clone()),
            ..ExecOutcome::default()
        };
        self.report_for(job, outcome, Some(denial), false, Vec::new(), 0)
    }

    fn report_for(
        &self, job: &ExecJob, outcome: ExecOutcome, denial: Option<ExecDenial>, interrupted: bool,
        allow_always_entries: Vec<AllowlistEntry>, duration_ms: u64,
    ) -> ExecReport {
        let now = self.clock.now_ms();
        ExecReport {
            job_id: job.job_id.clone(),
            attempt: job.attempt,
            node_id: self.config.node_id.clone(),
            outcome,
            denial,
            interrupted,
            duration_ms,
            allow_always_entries,
            files: Vec::new(),
            refused_files: Vec::new(),
            nonce: format!("{}-{now}", job.journal_key()),
            sent_at_ms: now,
            running: None,
        }
    }
}

/// The refusal of a sandbox job this node cannot jail.
fn sandbox_denial(message: String) -> ExecDenial {
    ExecDenial {
        reason: "sandbox-unavailable".to_owned(),
        message,
        approval_required: false,
        allowed_decisions: Vec::new(),
    }
}

/// Extends a job's lease every third of it, for as long as it is polled.
async fn keep_leased(jobs: &SqsJobs, receipt: &str) -> std::convert::Infallible {
    loop {
        tokio::time::sleep(jobs.lease() / 3).await;
        if let Err(err) = jobs.extend(receipt).await {
            tracing::warn!(error = %err, "could not extend a running job's lease; if it lapses, the job comes back and is answered from the journal");
        }
    }
}

/// The facts a node reports at pairing: platform, PATH and resolved skill bins (the exec
/// report follows with the first heartbeat).
pub fn facts_of(
    path_env: &str, skill_bins: Vec<SkillBin>, display_name: Option<String>,
) -> NodeFacts {
    NodeFacts {
        platform: std::env::consts::OS.to_owned(),
        path: path_env
            .split(':')
            .filter(|dir| !dir.is_empty())
            .map(str::to_owned)
            .collect(),
        skill_bins,
        display_name,
        exec: None,
    }
}

/// Refresh period of the skill bins (spec §6).
pub const BINS_TTL: Duration = SKILL_BINS_TTL;

fn to_json(report: &ExecReport) -> String {
    json_of(report)
}

fn json_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
