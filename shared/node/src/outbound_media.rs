//! The files a command names on `MEDIA:` lines of its output, read for upload with its report
//! (spec `openclaw-tools.md` §3.7, §3.10): in OpenClaw `echo MEDIA:/path/chart.png` attaches the
//! file to the reply; here the path is on this node's disk, so the node sends the bytes with
//! the result, or says why it did not.
//!
//! Stricter than OpenClaw: only a **regular file** under the command's **working directory**
//! or the node's **temp directory** (a sandboxed command: only its sandbox folder), found
//! after every symlink is resolved; never `~`, a `..` step, a URL, the node host's own state
//! folder, or the whole disk (a working directory of `/` counts for nothing). At most
//! [`MAX_MEDIA_FILE_BYTES`] a file, [`MAX_MEDIA_REPORT_BYTES`] and [`MAX_MEDIA_FILES`] a
//! report. Output that does not contain `MEDIA:` is never scanned.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use clawless_base::media_lines::{MAX_MEDIA_CANDIDATE_CHARS, media_candidates, mentions_media};
use clawless_exec::node::media::{
    MAX_MEDIA_FILE_BYTES, MAX_MEDIA_FILES, MAX_MEDIA_REPORT_BYTES, NodeFile, RefusedFile,
};

use crate::jail::{JAIL_WORKSPACE, jail_cwd};

/// Where a command ran, as far as its `MEDIA:` paths are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaPlace {
    /// On this machine: relative paths are taken from `cwd`; files under `cwd` or `temp`
    /// may go.
    Host {
        /// The command's working directory (absolute).
        cwd: PathBuf,
        /// The node's temp directory.
        temp: PathBuf,
    },
    /// In the jail: paths are the jail's (`/workspace/…`, or relative to `cwd`); only files
    /// in the sandbox folder bound as `/workspace` may go.
    Jail {
        /// The host folder bound as `/workspace`.
        workspace: PathBuf,
        /// The job's working directory as the jail saw it (`/workspace/…`).
        cwd: String,
    },
}

impl MediaPlace {
    /// The place of a bare-host job whose `cwd` (absent: the node's own) may be relative.
    pub fn host(cwd: Option<&str>) -> Self {
        let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Self::Host {
            cwd: cwd.map_or_else(|| here.clone(), |cwd| here.join(cwd)),
            temp: std::env::temp_dir(),
        }
    }

    /// The place of a jailed job: its sandbox folder and its working directory in the jail.
    pub fn jail(workspace: PathBuf, cwd: Option<&str>) -> Self {
        Self::Jail {
            workspace,
            cwd: jail_cwd(cwd),
        }
    }

    /// The folders files may come from, with every link resolved; the filesystem root never
    /// counts.
    fn roots(&self) -> Vec<PathBuf> {
        let folders: Vec<&Path> = match self {
            Self::Host { cwd, temp } => vec![cwd, temp],
            Self::Jail { workspace, .. } => vec![workspace],
        };
        folders
            .into_iter()
            .filter_map(|folder| std::fs::canonicalize(folder).ok())
            .filter(|folder| folder.parent().is_some())
            .collect()
    }

    /// Where `candidate` is on this machine, before links are resolved.
    fn locate(&self, candidate: &str) -> Result<PathBuf, String> {
        match self {
            Self::Host { cwd, .. } => Ok(cwd.join(candidate)),
            Self::Jail { workspace, cwd } => {
                let in_jail = if candidate.starts_with('/') {
                    candidate.to_owned()
                } else {
                    format!("{cwd}/{candidate}")
                };
                match in_jail.strip_prefix(JAIL_WORKSPACE) {
                    Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                        Ok(workspace.join(rest.trim_start_matches('/')))
                    }
                    _ => Err(OUTSIDE.to_owned()),
                }
            }
        }
    }
}

/// The reason for a file outside the places files may come from.
pub const OUTSIDE: &str = "outside the command's directory";

/// What a command's output asks to upload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectedMedia {
    /// The files read, in the order their lines appear.
    pub files: Vec<NodeFile>,
    /// The lines whose files are not sent, with the reason.
    pub refused: Vec<RefusedFile>,
}

/// Reads the files `stdout`'s `MEDIA:` lines name, from `place`, never from under one of
/// `excluded` (the node host's own state). A path named twice is read once.
pub fn collect_media(stdout: &str, place: &MediaPlace, excluded: &[PathBuf]) -> CollectedMedia {
    let mut collected = CollectedMedia::default();
    if !mentions_media(stdout) {
        return collected;
    }
    let roots = place.roots();
    let excluded: Vec<PathBuf> = excluded
        .iter()
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect();
    let mut seen = BTreeSet::new();
    let mut total: u64 = 0;
    for candidate in media_candidates(stdout) {
        if !seen.insert(candidate) {
            continue;
        }
        let read = if collected.files.len() >= MAX_MEDIA_FILES {
            Err(format!("more than {MAX_MEDIA_FILES} files in one result"))
        } else {
            read_file(
                candidate,
                place,
                &roots,
                &excluded,
                MAX_MEDIA_REPORT_BYTES - total,
            )
        };
        match read {
            Ok((name, bytes)) => {
                total += bytes.len() as u64;
                collected
                    .files
                    .push(NodeFile::new(candidate, &name, &bytes));
            }
            Err(reason) => collected.refused.push(RefusedFile {
                path: candidate.to_owned(),
                reason,
            }),
        }
    }
    collected
}

