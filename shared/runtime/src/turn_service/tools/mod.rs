//! Every tool the model can call, behind one trait: the core's built-ins (`read`, `write`,
//! `edit`, `web_fetch`, `session_status`, `memory_*`) and the runtime's own (`exec` on a node
//! host, `cron`, `sessions_*`, `agents_list`, `subagents`).
//!
//! Each tool is a struct owning only what it needs (the cron store, the turn queue, the
//! session store, the node registry…). [`registry`] builds them once per [`TurnService`]
//! from the service's ports, so a tool the deployment cannot run is never registered. The
//! turn routes a call by name through the [`ToolRegistry`] and nothing else: which tools a
//! session is offered is the registry's candidates narrowed by the tool policy.
//!
//! Adding a tool: a file here with a struct implementing [`RuntimeTool`], and one
//! `registry.register(…)` line in [`registry`] (see `docs/architecture.md`).
//!
//! [`TurnService`]: super::TurnService

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::ToolSpec;
use clawless_base::transcript::ToolCall;
use clawless_core::tools::{Tool, ToolContext, ToolOutput};
use clawless_core::turn::ToolRouting;
use clawless_core::turn::events::ApprovalDecision;
use clawless_core::turn::state::SessionState;

use super::{TurnError, TurnService};

pub(super) mod context;
mod core_tool;
mod cron;
mod deferred;
pub(super) mod elevated;
mod exec;
mod image;
mod message;
pub(super) mod model;
mod process;
mod sessions;
mod sessions_send;
mod spawn;
mod subagents;
mod web_search;

use sessions::SessionDirectory;

/// Where a tool's call runs, as the turn engine routes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In this process, its result recorded at once.
    InProcess,
    /// In this process, but its answer may come later as a `ToolResult` event (the call
    /// stays pending meanwhile, like a node's job): `sessions_send`.
    Awaited,
    /// On a node host; its result comes back as a `ToolResult` event. Not counted among
    /// the tools run in-process.
    OnNode,
}

impl Placement {
    /// True when the engine routes the call as a pending job (`Effect::SendToNode`).
    fn is_remote(self) -> bool {
        !matches!(self, Self::InProcess)
    }
}

/// What an event knows before it offers tools: whether a node host is active.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolScope {
    /// A paired node is active, so `exec` can run.
    pub exec_ready: bool,
}

/// The job of a call routed as pending (see [`Placement`]).
#[derive(Debug, Clone)]
pub(crate) struct PendingJob<'a> {
    /// The idempotent job id the engine gave the call.
    pub job_id: &'a str,
    /// The person's decision, when the call was approved in the chat.
    pub approved: Option<ApprovalDecision>,
    /// Where the job runs (the session's sandbox and elevated level decide), or why it may
    /// not run at all.
    pub placement: Result<crate::nodes_service::JobPlacement, String>,
    /// The `process` tool is offered this turn, so `exec` may background (spec §4.1).
    pub background_allowed: bool,
}

/// One call, with what the tool may read or change of its turn.
pub(crate) struct ToolCallContext<'a> {
    /// The call as the model made it.
    pub call: &'a ToolCall,
    /// The calling session; tools that record children (`sessions_spawn`, `subagents`)
    /// change its meta, which the turn commits with the result.
    pub state: &'a mut SessionState,
    /// The session key as the event named it.
    pub session_key: &'a str,
    /// The agent whose turn this is (as configured).
    pub agent_id: &'a str,
    /// The workspace, skills and session facts the core's tools read (for calls run
    /// in-process; a pending job's call is sent before the turn's context is built).
    pub tool_context: Option<&'a ToolContext>,
    /// The turn's prompt context (for `/context`), with calls run in-process.
    pub prompt: Option<&'a super::TurnContext>,
    /// The job, for calls routed as pending.
    pub job: Option<PendingJob<'a>>,
}

