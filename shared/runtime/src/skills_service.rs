//! The skills of a deployment: per-agent sources from the config, one warm loader per agent,
//! and the queries the CLI, the functions and (later) the turn engine make of them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use clawless_base::object_store::StoreError;
use clawless_skills::bins::collect_skill_bins;
use clawless_skills::commands::{RESERVED_COMMAND_NAMES, SkillCommandSpec, build_command_specs};
use clawless_skills::eligibility::{filter_entries, ineligibility};
use clawless_skills::location::{ResolvedLocation, resolve_skill_location};
use clawless_skills::snapshot::build_snapshot;
use clawless_skills::{
    EligibilityContext, EligibilityInputs, Ineligibility, LoadedSkills, SkillEntry, SkillLoader,
    SkillSnapshot, SkillSource, SkillSourceKind, SnapshotOptions,
};

use crate::config::{ClawlessConfig, ResolvedAgent};
use crate::sources::{InvalidSourceUri, SourceUri, StoreFactory};

/// Failures of the skills service.
#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    /// A configured location is malformed.
    #[error(transparent)]
    Location(#[from] InvalidSourceUri),
    /// A store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No agent has this id.
    #[error("no agent {0:?} in the config")]
    UnknownAgent(String),
}

/// One skill and why it is or is not eligible.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SkillStatus {
    /// The skill.
    pub entry: Arc<SkillEntry>,
    /// Empty when eligible.
    pub ineligible: Vec<Ineligibility>,
    /// Excluded by the agent's skill filter (while otherwise eligible).
    pub filtered_out: bool,
}

/// The deployment's skills.
#[derive(Debug)]
pub struct SkillsService {
    config: ClawlessConfig,
    sources: BTreeMap<String, Vec<SkillSource>>,
    loaders: BTreeMap<String, SkillLoader>,
}

impl SkillsService {
    /// Opens every agent's sources (no I/O yet: stores are only named).
    pub fn new(config: ClawlessConfig, stores: &StoreFactory) -> Result<Self, SkillsError> {
        let mut sources = BTreeMap::new();
        let mut loaders = BTreeMap::new();
        for agent in config.agents() {
            sources.insert(agent.id.clone(), agent_sources(&config, &agent, stores)?);
            loaders.insert(
                agent.id.clone(),
                SkillLoader::new(config.skills.engine.limits),
            );
        }
        Ok(Self {
            config,
            sources,
            loaders,
        })
    }

    /// The configuration it serves.
    pub fn config(&self) -> &ClawlessConfig {
        &self.config
    }

    /// The sources of `agent_id`, in precedence order.
    pub fn sources(&self, agent_id: &str) -> Result<&[SkillSource], SkillsError> {
        let id = self.agent(agent_id)?.id;
        Ok(self.sources.get(&id).map(Vec::as_slice).unwrap_or_default())
    }

    /// The resolved settings of `agent_id`.
    pub fn agent(&self, agent_id: &str) -> Result<ResolvedAgent, SkillsError> {
        self.config
            .agent(agent_id)
            .ok_or_else(|| SkillsError::UnknownAgent(agent_id.to_owned()))
    }

    /// Loads (or reuses) the merged skills of an agent, listing its sources now.
    pub async fn load(&self, agent_id: &str) -> Result<Arc<LoadedSkills>, SkillsError> {
        self.load_within(agent_id, 0).await
    }

    /// The merged skills of an agent as a turn sees them: its sources are listed again at
    /// most once per `skills.refreshSeconds`, unless [`SkillsService::mark_stale`] was called.
    async fn load_for_turn(&self, agent_id: &str) -> Result<Arc<LoadedSkills>, SkillsError> {
        self.load_within(agent_id, self.config.skills.refresh_ms())
            .await
    }

    async fn load_within(
        &self, agent_id: &str, max_age_ms: u64,
    ) -> Result<Arc<LoadedSkills>, SkillsError> {
        let agent = self.agent(agent_id)?;
        let (Some(loader), Some(sources)) =
            (self.loaders.get(&agent.id), self.sources.get(&agent.id))
        else {
            return Err(SkillsError::UnknownAgent(agent_id.to_owned()));
        };
        Ok(loader.load_within(sources, max_age_ms).await?)
    }

    /// Makes the next load of `agent_id`'s skills list its sources again: something was
    /// written to its workspace (a skill, a bootstrap file).
    pub fn mark_stale(&self, agent_id: &str) {
        if let Ok(agent) = self.agent(agent_id)
            && let Some(loader) = self.loaders.get(&agent.id)
        {
            loader.mark_stale();
        }
    }

