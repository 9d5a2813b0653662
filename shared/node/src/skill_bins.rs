//! The SkillBinsCache (spec §6): which binaries the agents' skills declare, as found on this
//! node's PATH. Consulted only when `autoAllowSkills` is on (§7.7).
//!
//! - The names come from the backend (`skills.bins`) through a [`SkillBinsSource`], at most
//!   once per [`SKILL_BINS_TTL`] unless forced.
//! - Each name is resolved on the node's `PATH` ([`resolve_on_path`]): bare names only (a `/`
//!   or `\` skips it), absolute `PATH` folders only, first executable regular file wins.
//!   Unresolvable names are dropped.
//! - The result is de-duplicated and sorted by name, then path.
//! - A failed fetch keeps the bins of the last successful one (none if there never was one)
//!   and does not count as a refresh, so the next call tries again.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use clawless_exec::SkillBin;
use clawless_exec::fs::NodeFs;
use tokio::sync::Mutex;

use crate::local_fs::LocalFs;
use clawless_base::clock::{Clock, SystemClock};

/// How long fetched bins stay fresh.
pub const SKILL_BINS_TTL: Duration = Duration::from_secs(90);

/// Where bin names come from (the backend's `skills.bins`).
///
/// Any `Fn() -> impl Future<Output = Result<Vec<String>, E>>` closure is a source.
pub trait SkillBinsSource: Send + Sync {
    /// Why a fetch failed; only logged.
    type Error: Display + Send;
    /// The bare binary names the skills declare.
    fn fetch_bins(&self) -> impl Future<Output = Result<Vec<String>, Self::Error>> + Send;
}

impl<F, Fut, E> SkillBinsSource for F
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<Vec<String>, E>> + Send,
    E: Display + Send,
{
    type Error = E;

    fn fetch_bins(&self) -> impl Future<Output = Result<Vec<String>, E>> + Send {
        self()
    }
}

/// Finds `name` on `path_env` (a `PATH` value): the first `<dir>/<name>` that is an
/// executable regular file. Names that are empty, `.`/`..` or hold a `/` or `\` are not
/// looked up; neither are empty or relative `PATH` entries, which would resolve against
/// whatever folder a job runs in.
pub fn resolve_on_path(name: &str, path_env: &str, fs: &impl NodeFs) -> Option<String> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
        return None;
    }
    path_env
        .split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| {
            let dir = dir.trim_end_matches('/');
            format!("{dir}/{name}")
        })
        .find(|candidate| fs.is_executable_file(candidate))
}

/// The cache. Share it behind an `Arc`; concurrent callers wait for one refresh.
pub struct SkillBinsCache<S, F = LocalFs> {
    source: S,
    fs: F,
    path_env: String,
    clock: Arc<dyn Clock>,
    ttl_ms: u64,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    bins: Vec<SkillBin>,
    /// When the last successful refresh started; `None` before the first.
    last_refresh_ms: Option<u64>,
}

impl<S: SkillBinsSource> SkillBinsCache<S, LocalFs> {
    /// A cache over this machine's disk and clock; `path_env` is the node's `PATH`.
    pub fn new(source: S, path_env: impl Into<String>) -> Self {
        Self::with_parts(source, LocalFs, path_env, Arc::new(SystemClock))
    }
}

