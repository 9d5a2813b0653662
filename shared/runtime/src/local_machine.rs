//! The eligibility context of the machine this process runs on: used by local mode and the
//! CLI, where skills' commands run here. (Lambda functions ask the registered node hosts.)

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;

use clawless_skills::EligibilityContext;

/// The platform name skills use (`darwin`, `linux`, `win32`, …) for this machine.
pub fn platform_name() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

/// This machine: its platform, which of `wanted_bins` are on `PATH`, and the names of the
/// non-empty environment variables.
pub fn local_context<'a>(wanted_bins: impl IntoIterator<Item = &'a str>) -> EligibilityContext {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let bins = wanted_bins
        .into_iter()
        .filter(|bin| find_on_path(bin, &path))
        .map(str::to_owned)
        .collect();
    let env = std::env::vars_os()
        .filter(|(_, value)| !value.is_empty())
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    EligibilityContext {
        platforms: BTreeSet::from([platform_name().to_owned()]),
        bins,
        env,
    }
}

/// Whether `bin` is an executable file in one of the `PATH` directories.
pub fn find_on_path(bin: &str, path: &OsStr) -> bool {
    if bin.is_empty() || bin.contains('/') || bin.contains('\\') {
        return false;
    }
    std::env::split_paths(path).any(|dir| is_executable_file(&dir.join(bin)))
}

#[cfg(unix)]
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_real_executables_and_ignores_paths_and_plain_files() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("clawless-test-tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let data = dir.path().join("not-executable");
        std::fs::write(&data, "x").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let path = std::env::join_paths([dir.path()]).unwrap();
        assert!(find_on_path("clawless-test-tool", &path));
        assert!(!find_on_path("not-executable", &path));
        assert!(!find_on_path("missing", &path));
        assert!(
            !find_on_path(&tool.display().to_string(), &path),
            "paths are not bin names"
        );
        assert!(!find_on_path("", &path));
    }

    #[test]
    fn the_local_context_reports_this_platform_and_only_wanted_bins() {
        let context = local_context(["sh", "surely-not-a-real-binary-name"]);
        assert!(context.platforms.contains(platform_name()));
        assert!(!context.bins.contains("surely-not-a-real-binary-name"));
        #[cfg(unix)]
        assert!(context.bins.contains("sh"));
    }
}
