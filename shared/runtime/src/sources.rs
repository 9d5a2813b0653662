//! Source URIs (`./dir`, `/abs/dir`, `~/dir`, `s3://bucket/prefix`) and the stores behind them.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use clawless_aws::S3ObjectStore;
use clawless_base::object_store::{ObjectStore, StoreError, normalize_prefix};
use clawless_local::DirObjectStore;

/// Where a tree of objects lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceUri {
    /// A local directory.
    Dir(PathBuf),
    /// A prefix of an S3 bucket (normalised: `""` or ending in `/`).
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix.
        prefix: String,
    },
}

/// A source URI that could not be understood.
#[derive(Debug, thiserror::Error)]
#[error("invalid location {uri:?}: {reason}")]
pub struct InvalidSourceUri {
    uri: String,
    reason: &'static str,
}

impl SourceUri {
    /// Parses `s3://bucket[/prefix]` or a path (`~/` expands to the home directory).
    pub fn parse(raw: &str) -> Result<Self, InvalidSourceUri> {
        let trimmed = raw.trim();
        let invalid = |reason| InvalidSourceUri {
            uri: raw.to_owned(),
            reason,
        };
        if trimmed.is_empty() {
            return Err(invalid("empty"));
        }
        if let Some(rest) = trimmed.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(invalid("no bucket name after s3://"));
            }
            if prefix.split('/').any(|segment| segment == "..") {
                return Err(invalid("'..' in an S3 prefix"));
            }
            return Ok(Self::S3 {
                bucket: bucket.to_owned(),
                prefix: normalize_prefix(prefix),
            });
        }
        if trimmed.contains("://") {
            return Err(invalid("only directories and s3:// URIs are supported"));
        }
        Ok(Self::Dir(expand_home(trimmed)))
    }

    /// The location of `relative` below this one (`relative` uses `/`).
    pub fn join(&self, relative: &str) -> Self {
        match self {
            Self::Dir(path) => Self::Dir(
                relative
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .fold(path.clone(), |p, s| p.join(s)),
            ),
            Self::S3 { bucket, prefix } => Self::S3 {
                bucket: bucket.clone(),
                prefix: normalize_prefix(&format!("{prefix}{relative}")),
            },
        }
    }
}

impl fmt::Display for SourceUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dir(path) => write!(f, "{}", path.display()),
            Self::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// `~` and `~/x` → the home directory; other paths unchanged.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix('~'), std::env::home_dir()) {
        (Some(""), Some(home)) => home,
        (Some(rest), Some(home)) if rest.starts_with('/') => {
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(path),
    }
}

/// Builds stores for URIs, one per bucket or directory, so that sources in the same
/// bucket share a store (and a listing). The S3 client is created lazily, once.
pub struct StoreFactory {
    s3_client: Box<dyn Fn() -> aws_sdk_s3::Client + Send + Sync>,
    s3_client_cache: Mutex<Option<aws_sdk_s3::Client>>,
    s3_stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl fmt::Debug for StoreFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreFactory").finish_non_exhaustive()
    }
}

impl StoreFactory {
    /// A factory whose S3 stores use the client `make_client` returns (called at most once).
    pub fn new(make_client: impl Fn() -> aws_sdk_s3::Client + Send + Sync + 'static) -> Self {
        Self {
            s3_client: Box::new(make_client),
            s3_client_cache: Mutex::new(None),
            s3_stores: Mutex::new(HashMap::new()),
        }
    }

    /// A factory with an already built S3 client.
    pub fn with_s3_client(client: aws_sdk_s3::Client) -> Self {
        Self::new(move || client.clone())
    }

    /// The store and the key prefix for `uri`.
    pub fn open(&self, uri: &SourceUri) -> Result<(Arc<dyn ObjectStore>, String), StoreError> {
        match uri {
            SourceUri::Dir(path) => Ok((Arc::new(DirObjectStore::open(path)?), String::new())),
            SourceUri::S3 { bucket, prefix } => {
                let mut stores = self
                    .s3_stores
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let store = stores
                    .entry(bucket.clone())
                    .or_insert_with(|| {
                        Arc::new(S3ObjectStore::new(self.s3_client(), bucket.clone()))
                    })
                    .clone();
                Ok((store, prefix.clone()))
            }
        }
    }

    /// The S3 client, built on first use.
    pub fn s3_client(&self) -> aws_sdk_s3::Client {
        let mut cached = self
            .s3_client_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        cached.get_or_insert_with(|| (self.s3_client)()).clone()
    }
}

/// Whether `dir` looks like a skills directory: a `SKILL.md` in some child directory.
pub fn looks_like_skills_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|entry| entry.path().join("SKILL.md").is_file())
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_uris_split_into_bucket_and_normalised_prefix() {
        assert_eq!(
            SourceUri::parse("s3://bucket/skills/bundled").unwrap(),
            SourceUri::S3 {
                bucket: "bucket".into(),
                prefix: "skills/bundled/".into()
            }
        );
        assert_eq!(
            SourceUri::parse("s3://bucket").unwrap(),
            SourceUri::S3 {
                bucket: "bucket".into(),
                prefix: "".into()
            }
        );
        assert!(SourceUri::parse("s3:///prefix").is_err());
        assert!(SourceUri::parse("s3://b/a/../c").is_err());
        assert!(SourceUri::parse("https://example.com/skills").is_err());
        assert!(SourceUri::parse("  ").is_err());
    }

    #[test]
    fn paths_expand_the_home_directory_and_join() {
        let home = std::env::home_dir().unwrap();
        assert_eq!(
            SourceUri::parse("~/skills").unwrap(),
            SourceUri::Dir(home.join("skills"))
        );
        assert_eq!(
            SourceUri::parse("./skills").unwrap(),
            SourceUri::Dir(PathBuf::from("./skills"))
        );
        assert_eq!(
            SourceUri::parse("/ws").unwrap().join(".agents/skills"),
            SourceUri::Dir(PathBuf::from("/ws/.agents/skills"))
        );
        assert_eq!(
            SourceUri::parse("s3://b/agents/main/workspace")
                .unwrap()
                .join("skills")
                .to_string(),
            "s3://b/agents/main/workspace/skills/"
        );
    }
}