/// How a call came out.
#[derive(Debug)]
pub(crate) enum ToolOutcome {
    /// The result, recorded now.
    Done(ToolOutput),
    /// Sent; the result comes later as an event (the turn marks the job dispatched).
    Pending,
}

/// A tool the model can call, run by the turn service.
#[async_trait]
pub(crate) trait RuntimeTool: Send + Sync {
    /// Name, description and argument schema, as offered to the model. The name is the
    /// tool's key in the registry.
    fn spec(&self) -> ToolSpec;

    /// Where the call runs.
    fn placement(&self) -> Placement {
        Placement::InProcess
    }

    /// Whether this event may offer the tool at all, before the tool policy narrows it.
    fn available(&self, _scope: ToolScope) -> bool {
        true
    }

    /// True for a tool only a person's slash command runs: never offered to the model.
    fn command_only(&self) -> bool {
        false
    }

    /// True for a tool a turn rarely needs, offered in short form until the session has
    /// called it once (see the `deferred` module).
    fn deferred(&self) -> bool {
        false
    }

    /// Runs one call. `Err` is a failure of the turn's storage worth a redelivery; a refusal
    /// the model should read is an error [`ToolOutput`].
    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError>;
}

/// The tools of one service, by name (in name order, so the list sent to providers is the
/// same in every process).
#[derive(Default)]
pub(crate) struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn RuntimeTool>>,
    /// Each tool's spec, built once: in full, and in short form for a deferred tool.
    specs: BTreeMap<String, OfferedSpecs>,
}

/// A tool's spec as offered, built once at registration.
struct OfferedSpecs {
    full: ToolSpec,
    /// The short form, for a deferred tool.
    short: Option<ToolSpec>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// Adds `tool` under its spec's name (replacing one of the same name).
    pub(crate) fn register(&mut self, tool: impl RuntimeTool + 'static) {
        let full = tool.spec();
        let short = tool.deferred().then(|| deferred::short_form(&full));
        let name = full.name.clone();
        self.specs
            .insert(name.clone(), OfferedSpecs { full, short });
        self.tools.insert(name, Arc::new(tool));
    }

    /// The names this event may offer, for the tool policy to narrow.
    pub(crate) fn candidates(&self, scope: ToolScope) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|(_, tool)| !tool.command_only() && tool.available(scope))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The names only a slash command runs.
    pub(crate) fn command_names(&self) -> impl Iterator<Item = String> + '_ {
        self.tools
            .iter()
            .filter(|(_, tool)| tool.command_only())
            .map(|(name, _)| name.clone())
    }

    /// The names whose calls the engine routes as pending jobs.
    pub(crate) fn remote_names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|(_, tool)| tool.placement().is_remote())
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The spec of tool `name` as a session offers it: a deferred tool the session has not
    /// `loaded` yet in short form, any other in full.
    pub(crate) fn offered_spec(
        &self, name: &str, loaded: &std::collections::BTreeSet<String>,
    ) -> Option<ToolSpec> {
        let specs = self.specs.get(name)?;
        Some(match &specs.short {
            Some(short) if !loaded.contains(name) => short.clone(),
            _ => specs.full.clone(),
        })
    }

    /// The full spec of tool `name`, when registered.
    fn full_spec(&self, name: &str) -> Option<&ToolSpec> {
        self.specs.get(name).map(|specs| &specs.full)
    }

    /// Tool `name` when it is registered and `routing` offers it this turn (a command-only
    /// tool: when `call` is a slash command's, which the engine alone makes).
    pub(crate) fn offered(
        &self, call: &ToolCall, routing: &ToolRouting,
    ) -> Option<Arc<dyn RuntimeTool>> {
        let name = call.name.as_str();
        let by_command = routing.commands.contains(name)
            && call
                .id
                .starts_with(clawless_core::turn::COMMAND_CALL_PREFIX);
        if !routing.offered.contains(name) && !by_command {
            return None;
        }
        self.tools.get(name).cloned()
    }

    /// A registry of core tools alone: the memory flush's narrowed `write` and `read`.
    pub(crate) fn of_core_tools(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        let mut registry = Self::default();
        for tool in tools {
            registry.register(core_tool::CoreTool::new(tool));
        }
        registry
    }

    /// Tool `name`, when registered (for a caller that offers every registered tool).
    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn RuntimeTool>> {
        self.tools.get(name).cloned()
    }

    /// True when `name` is registered.
    #[cfg(test)]
    fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }
}

