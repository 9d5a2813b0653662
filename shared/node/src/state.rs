//! The node's state dir and its pairing file, `node.json` (spec §8.1, clawless shape).
//!
//! The state dir is `$CLAWLESS_NODE_HOME`, else `~/.clawless/node`. It holds:
//! - `node.json`: `{version: 1, nodeId, secret, url, displayName?, queue?}`, written atomically
//!   with mode 0600 because `secret` signs everything the node and the backend exchange
//!   (`queue`, the node's exec queue as pairing named it, is absent from files written before
//!   it existed);
//! - `exec-approvals.json` ([`crate::approvals_file`]);
//! - `journal.sqlite` ([`crate::journal`]).
//!
//! The secret never appears in `Debug` output or in error messages.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::approvals_file::APPROVALS_FILE_NAME;
use crate::atomic::{ensure_private_dir, write_private};

/// Environment variable that overrides the state dir.
pub const STATE_DIR_ENV: &str = "CLAWLESS_NODE_HOME";

/// The pairing file's name.
pub const NODE_CONFIG_FILE_NAME: &str = "node.json";

/// The job journal's file name.
pub const JOURNAL_FILE_NAME: &str = "journal.sqlite";

/// The only `node.json` version this code reads and writes.
pub const NODE_CONFIG_VERSION: u32 = 1;

/// The node's state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    path: PathBuf,
}

/// The pairing: who this node is, its secret, and the backend it talks to.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// The node id the backend knows this machine by.
    pub node_id: String,
    /// The shared secret (HMAC key). Never logged.
    pub secret: String,
    /// The backend's base URL (`https://…`, or `http://…` for local mode).
    pub url: String,
    /// A human name for the node.
    pub display_name: Option<String>,
    /// The node's exec queue as pairing returned it: an SQS queue URL on AWS (the worker then
    /// reads it directly with vended credentials), a local queue name in local mode (the
    /// worker polls the backend over HTTP). `None` in files written before it was stored.
    pub queue: Option<String>,
}

impl fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeConfig")
            .field("node_id", &self.node_id)
            .field("secret", &"<redacted>")
            .field("url", &self.url)
            .field("display_name", &self.display_name)
            .field("queue", &self.queue)
            .finish()
    }
}

/// `node.json` as written.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeFile {
    version: u32,
    node_id: String,
    secret: String,
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    queue: Option<String>,
}