    /// The listing of store `identity` made by the latest load of `agent_id`'s skills, if it
    /// covers everything under `prefix` (see [`clawless_skills::loader::SkillLoader::recent_listing`]).
    pub fn recent_listing(
        &self, agent_id: &str, identity: &str, prefix: &str,
    ) -> Option<Arc<clawless_base::object_store::Listing>> {
        let agent = self.agent(agent_id).ok()?;
        self.loaders
            .get(&agent.id)?
            .recent_listing(identity, prefix)
    }

    /// `skills.bins`: the binaries declared by every agent's skills, sorted.
    pub async fn bins(&self) -> Result<Vec<String>, SkillsError> {
        let mut entries = Vec::new();
        for agent in self.config.agents() {
            entries.extend(self.load(&agent.id).await?.entries.iter().cloned());
        }
        Ok(collect_skill_bins(&entries))
    }

    /// The snapshot a session of `agent_id` gets on machines described by `context` (its
    /// sources listed at most once per `skills.refreshSeconds`).
    pub async fn snapshot(
        &self, agent_id: &str, context: &EligibilityContext, home_dirs: &[String],
        node_note: Option<&str>,
    ) -> Result<SkillSnapshot, SkillsError> {
        let agent = self.agent(agent_id)?;
        let loaded = self.load_for_turn(agent_id).await?;
        let options = SnapshotOptions {
            filter: agent.skill_filter.as_deref(),
            home_dirs,
            node_note,
            limits: self.config.skills.engine.limits,
        };
        Ok(build_snapshot(&loaded, self.inputs(context), &options))
    }

    /// Every loaded skill of `agent_id` with its eligibility.
    pub async fn check(
        &self, agent_id: &str, context: &EligibilityContext,
    ) -> Result<Vec<SkillStatus>, SkillsError> {
        let agent = self.agent(agent_id)?;
        let loaded = self.load(agent_id).await?;
        let inputs = self.inputs(context);
        let kept: BTreeSet<&str> =
            filter_entries(&loaded.entries, inputs, agent.skill_filter.as_deref())
                .iter()
                .map(|e| e.name.as_str())
                .collect();
        Ok(loaded
            .entries
            .iter()
            .map(|entry| {
                let ineligible = ineligibility(entry, inputs);
                let filtered_out = ineligible.is_empty() && !kept.contains(entry.name.as_str());
                SkillStatus {
                    entry: Arc::clone(entry),
                    ineligible,
                    filtered_out,
                }
            })
            .collect())
    }

    /// Slash command specs of `agent_id`'s eligible, user-invocable skills.
    pub async fn commands(
        &self, agent_id: &str, context: &EligibilityContext,
    ) -> Result<Vec<SkillCommandSpec>, SkillsError> {
        let agent = self.agent(agent_id)?;
        let loaded = self.load_for_turn(agent_id).await?;
        let eligible = filter_entries(
            &loaded.entries,
            self.inputs(context),
            agent.skill_filter.as_deref(),
        );
        Ok(build_command_specs(&eligible, RESERVED_COMMAND_NAMES))
    }

    /// The store and key behind a skill `<location>` of `agent_id` (`~/` expanded with
    /// `home_dirs`): what the `read` tool opens. `None` outside the agent's skill sources.
    pub fn resolve_location(
        &self, agent_id: &str, location: &str, home_dirs: &[String],
    ) -> Result<Option<ResolvedLocation>, SkillsError> {
        Ok(resolve_skill_location(
            self.sources(agent_id)?,
            location,
            home_dirs,
        ))
    }

    fn inputs<'a>(&'a self, context: &'a EligibilityContext) -> EligibilityInputs<'a> {
        EligibilityInputs {
            skills: &self.config.skills.engine,
            config: &self.config.document,
            context,
        }
    }
}

/// An agent's sources: extra < bundled < managed < workspace `.agents/skills` < workspace `skills`.
fn agent_sources(
    config: &ClawlessConfig, agent: &ResolvedAgent, stores: &StoreFactory,
) -> Result<Vec<SkillSource>, SkillsError> {
    let mut located: Vec<(SkillSourceKind, SourceUri)> = Vec::new();
    for extra in config.skills.extra.iter().filter(|e| !e.trim().is_empty()) {
        located.push((SkillSourceKind::Extra, SourceUri::parse(extra)?));
    }
    if let Some(bundled) = &config.skills.bundled {
        located.push((SkillSourceKind::Bundled, SourceUri::parse(bundled)?));
    }
    if let Some(managed) = &config.skills.managed {
        located.push((SkillSourceKind::Managed, SourceUri::parse(managed)?));
    }
    if let Some(workspace) = &agent.workspace {
        let root = SourceUri::parse(workspace)?;
        located.push((SkillSourceKind::AgentsProject, root.join(".agents/skills")));
        located.push((SkillSourceKind::Workspace, root.join("skills")));
    }
    located
        .into_iter()
        .map(|(kind, uri)| {
            let (store, prefix) = stores.open(&uri)?;
            Ok(SkillSource::new(kind, store, &prefix))
        })
        .collect()
}