/// The tools `service` can run, built from its ports (once per service): the core's
/// built-ins (`web_fetch` only with web access), `exec` with node hosts, `cron` with a cron
/// store, the sub-agent tools with the turn queue, and the session readers with the turn
/// queue or a session listing.
pub(super) fn registry(service: &TurnService) -> ToolRegistry {
    let deps = &service.deps;
    let mut registry = ToolRegistry::default();
    for tool in clawless_core::tools::builtin_tools() {
        if deps.web.is_some() || tool.spec().name != "web_fetch" {
            registry.register(core_tool::CoreTool::new(tool));
        }
    }
    if let Some(nodes) = &deps.nodes {
        registry.register(exec::ExecTool::new(Arc::clone(nodes)));
        if nodes.backgrounds() {
            registry.register(process::ProcessTool::new(Arc::clone(nodes)));
        }
    }
    registry.register(elevated::ElevatedCommand::new(Arc::clone(&deps.skills)));
    // `session_status` with `model`, over the core's, and the `/model` command.
    let switcher = model::ModelSwitcher::new(
        Arc::clone(&deps.skills),
        deps.model.model_ref(),
        service.model_factory.clone(),
        Arc::clone(&deps.clock),
    );
    registry.register(model::SessionStatusTool::new(switcher.clone()));
    registry.register(model::ModelCommandTool::new(switcher));
    registry.register(context::ContextCommand);
    web_search::register(&mut registry, service);
    image::register(&mut registry, service);
    if let Some(message) = message::MessageTool::new(
        Arc::clone(&deps.outbox),
        Arc::clone(&deps.sessions),
        service.config().tools.message.cross_context.clone(),
        service.config().memory.clone(),
        service.blobs.clone(),
    ) {
        registry.register(message);
    }
    if let Some(cron) = &service.cron {
        registry.register(cron::CronTool::new(Arc::clone(cron)));
    }
    let directory = Arc::new(SessionDirectory::of(service));
    if let Some(queue) = &service.subagent_queue {
        let timers = service.timers().cloned();
        registry.register(spawn::SpawnTool::new(service, Arc::clone(queue)));
        registry.register(subagents::SubagentsTool::new(service, Arc::clone(queue)));
        registry.register(sessions::AgentsListTool::new(Arc::clone(&directory)));
        registry.register(sessions::SessionsYieldTool);
        registry.register(sessions_send::SessionsSendTool::new(
            Arc::clone(&directory),
            Arc::clone(queue),
            timers,
        ));
    }
    if service.subagent_queue.is_some() || service.session_lister.is_some() {
        registry.register(sessions::SessionsListTool::new(Arc::clone(&directory)));
        registry.register(sessions::SessionsHistoryTool::new(directory));
    }
    registry
}