/// The state dir or `node.json` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Neither `$CLAWLESS_NODE_HOME` nor `$HOME` is set.
    #[error("cannot find the node's state dir: set {STATE_DIR_ENV} or HOME")]
    NoHome,
    /// `node.json` does not exist.
    #[error(
        "this machine is not paired: run `clawless node pair --url URL --code CODE` (no {})",
        path.display()
    )]
    NotPaired {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// `node.json` exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// `node.json` is not a valid version-1 pairing file.
    #[error("{} is invalid at `{json_path}`: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where in the document.
        json_path: String,
        /// What is wrong (never the secret's value).
        message: String,
    },
    /// The state dir or `node.json` could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl StateDir {
    /// The state dir from this process's environment (see [`StateDir::resolve`]).
    pub fn from_env() -> Result<Self, StateError> {
        Self::resolve(std::env::var_os(STATE_DIR_ENV), std::env::var_os("HOME"))
    }

    /// `node_home` (the value of `$CLAWLESS_NODE_HOME`) when set and non-empty, else
    /// `<home>/.clawless/node`.
    pub fn resolve(
        node_home: Option<OsString>, home: Option<OsString>,
    ) -> Result<Self, StateError> {
        if let Some(dir) = node_home.filter(|dir| !dir.is_empty()) {
            return Ok(Self::at(dir));
        }
        let home = home
            .filter(|home| !home.is_empty())
            .ok_or(StateError::NoHome)?;
        Ok(Self::at(PathBuf::from(home).join(".clawless").join("node")))
    }

    /// A state dir at an explicit path.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<dir>/node.json`.
    pub fn node_config_path(&self) -> PathBuf {
        self.path.join(NODE_CONFIG_FILE_NAME)
    }

    /// `<dir>/exec-approvals.json`.
    pub fn approvals_path(&self) -> PathBuf {
        self.path.join(APPROVALS_FILE_NAME)
    }

    /// `<dir>/sandboxes`: the folders the jail binds as `/workspace`, one per sandbox.
    pub fn sandboxes_path(&self) -> PathBuf {
        self.path.join("sandboxes")
    }

    /// `<dir>/journal.sqlite`.
    pub fn journal_path(&self) -> PathBuf {
        self.path.join(JOURNAL_FILE_NAME)
    }

    /// Creates the folder (mode 0700) when missing.
    pub fn ensure(&self) -> Result<(), StateError> {
        ensure_private_dir(&self.path).map_err(|source| StateError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Reads `node.json`; [`StateError::NotPaired`] when it does not exist.
    pub fn load_config(&self) -> Result<NodeConfig, StateError> {
        let path = self.node_config_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(StateError::NotPaired { path });
            }
            Err(source) => return Err(StateError::Read { path, source }),
        };
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                path = %path.display(),
                "node.json is readable by other users; run `chmod 600` on it"
            );
        }
        let invalid = |json_path: String, message: String| StateError::Invalid {
            path: path.clone(),
            json_path,
            message,
        };
        let mut deserializer = serde_json::Deserializer::from_str(&text);
        let file: NodeFile =
            serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
                let json_path = err.path().to_string();
                // serde quotes offending values; the secret's must not reach a log.
                let message = if json_path == "secret" {
                    "must be a string".to_owned()
                } else {
                    err.inner().to_string()
                };
                invalid(json_path, message)
            })?;
        deserializer
            .end()
            .map_err(|err| invalid(".".to_owned(), err.to_string()))?;
        if file.version != NODE_CONFIG_VERSION {
            return Err(invalid(
                "version".to_owned(),
                format!(
                    "version {} is not supported (expected {NODE_CONFIG_VERSION})",
                    file.version
                ),
            ));
        }
        let config = NodeConfig {
            node_id: file.node_id,
            secret: file.secret,
            url: file.url,
            display_name: file.display_name,
            queue: file.queue,
        };
        config
            .validate()
            .map_err(|(field, message)| invalid(field.to_owned(), message.to_owned()))?;
        Ok(config)
    }

    /// Writes `node.json` atomically with mode 0600 (creating the folder with mode 0700).
    pub fn save_config(&self, config: &NodeConfig) -> Result<(), StateError> {
        let path = self.node_config_path();
        config
            .validate()
            .map_err(|(field, message)| StateError::Invalid {
                path: path.clone(),
                json_path: field.to_owned(),
                message: message.to_owned(),
            })?;
        let file = NodeFile {
            version: NODE_CONFIG_VERSION,
            node_id: config.node_id.clone(),
            secret: config.secret.clone(),
            url: config.url.clone(),
            display_name: config.display_name.clone(),
            queue: config.queue.clone(),
        };
        let mut text = serde_json::to_string_pretty(&file).map_err(|err| StateError::Write {
            path: path.clone(),
            source: io::Error::other(err),
        })?;
        text.push('\n');
        self.ensure()?;
        write_private(&path, text.as_bytes()).map_err(|source| StateError::Write { path, source })
    }
}

