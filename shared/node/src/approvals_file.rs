//! The node-local approvals file, `<state dir>/exec-approvals.json` (spec §7.2): how much this
//! machine lets each agent run.
//!
//! Shape (version 1):
//! ```json
//! { "version": 1,
//!   "defaults": { "security": "allowlist", "ask": "on-miss", "askFallback": "deny", "autoAllowSkills": false },
//!   "agents": { "*":    { "allowlist": ["/usr/bin/git"] },
//!               "main": { "security": "full", "allowlist": [{ "pattern": "~/bin/*", "argPattern": "^--dry-run$" }] } },
//!   "safeBins": null, "safeBinTrustedDirs": [], "safeBinProfiles": null }
//! ```
//! Allowlist entries are a pattern string or `{pattern, argPattern?, source?}` (other entry
//! keys, such as OpenClaw's `id` and `lastUsedAt`, are accepted and ignored). OpenClaw's
//! top-level `socket` is accepted and ignored.
//!
//! **Never looser than the file.** Each setting comes from `agents[id]`, else `agents["*"]`,
//! else `defaults`, else clawless's secure defaults ([`SECURE_DEFAULTS`]: allowlist, ask
//! on-miss, fall back to deny, no skill auto-allow), not OpenClaw's full/off. Consequently:
//! - a missing file means the secure defaults;
//! - a file that can't be read, isn't valid JSON, has an unknown version, an unknown key (a
//!   typo such as `"securty": "deny"` must not silently drop a rule) or a bad value is an
//!   [`ApprovalsFileError`] naming the file and the JSON path: the node refuses to run jobs
//!   rather than guess;
//! - a world-writable file is refused: another local user could loosen it;
//! - `askFallback` is clamped to `security`, since a fallback can't allow more than the mode.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clawless_exec::{AllowlistEntry, Ask, Security};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::atomic::write_private;

/// The file's name inside the node's state dir.
pub const APPROVALS_FILE_NAME: &str = "exec-approvals.json";

/// The only version this code reads and writes.
pub const APPROVALS_FILE_VERSION: u32 = 1;

/// The agent key whose settings and allowlist apply to every agent.
pub const ANY_AGENT: &str = "*";

/// What an agent gets when neither its entry, `"*"`, nor `defaults` say otherwise.
pub const SECURE_DEFAULTS: ApprovalDefaults = ApprovalDefaults {
    security: Some(Security::Allowlist),
    ask: Some(Ask::OnMiss),
    ask_fallback: Some(Security::Deny),
    auto_allow_skills: Some(false),
};

/// The approvals file as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalsFile {
    /// Always [`APPROVALS_FILE_VERSION`].
    pub version: u32,
    /// Settings for agents that name none of their own.
    #[serde(default)]
    pub defaults: ApprovalDefaults,
    /// Per-agent settings and allowlists, keyed by agent id or [`ANY_AGENT`].
    #[serde(default)]
    pub agents: BTreeMap<String, AgentApprovals>,
    /// Safe bins (spec §7.6): `None` keeps the built-in list, a list replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_bins: Option<Vec<String>>,
    /// Folders a safe bin must resolve into.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub safe_bin_trusted_dirs: Vec<String>,
    /// Per-bin argument profiles, passed through to the exec engine as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_bin_profiles: Option<Value>,
    /// OpenClaw's approval socket settings: accepted so its files load, and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<Value>,
}

impl Default for ApprovalsFile {
    fn default() -> Self {
        Self {
            version: APPROVALS_FILE_VERSION,
            defaults: ApprovalDefaults::default(),
            agents: BTreeMap::new(),
            safe_bins: None,
            safe_bin_trusted_dirs: Vec::new(),
            safe_bin_profiles: None,
            socket: None,
        }
    }
}

/// The four settings; each may be left unset to inherit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalDefaults {
    /// How much runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Security>,
    /// When a person is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<Ask>,
    /// What happens when asking is impossible or times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_fallback: Option<Security>,
    /// Whether the skills' declared binaries are allowed without an allowlist entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_allow_skills: Option<bool>,
}

/// One agent's entry (or `"*"`'s).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentApprovals {
    /// How much runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Security>,
    /// When a person is asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<Ask>,
    /// What happens when asking is impossible or times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_fallback: Option<Security>,
    /// Whether the skills' declared binaries are allowed without an allowlist entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_allow_skills: Option<bool>,
    /// Allowed executables.
    #[serde(default, deserialize_with = "allowlist_entries")]
    pub allowlist: Vec<AllowlistEntry>,
}