impl TurnService {
    /// Runs `call` through the registry: a tool not registered or not offered this turn
    /// answers "not available" (and, for a pending job, that no node host can run it).
    /// Tools run in-process count in the report and the service's counter.
    pub(super) async fn run_tool(
        &self, mut context: ToolCallContext<'_>, routing: &ToolRouting, tools_run: &mut u32,
    ) -> Result<ToolOutcome, TurnError> {
        let name = context.call.name.as_str();
        let Some(tool) = self.registry().offered(context.call, routing) else {
            let text = match context.job {
                Some(_) => format!("No node host is available to run {name}."),
                None => clawless_core::turn::tool_not_available(name),
            };
            return Ok(ToolOutcome::Done(ToolOutput::error(text)));
        };
        let by_command = context
            .call
            .id
            .starts_with(clawless_core::turn::COMMAND_CALL_PREFIX);
        if tool.deferred()
            && !by_command
            && !context.state.meta.loaded_tools.contains(name)
            && let Some(spec) = self.registry().full_spec(name)
        {
            // Called in short form: the full schema is offered from now on; arguments that
            // do not fit it get it back instead of a failed action.
            context.state.meta.loaded_tools.insert(spec.name.clone());
            context.state.touch_meta();
            if let Err(misfit) = deferred::fits_schema(&context.call.input, &spec.input_schema) {
                tracing::debug!(tool = %spec.name, %misfit, "deferred tool called without its schema");
                return Ok(ToolOutcome::Done(ToolOutput::ok(deferred::schema_reply(
                    spec,
                ))));
            }
        }
        if tool.placement() != Placement::OnNode {
            *tools_run += 1;
            self.tools_run
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if tool.placement() == Placement::InProcess {
            context.job = None;
        }
        tool.call(context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str, Placement);

    #[async_trait]
    impl RuntimeTool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.to_owned(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            }
        }
        fn placement(&self) -> Placement {
            self.1
        }
        fn available(&self, scope: ToolScope) -> bool {
            self.1 != Placement::OnNode || scope.exec_ready
        }
        async fn call(&self, _context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
            Ok(ToolOutcome::Pending)
        }
    }

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::default();
        registry.register(Named("read", Placement::InProcess));
        registry.register(Named("exec", Placement::OnNode));
        registry.register(Named("sessions_send", Placement::Awaited));
        registry
    }

    #[test]
    fn a_node_tool_is_a_candidate_only_while_a_node_is_active() {
        let registry = registry();
        assert_eq!(
            registry.candidates(ToolScope { exec_ready: false }),
            ["read", "sessions_send"]
        );
        assert_eq!(
            registry.candidates(ToolScope { exec_ready: true }),
            ["exec", "read", "sessions_send"]
        );
    }

    #[test]
    fn awaited_and_node_tools_are_routed_as_pending_jobs() {
        assert_eq!(registry().remote_names(), ["exec", "sessions_send"]);
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input: serde_json::json!({}),
        }
    }

    #[test]
    fn a_registered_tool_runs_only_when_the_turn_offers_it() {
        let registry = registry();
        assert!(registry.contains("read"));
        let routing = clawless_core::turn::prepare::tool_routing(["exec".to_owned()], &["exec"]);
        assert!(registry.offered(&call("t1", "exec"), &routing).is_some());
        assert!(registry.offered(&call("t2", "read"), &routing).is_none());
        assert!(registry.offered(&call("t3", "write"), &routing).is_none());
    }

    struct CommandOnly;

    #[async_trait]
    impl RuntimeTool for CommandOnly {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "elevated".to_owned(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            }
        }
        fn command_only(&self) -> bool {
            true
        }
        async fn call(&self, _context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
            Ok(ToolOutcome::Pending)
        }
    }

    #[test]
    fn a_command_only_tool_is_never_a_candidate_and_runs_only_for_a_command() {
        let mut registry = registry();
        registry.register(CommandOnly);
        for exec_ready in [false, true] {
            assert!(
                !registry
                    .candidates(ToolScope { exec_ready })
                    .contains(&"elevated")
            );
        }
        let mut routing = clawless_core::turn::prepare::tool_routing(["read".to_owned()], &[]);
        routing.commands = registry.command_names().collect();
        assert_eq!(routing.commands.len(), 1);
        let command_call = format!("{}7", clawless_core::turn::COMMAND_CALL_PREFIX);
        assert!(
            registry
                .offered(&call(&command_call, "elevated"), &routing)
                .is_some()
        );
        assert!(
            registry
                .offered(&call("toolu_1", "elevated"), &routing)
                .is_none()
        );
    }
}