impl<S: SkillBinsSource, F: NodeFs> SkillBinsCache<S, F> {
    /// A cache with an explicit filesystem and clock (tests, or a described node).
    pub fn with_parts(
        source: S, fs: F, path_env: impl Into<String>, clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            source,
            fs,
            path_env: path_env.into(),
            clock,
            ttl_ms: u64::try_from(SKILL_BINS_TTL.as_millis()).unwrap_or(u64::MAX),
            state: Mutex::new(CacheState::default()),
        }
    }

    /// The resolved skill bins, refreshed first when `force` is set or the last successful
    /// refresh is more than [`SKILL_BINS_TTL`] old.
    pub async fn current(&self, force: bool) -> Vec<SkillBin> {
        let mut state = self.state.lock().await;
        let now = self.clock.now_ms();
        let stale = state
            .last_refresh_ms
            .is_none_or(|last| now.saturating_sub(last) > self.ttl_ms);
        if force || stale {
            match self.source.fetch_bins().await {
                Ok(names) => {
                    state.bins = self.resolve_all(&names);
                    state.last_refresh_ms = Some(now);
                    tracing::debug!(bins = state.bins.len(), "refreshed skill bins");
                }
                Err(err) => {
                    tracing::warn!(error = %err, kept = state.bins.len(), "could not refresh skill bins");
                }
            }
        }
        state.bins.clone()
    }

    fn resolve_all(&self, names: &[String]) -> Vec<SkillBin> {
        let mut bins: Vec<SkillBin> = names
            .iter()
            .map(|name| name.trim())
            .filter_map(|name| {
                resolve_on_path(name, &self.path_env, &self.fs).map(|resolved_path| SkillBin {
                    name: name.to_owned(),
                    resolved_path,
                })
            })
            .collect();
        // SkillBin orders by name, then path.
        bins.sort();
        bins.dedup();
        bins
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    use clawless_base::testing::ManualClock;

    /// A scripted backend: answers from `replies` in turn (then repeats the last), counting calls.
    struct Script {
        calls: AtomicUsize,
        replies: Vec<Result<Vec<String>, String>>,
    }

    impl Script {
        fn new(replies: Vec<Result<Vec<&str>, &str>>) -> Self {
            Self {
                calls: AtomicUsize::new(0),
                replies: replies
                    .into_iter()
                    .map(|reply| {
                        reply
                            .map(|names| names.into_iter().map(str::to_owned).collect())
                            .map_err(str::to_owned)
                    })
                    .collect(),
            }
        }

        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }
    }

    impl SkillBinsSource for Arc<Script> {
        type Error = String;

        fn fetch_bins(&self) -> impl Future<Output = Result<Vec<String>, String>> + Send {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            let reply = self.replies[call.min(self.replies.len() - 1)].clone();
            async move { reply }
        }
    }

    fn make(dir: &Path, name: &str, mode: u32) -> String {
        let path = dir.join(name);
        fs::write(&path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path.to_str().unwrap().to_owned()
    }

    struct Node {
        _dirs: [tempfile::TempDir; 2],
        first: String,
        second: String,
    }

    fn node() -> Node {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let first = dirs[0].path().to_str().unwrap().to_owned();
        let second = dirs[1].path().to_str().unwrap().to_owned();
        Node {
            _dirs: dirs,
            first,
            second,
        }
    }

    fn cache(
        script: &Arc<Script>, path_env: &str, clock: &Arc<ManualClock>,
    ) -> SkillBinsCache<Arc<Script>> {
        SkillBinsCache::with_parts(
            Arc::clone(script),
            LocalFs,
            path_env,
            Arc::clone(clock) as Arc<dyn Clock>,
        )
    }

    fn bin(name: &str, path: &str) -> SkillBin {
        SkillBin {
            name: name.to_owned(),
            resolved_path: path.to_owned(),
        }
    }

    #[tokio::test]
    async fn names_resolve_to_the_first_executable_file_on_path_and_come_back_sorted() {
        // GIVEN two PATH folders: `rg` in both, `jq` only in the second, `notes` not executable
        let node = node();
        let rg_first = make(Path::new(&node.first), "rg", 0o755);
        make(Path::new(&node.second), "rg", 0o755);
        let jq = make(Path::new(&node.second), "jq", 0o711);
        make(Path::new(&node.first), "notes", 0o644);
        fs::create_dir(Path::new(&node.first).join("adir")).unwrap();
        let script = Arc::new(Script::new(vec![Ok(vec![
            "rg", " jq ", "notes", "adir", "missing", "../rg", "bin/rg", "a\\rg", "rg", "",
        ])]));
        let clock = Arc::new(ManualClock::default());
        let path_env = format!("relative/dir::{}:{}/", node.first, node.second);

        // WHEN the cache is first read
        let bins = cache(&script, &path_env, &clock).current(false).await;

        // THEN only resolvable bare names remain, once each, sorted by name
        assert_eq!(bins, vec![bin("jq", &jq), bin("rg", &rg_first)]);
    }

    #[tokio::test]
    async fn bins_are_fetched_again_only_after_the_ttl_has_passed() {
        let script = Arc::new(Script::new(vec![Ok(vec!["sh"])]));
        let clock = Arc::new(ManualClock::default());
        clock.set(1_000);
        let cache = cache(&script, "/bin:/usr/bin", &clock);

        assert_eq!(cache.current(false).await.len(), 1);
        clock.set(1_000 + 90_000);
        cache.current(false).await;
        assert_eq!(
            script.calls(),
            1,
            "exactly at the ttl the bins are still fresh"
        );
        clock.set(1_000 + 90_001);
        cache.current(false).await;
        assert_eq!(script.calls(), 2);
    }

    #[tokio::test]
    async fn force_fetches_even_when_fresh() {
        let script = Arc::new(Script::new(vec![Ok(vec![])]));
        let clock = Arc::new(ManualClock::default());
        let cache = cache(&script, "/bin", &clock);
        cache.current(false).await;
        cache.current(true).await;
        assert_eq!(script.calls(), 2);
    }

    #[tokio::test]
    async fn a_failed_fetch_keeps_the_last_good_bins_and_is_retried_on_the_next_call() {
        let node = node();
        let tool = make(Path::new(&node.first), "tool", 0o755);
        let script = Arc::new(Script::new(vec![
            Ok(vec!["tool"]),
            Err("backend down"),
            Err("still down"),
            Ok(vec![]),
        ]));
        let clock = Arc::new(ManualClock::default());
        let cache = cache(&script, &node.first, &clock);

        assert_eq!(cache.current(false).await, vec![bin("tool", &tool)]);
        clock.set(100_000);
        assert_eq!(cache.current(false).await, vec![bin("tool", &tool)]);
        // The failure did not count as a refresh: the very next call fetches again.
        assert_eq!(cache.current(false).await, vec![bin("tool", &tool)]);
        assert_eq!(script.calls(), 3);
        assert_eq!(cache.current(false).await, vec![]);
        assert_eq!(script.calls(), 4);
        cache.current(false).await;
        assert_eq!(script.calls(), 4, "a success counts as a refresh");
    }

    #[tokio::test]
    async fn a_fetch_that_never_succeeded_gives_no_bins() {
        let script = Arc::new(Script::new(vec![Err("nope")]));
        let clock = Arc::new(ManualClock::default());
        let cache = cache(&script, "/bin:/usr/bin", &clock);
        assert_eq!(cache.current(false).await, vec![]);
        assert_eq!(cache.current(false).await, vec![]);
        assert_eq!(script.calls(), 2);
    }

    #[tokio::test]
    async fn a_closure_is_a_source() {
        let cache = SkillBinsCache::new(
            || async { Ok::<_, String>(vec!["sh".to_owned()]) },
            "/bin:/usr/bin",
        );
        let bins = cache.current(false).await;
        assert_eq!(bins.len(), 1);
        assert_eq!(bins[0].name, "sh");
        assert!(bins[0].resolved_path.ends_with("/sh"));
    }

    #[test]
    fn resolve_on_path_refuses_names_with_separators_and_relative_path_entries() {
        let node = node();
        make(Path::new(&node.first), "tool", 0o755);
        let absolute = format!("{}/tool", node.first);
        assert_eq!(
            resolve_on_path("tool", &node.first, &LocalFs),
            Some(absolute.clone())
        );
        assert_eq!(resolve_on_path(&absolute, &node.first, &LocalFs), None);
        assert_eq!(resolve_on_path("..", &node.first, &LocalFs), None);
        // Even on a node where every path is an executable, relative and empty PATH
        // entries are never tried.
        struct Everything;
        impl NodeFs for Everything {
            fn is_executable_file(&self, _: &str) -> bool {
                true
            }
            fn is_file(&self, _: &str) -> bool {
                true
            }
            fn real_path(&self, path: &str) -> Option<String> {
                Some(path.to_owned())
            }
        }
        assert_eq!(resolve_on_path("tool", "bin:.::", &Everything), None);
        assert_eq!(
            resolve_on_path("tool", "bin:/opt//", &Everything).as_deref(),
            Some("/opt/tool")
        );
        assert_eq!(resolve_on_path("tool", "", &LocalFs), None);
    }
}