/// An agent's effective rules on this node.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedApprovals {
    /// How much runs.
    pub security: Security,
    /// When a person is asked.
    pub ask: Ask,
    /// What runs when asking is impossible; never more than `security`.
    pub ask_fallback: Security,
    /// Whether skill bins are allowed without an allowlist entry.
    pub auto_allow_skills: bool,
    /// `agents["*"]`'s entries, then the agent's, then those granted from the chat;
    /// duplicates removed.
    pub allowlist: Vec<AllowlistEntry>,
    /// Safe bins: `None` = the built-in list.
    pub safe_bins: Option<Vec<String>>,
    /// Folders a safe bin must resolve into.
    pub safe_bin_trusted_dirs: Vec<String>,
    /// Per-bin argument profiles, as written.
    pub safe_bin_profiles: Option<Value>,
}

/// The file could not be used. The node must refuse jobs until it is fixed.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalsFileError {
    /// Reading failed (other than the file being absent).
    #[error("cannot read the exec approvals file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The contents are not a valid version-1 approvals file.
    #[error("the exec approvals file {} is invalid at `{json_path}`: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where in the document (`agents.main.security`, `.` for the whole).
        json_path: String,
        /// What is wrong.
        message: String,
    },
    /// Anyone on the machine could rewrite it.
    #[error(
        "the exec approvals file {} is writable by every user (mode {mode:o}); run `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    WorldWritable {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Writing failed.
    #[error("cannot write the exec approvals file {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl ApprovalsFile {
    /// Reads the file at `path`; a missing file is an empty one (the secure defaults).
    pub fn load(path: &Path) -> Result<Self, ApprovalsFileError> {
        match read_checked(path)? {
            Some(text) => Self::parse(&text, path),
            None => Ok(Self::default()),
        }
    }

    /// Parses and validates file contents; `path` only names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ApprovalsFileError> {
        let invalid = |json_path: String, message: String| ApprovalsFileError::Invalid {
            path: path.to_path_buf(),
            json_path,
            message,
        };
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let file: Self = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|err| invalid(err.path().to_string(), err.inner().to_string()))?;
        deserializer
            .end()
            .map_err(|err| invalid(".".to_owned(), err.to_string()))?;
        if file.version != APPROVALS_FILE_VERSION {
            return Err(invalid(
                "version".to_owned(),
                format!(
                    "version {} is not supported (expected {APPROVALS_FILE_VERSION})",
                    file.version
                ),
            ));
        }
        for (agent, approvals) in &file.agents {
            if agent.trim().is_empty() {
                return Err(invalid(
                    "agents".to_owned(),
                    "an agent id is empty".to_owned(),
                ));
            }
            for (index, entry) in approvals.allowlist.iter().enumerate() {
                if entry.pattern.trim().is_empty() {
                    return Err(invalid(
                        format!("agents.{agent}.allowlist[{index}].pattern"),
                        "the pattern is empty".to_owned(),
                    ));
                }
            }
        }
        Ok(file)
    }

    /// The rules for `agent_id`, plus the allowlist entries granted from the chat (`granted`
    /// pairs an agent id, or [`ANY_AGENT`], with an entry; other agents' grants are ignored).
    pub fn resolve(
        &self, agent_id: &str, granted: &[(String, AllowlistEntry)],
    ) -> ResolvedApprovals {
        let own = self.agents.get(agent_id);
        let any = self.agents.get(ANY_AGENT);
        let layers = [
            own.map(AgentApprovals::settings),
            any.map(AgentApprovals::settings),
            Some(self.defaults),
            Some(SECURE_DEFAULTS),
        ];
        // Every layer ends in SECURE_DEFAULTS, which sets all four, so the fallbacks below
        // are never reached; they repeat the secure values rather than panic.
        let set = || layers.iter().flatten();
        let security = set()
            .find_map(|layer| layer.security)
            .unwrap_or(Security::Allowlist);
        let ask = set().find_map(|layer| layer.ask).unwrap_or(Ask::OnMiss);
        let ask_fallback = set()
            .find_map(|layer| layer.ask_fallback)
            .unwrap_or(Security::Deny)
            .min(security);
        let auto_allow_skills = set()
            .find_map(|layer| layer.auto_allow_skills)
            .unwrap_or(false);

        let mut allowlist: Vec<AllowlistEntry> = Vec::new();
        let own_entries = if agent_id == ANY_AGENT {
            None
        } else {
            own.map(|agent| agent.allowlist.iter())
        };
        let candidates = any
            .map(|agent| agent.allowlist.iter())
            .into_iter()
            .flatten()
            .chain(own_entries.into_iter().flatten())
            .chain(
                granted
                    .iter()
                    .filter(|(agent, _)| agent == agent_id || agent == ANY_AGENT)
                    .map(|(_, entry)| entry),
            );
        for entry in candidates {
            if !allowlist.contains(entry) {
                allowlist.push(entry.clone());
            }
        }

        ResolvedApprovals {
            security,
            ask,
            ask_fallback,
            auto_allow_skills,
            allowlist,
            safe_bins: self.safe_bins.clone(),
            safe_bin_trusted_dirs: self.safe_bin_trusted_dirs.clone(),
            safe_bin_profiles: self.safe_bin_profiles.clone(),
        }
    }
}