/// The name and bytes of the file `candidate` names, or why it is not sent. `budget` is what
/// is left of the report's total.
fn read_file(
    candidate: &str, place: &MediaPlace, roots: &[PathBuf], excluded: &[PathBuf], budget: u64,
) -> Result<(String, Vec<u8>), String> {
    check_candidate(candidate)?;
    let path = place.locate(candidate)?;
    let real = std::fs::canonicalize(&path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        _ => "unreadable".to_owned(),
    })?;
    if !roots.iter().any(|root| real.starts_with(root)) {
        return Err(OUTSIDE.to_owned());
    }
    if excluded.iter().any(|folder| real.starts_with(folder)) {
        return Err("the node host's own files are not sent".to_owned());
    }
    // Checked before opening: opening a FIFO for reading would wait for a writer.
    let metadata = std::fs::metadata(&real).map_err(|_| "unreadable".to_owned())?;
    if !metadata.is_file() {
        return Err("not a file".to_owned());
    }
    // The final step never through a link (it was resolved above; a swap since is refused),
    // and never blocking.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&real)
        .map_err(|_| "unreadable".to_owned())?;
    let metadata = file.metadata().map_err(|_| "unreadable".to_owned())?;
    if !metadata.is_file() {
        return Err("not a file".to_owned());
    }
    let limit = MAX_MEDIA_FILE_BYTES.min(budget);
    let too_large = |size: u64| {
        if size > MAX_MEDIA_FILE_BYTES {
            format!("larger than {} MB", MAX_MEDIA_FILE_BYTES / (1024 * 1024))
        } else {
            format!(
                "over the {} MB limit for one command's files",
                MAX_MEDIA_REPORT_BYTES / (1024 * 1024)
            )
        }
    };
    if metadata.len() > limit {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| "unreadable".to_owned())?;
    if bytes.len() as u64 > limit {
        // It grew while being read.
        return Err(too_large(bytes.len() as u64));
    }
    let name = real.file_name().map_or_else(
        || "file".to_owned(),
        |name| name.to_string_lossy().into_owned(),
    );
    Ok((name, bytes))
}

