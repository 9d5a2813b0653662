//! The jail a sandboxed session's command runs in on this node (spec §5.1 item 4): what a
//! group member's `exec` may touch. A sandbox job never runs on the bare host; a node whose
//! jail does not work refuses it.
//!
//! The jail is [bubblewrap](https://github.com/containers/bubblewrap), built per command:
//! - **its own namespaces**: mount, pid, IPC, UTS, cgroup, and network (only a loopback
//!   device) unless the job asks for the node's network;
//! - **a read-only root**: a fresh root with `/usr`, `/bin`, `/sbin`, `/lib`, `/lib64` and a
//!   handful of harmless `/etc` files bound read-only, then remounted read-only; a private
//!   `/tmp`; the host's home folders, `/root`, `/etc/shadow`, the node's state are not there;
//! - **`/workspace`**: this node's folder for the job's sandbox (`<root>/<slug>`), the only
//!   writable place besides `/tmp`. The path is fixed; the slug is checked to name one folder;
//! - **an unprivileged uid with no capabilities**: a node running as root drops the command
//!   to uid/gid [`JAIL_UID`] (a real, unprivileged host uid) with no capabilities, no
//!   supplementary groups and `no_new_privs`; a node running as another user maps
//!   [`JAIL_UID`] onto its own uid in a user namespace (needs unprivileged user namespaces);
//! - **a clean environment**: `HOME=/workspace`, a fixed `PATH`, `LANG`, and the job's own
//!   variables minus any credential-looking name ([`is_secret_env_name`]); nothing of the
//!   node's own environment;
//! - **limits**: address space, CPU seconds and (as root) processes through `prlimit`, and the
//!   runner's wall-clock timeout, which kills bubblewrap and with it the whole pid namespace.
//!
//! What it is not: a VM. A kernel bug reachable from an unprivileged process escapes it.
//! [`Jail::probe`] tests the jail once at start (uid, capabilities, read-only root); a node
//! advertises it only when that passes.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawless_exec::node::wire::{JobSandbox, is_secret_env_name};

use crate::runner::RunSpec;

/// The uid and gid a jailed command runs as.
pub const JAIL_UID: u32 = 65534;

/// The name a node advertises for its bubblewrap jail.
pub const BACKEND_BWRAP: &str = "bwrap";

/// Where the sandbox's folder appears inside the jail.
pub const JAIL_WORKSPACE: &str = "/workspace";

/// `PATH` inside the jail.
const JAIL_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// System folders bound read-only (when present).
const SYSTEM_DIRS: [&str; 5] = ["/usr", "/bin", "/sbin", "/lib", "/lib64"];

/// `/etc` entries bound read-only (when present): what programs need to start, nothing
/// about the host's users or secrets.
const ETC_ENTRIES: [&str; 5] = [
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
];

/// `/etc` entries added when the jail shares the node's network (name resolution).
const NETWORK_ETC_ENTRIES: [&str; 3] = ["/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"];

/// Where the helper programs the jail needs are looked up (they must sit inside the system
/// folders bound into it).
const HELPER_DIRS: [&str; 4] = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];