impl AgentApprovals {
    fn settings(&self) -> ApprovalDefaults {
        ApprovalDefaults {
            security: self.security,
            ask: self.ask,
            ask_fallback: self.ask_fallback,
            auto_allow_skills: self.auto_allow_skills,
        }
    }
}

/// Loads the file at `path` and resolves `agent_id`'s rules (see [`ApprovalsFile::resolve`]).
pub fn resolve_from_path(
    path: &Path, agent_id: &str, granted: &[(String, AllowlistEntry)],
) -> Result<ResolvedApprovals, ApprovalsFileError> {
    Ok(ApprovalsFile::load(path)?.resolve(agent_id, granted))
}

/// Appends `entry` to `agents[agent_id].allowlist`, creating the file (version 1, mode
/// 0600) or the agent's entry if needed, and writing atomically. Everything else in the
/// file is kept as written. Returns `false` when an identical entry was already there.
///
/// An existing file that is invalid is left untouched and reported. Two processes adding
/// at the same moment can lose one entry: only the node host writes this file.
pub fn add_entry(
    path: &Path, agent_id: &str, entry: &AllowlistEntry,
) -> Result<bool, ApprovalsFileError> {
    let invalid = |json_path: &str, message: &str| ApprovalsFileError::Invalid {
        path: path.to_path_buf(),
        json_path: json_path.to_owned(),
        message: message.to_owned(),
    };
    if agent_id.trim().is_empty() {
        return Err(invalid("agents", "an agent id is empty"));
    }
    if entry.pattern.trim().is_empty() {
        return Err(invalid(
            &format!("agents.{agent_id}.allowlist"),
            "the pattern is empty",
        ));
    }
    let mut document = match read_checked(path)? {
        Some(text) => {
            let file = ApprovalsFile::parse(&text, path)?;
            let already = file
                .agents
                .get(agent_id)
                .is_some_and(|agent| agent.allowlist.contains(entry));
            if already {
                return Ok(false);
            }
            serde_json::from_str::<Value>(&text).map_err(|err| invalid(".", &err.to_string()))?
        }
        None => serde_json::json!({ "version": APPROVALS_FILE_VERSION }),
    };
    let entry_value = serde_json::to_value(entry).map_err(|err| invalid(".", &err.to_string()))?;
    let Some(root) = document.as_object_mut() else {
        return Err(invalid(".", "the document is not an object"));
    };
    let agents = root
        .entry("agents")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(agents) = agents.as_object_mut() else {
        return Err(invalid("agents", "not an object"));
    };
    let agent = agents
        .entry(agent_id)
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(agent) = agent.as_object_mut() else {
        return Err(invalid(&format!("agents.{agent_id}"), "not an object"));
    };
    let allowlist = agent
        .entry("allowlist")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(allowlist) = allowlist.as_array_mut() else {
        return Err(invalid(
            &format!("agents.{agent_id}.allowlist"),
            "not an array",
        ));
    };
    allowlist.push(entry_value);

    let mut text =
        serde_json::to_string_pretty(&document).map_err(|err| invalid(".", &err.to_string()))?;
    text.push('\n');
    // What is written must load: never leave a file the node would refuse.
    ApprovalsFile::parse(&text, path)?;
    write_private(path, text.as_bytes()).map_err(|source| ApprovalsFileError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    tracing::info!(agent = %agent_id, pattern = %entry.pattern, "added an exec allowlist entry");
    Ok(true)
}

/// Reads the file, refusing a world-writable one; `None` when it does not exist.
fn read_checked(path: &Path) -> Result<Option<String>, ApprovalsFileError> {
    let read_error = |source| ApprovalsFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(read_error(err)),
    };
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(ApprovalsFileError::WorldWritable {
            path: path.to_path_buf(),
            mode,
        });
    }
    std::fs::read_to_string(path).map(Some).map_err(read_error)
}

/// Allowlist entries: a bare pattern string or an entry object.
fn allowlist_entries<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<AllowlistEntry>, D::Error> {
    Vec::<EntryRepr>::deserialize(deserializer)
        .map(|entries| entries.into_iter().map(|EntryRepr(entry)| entry).collect())
}

struct EntryRepr(AllowlistEntry);

impl<'de> Deserialize<'de> for EntryRepr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(deserializer)? {
            Value::String(pattern) => Ok(Self(AllowlistEntry::pattern(pattern))),
            object @ Value::Object(_) => serde_json::from_value(object)
                .map(Self)
                .map_err(|err| D::Error::custom(format!("invalid allowlist entry: {err}"))),
            _ => Err(D::Error::custom(
                "an allowlist entry is a pattern string or {pattern, argPattern?, source?}",
            )),
        }
    }
}

#[cfg(test)]
mod tests;