impl NodeConfig {
    /// The first field that is unusable, with why.
    fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if self.node_id.trim().is_empty() {
            return Err(("nodeId", "is empty"));
        }
        if self.secret.is_empty() {
            return Err(("secret", "is empty"));
        }
        if !(self.url.starts_with("https://") || self.url.starts_with("http://")) {
            return Err(("url", "must start with https:// or http://"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    const SECRET: &str = "s3cr3t-value-that-must-not-leak";

    fn config() -> NodeConfig {
        NodeConfig {
            node_id: "node-7".to_owned(),
            secret: SECRET.to_owned(),
            url: "https://api.example.com".to_owned(),
            display_name: Some("laptop".to_owned()),
            queue: Some("https://sqs.us-east-1.amazonaws.com/123456789012/node-7".to_owned()),
        }
    }

    #[test]
    fn node_home_wins_over_home_and_home_gives_dot_clawless_node() {
        let dir = StateDir::resolve(Some("/srv/node".into()), Some("/home/me".into())).unwrap();
        assert_eq!(dir.path(), Path::new("/srv/node"));
        let dir = StateDir::resolve(Some("".into()), Some("/home/me".into())).unwrap();
        assert_eq!(dir.path(), Path::new("/home/me/.clawless/node"));
        assert_eq!(
            dir.journal_path(),
            Path::new("/home/me/.clawless/node/journal.sqlite")
        );
        assert_eq!(
            dir.approvals_path(),
            Path::new("/home/me/.clawless/node/exec-approvals.json")
        );
        assert!(matches!(
            StateDir::resolve(None, None),
            Err(StateError::NoHome)
        ));
    }

    #[test]
    fn a_saved_config_is_private_and_reads_back() {
        let temp = tempfile::tempdir().unwrap();
        let state = StateDir::at(temp.path().join("node"));
        state.save_config(&config()).unwrap();

        let mode = fs::metadata(state.node_config_path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = fs::metadata(state.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        assert_eq!(state.load_config().unwrap(), config());

        let written: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(state.node_config_path()).unwrap()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({
                "version": 1, "nodeId": "node-7", "secret": SECRET,
                "url": "https://api.example.com", "displayName": "laptop",
                "queue": "https://sqs.us-east-1.amazonaws.com/123456789012/node-7"
            })
        );
    }

    #[test]
    fn a_config_written_before_queues_were_stored_still_loads_and_keeps_no_queue_key() {
        let temp = tempfile::tempdir().unwrap();
        let state = StateDir::at(temp.path());
        fs::write(
            state.node_config_path(),
            r#"{"version":1,"nodeId":"n","secret":"s","url":"http://127.0.0.1:8787"}"#,
        )
        .unwrap();
        let config = state.load_config().unwrap();
        assert_eq!(config.queue, None);

        state.save_config(&config).unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(state.node_config_path()).unwrap()).unwrap();
        assert!(written.get("queue").is_none(), "{written}");
        assert_eq!(state.load_config().unwrap(), config);
    }

    #[test]
    fn a_missing_config_says_how_to_pair() {
        let temp = tempfile::tempdir().unwrap();
        let err = StateDir::at(temp.path()).load_config().unwrap_err();
        assert!(matches!(err, StateError::NotPaired { .. }));
        assert!(
            err.to_string().starts_with(
                "this machine is not paired: run `clawless node pair --url URL --code CODE`"
            ),
            "{err}"
        );
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let shown = format!("{:?}", config());
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert!(shown.contains("node-7"));
    }

    #[test]
    fn a_wrongly_typed_secret_is_reported_without_its_value() {
        let temp = tempfile::tempdir().unwrap();
        let state = StateDir::at(temp.path());
        fs::write(
            state.node_config_path(),
            r#"{"version":1,"nodeId":"n","secret":987654321,"url":"https://x"}"#,
        )
        .unwrap();
        let err = state.load_config().unwrap_err();
        let message = err.to_string();
        assert!(message.contains("`secret`"), "{message}");
        assert!(!message.contains("987654321"), "{message}");
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let temp = tempfile::tempdir().unwrap();
        let state = StateDir::at(temp.path());
        for (text, field) in [
            (
                r#"{"version":2,"nodeId":"n","secret":"s","url":"https://x"}"#,
                "version",
            ),
            (
                r#"{"version":1,"nodeId":" ","secret":"s","url":"https://x"}"#,
                "nodeId",
            ),
            (
                r#"{"version":1,"nodeId":"n","secret":"","url":"https://x"}"#,
                "secret",
            ),
            (
                r#"{"version":1,"nodeId":"n","secret":"s","url":"ftp://x"}"#,
                "url",
            ),
            (r#"{"version":1,"nodeId":"n","secret":"s"}"#, "."),
            (
                r#"{"version":1,"nodeId":"n","secret":"s","url":"https://x","extra":1}"#,
                "extra",
            ),
        ] {
            fs::write(state.node_config_path(), text).unwrap();
            match state.load_config() {
                Err(StateError::Invalid { json_path, .. }) => {
                    assert_eq!(json_path, field, "{text}")
                }
                other => panic!("{text}: expected invalid, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_invalid_config_is_never_saved() {
        let temp = tempfile::tempdir().unwrap();
        let state = StateDir::at(temp.path());
        let mut bad = config();
        bad.url = "example.com".to_owned();
        assert!(state.save_config(&bad).is_err());
        assert!(!state.node_config_path().exists());
    }
}