/// Why this node has no jail, or a job's jail could not be built.
#[derive(Debug, thiserror::Error)]
pub enum JailError {
    /// A program the jail needs is not installed.
    #[error("{0} is not installed (apt-get install bubblewrap util-linux)")]
    Missing(&'static str),
    /// The jail did not behave as a jail when tested.
    #[error("the jail's self-test failed: {0}")]
    SelfTest(String),
    /// A sandbox name that is not one plain folder name.
    #[error("refused sandbox name {0:?}")]
    UnsafeSlug(String),
    /// The sandbox folder could not be made.
    #[error("sandbox folder {path}: {source}")]
    Workspace {
        /// The folder.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// A tested bubblewrap jail and the folder its sandbox workspaces live in.
#[derive(Debug, Clone)]
pub struct Jail {
    bwrap: PathBuf,
    prlimit: PathBuf,
    /// `setpriv`, when the node runs as root and drops jailed commands to [`JAIL_UID`].
    setpriv: Option<PathBuf>,
    root: PathBuf,
}

impl Jail {
    /// Finds bubblewrap and its helpers and tests the jail: a command in it must run as
    /// [`JAIL_UID`], with no effective capabilities, and fail to write its root. Sandbox
    /// workspaces go under `root`.
    pub fn probe(root: &Path) -> Result<Self, JailError> {
        let as_root = nix::unistd::geteuid().is_root();
        let jail = Self {
            bwrap: find_helper("bwrap").ok_or(JailError::Missing("bwrap"))?,
            prlimit: find_helper("prlimit").ok_or(JailError::Missing("prlimit"))?,
            setpriv: match as_root {
                true => Some(find_helper("setpriv").ok_or(JailError::Missing("setpriv"))?),
                false => None,
            },
            root: root.to_path_buf(),
        };
        jail.self_test()?;
        Ok(jail)
    }

    /// The backends this node advertises.
    pub fn backends(&self) -> Vec<String> {
        vec![BACKEND_BWRAP.to_owned()]
    }

    /// The host folder bound as `/workspace` for `sandbox`, made on first use (owned by the
    /// jail's uid when the node runs as root).
    pub fn workspace(&self, sandbox: &JobSandbox) -> Result<PathBuf, JailError> {
        if !sandbox.slug_is_safe() {
            return Err(JailError::UnsafeSlug(sandbox.slug.clone()));
        }
        let path = self.root.join(&sandbox.slug);
        let failed = |source| JailError::Workspace {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&path).map_err(failed)?;
        // Never through a link: the folder must be a real one below the root.
        let metadata = std::fs::symlink_metadata(&path).map_err(failed)?;
        if !metadata.is_dir() {
            return Err(failed(std::io::Error::other("not a plain folder")));
        }
        if self.setpriv.is_some() {
            // The jailed uid owns it; root reaches it through the group (bubblewrap, still
            // root but without capabilities, must enter it).
            std::os::unix::fs::chown(&path, Some(JAIL_UID), Some(0)).map_err(failed)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o770))
                .map_err(failed)?;
        } else {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                .map_err(failed)?;
        }
        Ok(path)
    }

    /// What to run for `argv` of a sandbox job: bubblewrap around it, with `cwd` (a path in
    /// the jail; anything outside `/workspace` falls back to it) and the job's `env`.
    pub fn run_spec(
        &self, sandbox: &JobSandbox, argv: &[String], env: &BTreeMap<String, String>,
        cwd: Option<&str>, timeout: Duration,
    ) -> Result<RunSpec, JailError> {
        let workspace = self.workspace(sandbox)?;
        let mut args = self.bwrap_args(&workspace, sandbox.network, &jail_cwd(cwd));
        args.extend(jail_env(env));
        args.push("--".to_owned());
        if let Some(setpriv) = &self.setpriv {
            args.push(setpriv.to_string_lossy().into_owned());
            args.push(format!("--reuid={JAIL_UID}"));
            args.push(format!("--regid={JAIL_UID}"));
            args.extend(
                [
                    "--clear-groups",
                    "--inh-caps=-all",
                    "--bounding-set=-all",
                    "--no-new-privs",
                    "--",
                ]
                .map(str::to_owned),
            );
        }
        args.push(self.prlimit.to_string_lossy().into_owned());
        args.push(format!(
            "--as={}",
            sandbox.memory_mb.saturating_mul(1024 * 1024)
        ));
        args.push(format!("--cpu={}", timeout.as_secs().saturating_add(1)));
        if self.setpriv.is_some() {
            // Counted per host uid: only meaningful when the jail has a uid of its own.
            args.push(format!("--nproc={}", sandbox.max_processes));
        }
        args.push("--".to_owned());
        args.extend(argv.iter().cloned());

        let mut spec_argv = vec![self.bwrap.to_string_lossy().into_owned()];
        spec_argv.extend(args);
        let env = BTreeMap::from([("PATH".to_owned(), JAIL_PATH.to_owned())]);
        Ok(RunSpec::new(spec_argv, env, timeout))
    }

    /// bubblewrap's own arguments, up to (not including) the environment.
    fn bwrap_args(&self, workspace: &Path, network: bool, cwd: &str) -> Vec<String> {
        let mut args: Vec<String> = [
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
        ]
        .map(str::to_owned)
        .to_vec();
        if !network {
            args.push("--unshare-net".to_owned());
        }
        match self.setpriv {
            // Root: no user namespace (the jailed uid is a real one); setpriv needs these
            // two capabilities to drop to it, and drops every capability with them.
            Some(_) => args.extend(["--cap-add", "CAP_SETUID,CAP_SETGID"].map(str::to_owned)),
            None => args.extend(
                [
                    "--unshare-user",
                    "--uid",
                    &JAIL_UID.to_string(),
                    "--gid",
                    &JAIL_UID.to_string(),
                    "--cap-drop",
                    "ALL",
                ]
                .map(str::to_owned),
            ),
        }
        let etc_entries = ETC_ENTRIES.iter().chain(
            network
                .then_some(NETWORK_ETC_ENTRIES.iter())
                .into_iter()
                .flatten(),
        );
        for dir in SYSTEM_DIRS.iter().chain(etc_entries) {
            args.extend(["--ro-bind-try", dir, dir].map(str::to_owned));
        }
        args.extend(
            [
                "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
            ]
            .map(str::to_owned),
        );
        args.extend(["--perms", "1777", "--tmpfs", "/var/tmp"].map(str::to_owned));
        args.push("--bind".to_owned());
        args.push(workspace.to_string_lossy().into_owned());
        args.push(JAIL_WORKSPACE.to_owned());
        args.extend(["--remount-ro", "/", "--chdir", cwd].map(str::to_owned));
        args
    }

    /// Runs `id -u`, the capability set and a write to `/` in a jail of a scratch sandbox.
    fn self_test(&self) -> Result<(), JailError> {
        let probe = JobSandbox::new(".probe");
        let script = "id -u; grep '^CapEff' /proc/self/status; \
                      if touch /probe-write 2>/dev/null; then echo root-writable; fi";
        let argv = ["/bin/sh", "-c", script].map(str::to_owned);
        let spec = self.run_spec(
            &probe,
            &argv,
            &BTreeMap::new(),
            None,
            Duration::from_secs(10),
        )?;
        let (program, args) = spec
            .argv
            .split_first()
            .ok_or_else(|| JailError::SelfTest("empty command".to_owned()))?;
        let output = std::process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(&spec.env)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|err| JailError::SelfTest(format!("bwrap did not start: {err}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let mut lines = stdout.lines();
        let uid = lines.next().unwrap_or_default().trim();
        let caps = lines.next().unwrap_or_default();
        if !output.status.success() || uid != JAIL_UID.to_string() {
            return Err(JailError::SelfTest(format!(
                "expected uid {JAIL_UID}, got {uid:?} ({}): {}",
                output.status,
                stderr.trim()
            )));
        }
        if !caps.ends_with("0000000000000000") {
            return Err(JailError::SelfTest(format!(
                "the jailed command keeps capabilities: {caps}"
            )));
        }
        if stdout.contains("root-writable") {
            return Err(JailError::SelfTest(
                "the jail's root is writable".to_owned(),
            ));
        }
        Ok(())
    }
}

/// The working directory in the jail: `cwd` when it is `/workspace`, a path below it or a
/// relative path (taken below it), with no `..` step; else `/workspace`.
pub fn jail_cwd(cwd: Option<&str>) -> String {
    let Some(cwd) = cwd.map(str::trim).filter(|cwd| !cwd.is_empty()) else {
        return JAIL_WORKSPACE.to_owned();
    };
    let relative = match cwd.strip_prefix(JAIL_WORKSPACE) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
        Some(_) => return JAIL_WORKSPACE.to_owned(),
        None if cwd.starts_with('/') => return JAIL_WORKSPACE.to_owned(),
        None => cwd,
    };
    if relative
        .split('/')
        .any(|step| step == ".." || step.contains('\0'))
    {
        return JAIL_WORKSPACE.to_owned();
    }
    let relative = relative.trim_end_matches('/');
    match relative.is_empty() {
        true => JAIL_WORKSPACE.to_owned(),
        false => format!("{JAIL_WORKSPACE}/{relative}"),
    }
}

/// bubblewrap's environment arguments: cleared, then `HOME`, `PATH`, `LANG`, then the job's
/// variables except credentials and the three fixed ones.
fn jail_env(env: &BTreeMap<String, String>) -> Vec<String> {
    let mut args = vec!["--clearenv".to_owned()];
    let fixed = [
        ("HOME", JAIL_WORKSPACE),
        ("PATH", JAIL_PATH),
        ("LANG", "C.UTF-8"),
    ];
    for (name, value) in fixed {
        args.extend(["--setenv", name, value].map(str::to_owned));
    }
    for (name, value) in env {
        let fixed_name = fixed
            .iter()
            .any(|(fixed, _)| fixed.eq_ignore_ascii_case(name));
        if fixed_name || is_secret_env_name(name) || name.is_empty() || name.contains('=') {
            continue;
        }
        args.extend(["--setenv".to_owned(), name.clone(), value.clone()]);
    }
    args
}

/// The first executable `name` in [`HELPER_DIRS`].
fn find_helper(name: &str) -> Option<PathBuf> {
    HELPER_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_directory_never_leaves_the_workspace() {
        for (cwd, expected) in [
            (None, "/workspace"),
            (Some(""), "/workspace"),
            (Some("/workspace"), "/workspace"),
            (Some("/workspace/"), "/workspace"),
            (Some("/workspace/src/"), "/workspace/src"),
            (Some("src/lib"), "/workspace/src/lib"),
            (Some("/workspace/../etc"), "/workspace"),
            (Some("../.."), "/workspace"),
            (Some("a/../../b"), "/workspace"),
            (Some("/etc"), "/workspace"),
            (Some("/workspaces"), "/workspace"),
        ] {
            assert_eq!(jail_cwd(cwd), expected, "{cwd:?}");
        }
    }

    #[test]
    fn credentials_and_fixed_names_never_enter_the_environment() {
        let env = BTreeMap::from([
            ("OPENAI_API_KEY".to_owned(), "sk".to_owned()),
            ("github_token".to_owned(), "t".to_owned()),
            ("DB_PASSWORD".to_owned(), "p".to_owned()),
            ("PATH".to_owned(), "/evil".to_owned()),
            ("home".to_owned(), "/root".to_owned()),
            ("GREETING".to_owned(), "hi".to_owned()),
        ]);
        let args = jail_env(&env).join(" ");
        assert!(args.starts_with("--clearenv "), "{args}");
        assert!(args.contains("--setenv GREETING hi"), "{args}");
        for leaked in [
            "sk",
            "OPENAI",
            "github_token",
            "DB_PASSWORD",
            "/evil",
            "/root",
        ] {
            assert!(!args.contains(leaked), "{leaked} in {args}");
        }
    }

    #[test]
    fn a_slug_that_is_not_one_folder_gets_no_workspace() {
        let root = tempfile::tempdir().expect("tempdir");
        let jail = Jail {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            prlimit: PathBuf::from("/usr/bin/prlimit"),
            setpriv: None,
            root: root.path().to_path_buf(),
        };
        for slug in ["..", ".", "a/b", "", "../x", "A", "a\0"] {
            assert!(
                matches!(
                    jail.workspace(&JobSandbox::new(slug)),
                    Err(JailError::UnsafeSlug(_))
                ),
                "{slug:?}"
            );
        }
        let made = jail
            .workspace(&JobSandbox::new("agent-main-f331f052"))
            .expect("a plain slug");
        assert_eq!(made, root.path().join("agent-main-f331f052"));
        assert!(made.is_dir());
    }

    #[test]
    fn a_workspace_that_is_a_link_is_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        let elsewhere = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(elsewhere.path(), root.path().join("linked")).expect("symlink");
        let jail = Jail {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            prlimit: PathBuf::from("/usr/bin/prlimit"),
            setpriv: None,
            root: root.path().to_path_buf(),
        };
        assert!(matches!(
            jail.workspace(&JobSandbox::new("linked")),
            Err(JailError::Workspace { .. })
        ));
    }
}