/// Refuses what is never a file on this node, before the disk is touched.
fn check_candidate(candidate: &str) -> Result<(), String> {
    if candidate.is_empty() {
        return Err("names no file".to_owned());
    }
    if candidate.chars().count() > MAX_MEDIA_CANDIDATE_CHARS {
        return Err(format!(
            "longer than {MAX_MEDIA_CANDIDATE_CHARS} characters"
        ));
    }
    if candidate.chars().any(char::is_control) {
        return Err("contains control characters".to_owned());
    }
    if candidate.contains("://") {
        return Err("only files on the node host are sent, not URLs".to_owned());
    }
    if candidate.starts_with('~') {
        return Err("paths under a home directory (~) are not sent".to_owned());
    }
    if Path::new(candidate)
        .components()
        .any(|step| step == Component::ParentDir)
    {
        return Err("paths with `..` steps are not sent".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn host(cwd: &Path, temp: &Path) -> MediaPlace {
        MediaPlace::Host {
            cwd: cwd.to_path_buf(),
            temp: temp.to_path_buf(),
        }
    }

    fn reasons(collected: &CollectedMedia) -> Vec<(&str, &str)> {
        collected
            .refused
            .iter()
            .map(|refused| (refused.path.as_str(), refused.reason.as_str()))
            .collect()
    }

    #[test]
    fn output_without_the_token_is_not_scanned() {
        let collected = collect_media("plain output\n", &MediaPlace::host(None), &[]);
        assert_eq!(collected, CollectedMedia::default());
    }

    #[test]
    fn files_in_the_working_or_temp_directory_are_read_and_the_rest_refused() {
        let cwd = tempfile::tempdir().unwrap();
        let temp = tempfile::tempdir().unwrap();
        std::fs::write(cwd.path().join("chart.png"), b"PNG").unwrap();
        std::fs::write(temp.path().join("t.txt"), b"tmp").unwrap();
        std::fs::create_dir(cwd.path().join("dir")).unwrap();
        symlink("/etc/passwd", cwd.path().join("passwd-link")).unwrap();
        let stdout = format!(
            "MEDIA:./chart.png\nMEDIA: `{}`\nMEDIA:{}/t.txt\nMEDIA:/etc/passwd\nMEDIA:passwd-link\n\
             MEDIA:dir\nMEDIA:../x\nMEDIA:~/x\nMEDIA:https://e.com/a.png\nMEDIA:missing.png\n\
             MEDIA:./chart.png\n```\nMEDIA:/etc/hosts\n```\n",
            cwd.path().join("chart.png").display(),
            temp.path().display(),
        );
        let collected = collect_media(&stdout, &host(cwd.path(), temp.path()), &[]);
        let names: Vec<(&str, &str)> = collected
            .files
            .iter()
            .map(|file| (file.path.as_str(), file.name.as_str()))
            .collect();
        let absolute = cwd.path().join("chart.png").display().to_string();
        let in_temp = format!("{}/t.txt", temp.path().display());
        assert_eq!(
            names,
            vec![
                ("./chart.png", "chart.png"),
                (absolute.as_str(), "chart.png"),
                (in_temp.as_str(), "t.txt"),
            ]
        );
        assert_eq!(collected.files[0].bytes(10), Some(b"PNG".to_vec()));
        assert_eq!(collected.files[0].mime, "image/png");
        assert_eq!(
            reasons(&collected),
            vec![
                ("/etc/passwd", OUTSIDE),
                ("passwd-link", OUTSIDE),
                ("dir", "not a file"),
                ("../x", "paths with `..` steps are not sent"),
                ("~/x", "paths under a home directory (~) are not sent"),
                (
                    "https://e.com/a.png",
                    "only files on the node host are sent, not URLs"
                ),
                ("missing.png", "no such file"),
            ]
        );
    }

    #[test]
    fn sizes_are_capped_per_file_and_per_report() {
        let cwd = tempfile::tempdir().unwrap();
        let temp = tempfile::tempdir().unwrap();
        let mb = 1024 * 1024;
        let file = |name: &str, size: u64| {
            std::fs::write(cwd.path().join(name), vec![1_u8; size as usize]).unwrap();
        };
        file("big.bin", MAX_MEDIA_FILE_BYTES + 1);
        file("a.bin", 2 * mb);
        file("b.bin", mb);
        file("c.bin", 1);
        let collected = collect_media(
            "MEDIA:big.bin\nMEDIA:a.bin\nMEDIA:b.bin\nMEDIA:c.bin\n",
            &host(cwd.path(), temp.path()),
            &[],
        );
        let sent: Vec<&str> = collected.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(sent, vec!["a.bin", "b.bin"]);
        assert_eq!(
            reasons(&collected),
            vec![
                ("big.bin", "larger than 2 MB"),
                ("c.bin", "over the 3 MB limit for one command's files"),
            ]
        );
    }

    #[test]
    fn a_working_directory_of_root_or_the_node_state_allow_nothing() {
        let temp = tempfile::tempdir().unwrap();
        let collected = collect_media(
            "MEDIA:etc/hostname\nMEDIA:/etc/hostname",
            &host(Path::new("/"), temp.path()),
            &[],
        );
        assert!(collected.files.is_empty(), "{collected:?}");
        let state = temp.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(state.join("node.json"), b"{\"secret\":1}").unwrap();
        let collected = collect_media(
            "MEDIA:state/node.json",
            &host(temp.path(), temp.path()),
            std::slice::from_ref(&state),
        );
        assert!(collected.files.is_empty());
        assert_eq!(
            reasons(&collected),
            vec![("state/node.json", "the node host's own files are not sent")]
        );
    }

    #[test]
    fn a_jailed_command_sends_only_from_its_sandbox_folder() {
        let sandbox = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(sandbox.path().join("out")).unwrap();
        std::fs::write(sandbox.path().join("out/plot.svg"), b"<svg/>").unwrap();
        std::fs::write(outside.path().join("secret.txt"), b"no").unwrap();
        symlink(
            outside.path().join("secret.txt"),
            sandbox.path().join("out/link.txt"),
        )
        .unwrap();
        let place = MediaPlace::jail(sandbox.path().to_path_buf(), Some("/workspace/out"));
        let collected = collect_media(
            "MEDIA:/workspace/out/plot.svg\nMEDIA:plot.svg\nMEDIA:/tmp/x.png\nMEDIA:link.txt\n",
            &place,
            &[],
        );
        let sent: Vec<&str> = collected.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(sent, vec!["/workspace/out/plot.svg", "plot.svg"]);
        assert_eq!(
            reasons(&collected),
            vec![("/tmp/x.png", OUTSIDE), ("link.txt", OUTSIDE)]
        );
    }

    #[test]
    fn a_fifo_is_not_a_file_and_does_not_block() {
        let cwd = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(
            &cwd.path().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let collected = collect_media(
            "MEDIA:pipe",
            &host(cwd.path(), Path::new("/nonexistent-temp")),
            &[],
        );
        assert_eq!(reasons(&collected), vec![("pipe", "not a file")]);
    }
}
