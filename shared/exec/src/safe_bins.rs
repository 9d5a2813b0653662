//! Safe bins (spec §7.6): stdin-only filters that may run without an allowlist entry when
//! their arguments pass a per-binary profile and the binary lives in a trusted folder.
//!
//! A segment is a safe-bin use when all hold: the node is not Windows; the lowercased
//! executable name is in the safe-bin list; it resolved; the folder of its **real path** is a
//! trusted folder (`/bin`, `/usr/bin`, plus configured ones; PATH is never trusted); a profile
//! exists for the name; and the arguments pass [`validate_safe_bin_args`].
//!
//! clawless is stricter than OpenClaw in two places, each a deviation with its attack:
//! - `safe-bin-real-path`: the trusted-folder check uses the real path, because the enforced
//!   command runs the real file: a link in a trusted folder pointing at a file the agent can
//!   rewrite (`/usr/local/bin/head -> ~/.local/bin/head`) would otherwise run that file;
//! - `jq-module`: a `jq` filter that uses `import` or `include` is refused, because modules
//!   are read from disk (`import "/home/me/secrets" as $s` reads `secrets.json`), which the
//!   no-file-operand rule exists to prevent.
//!
//! Short option clusters are read as OpenClaw reads them: a denied letter refuses, unknown
//! letters are skipped, and the first allowed value flag takes the rest or the next word.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::Platform;
use super::deviation::Deviation;
use super::resolve::{ExecutableResolution, dir_name};

/// The safe bins when the config names none (`tools.exec.safeBins` unset).
pub const DEFAULT_SAFE_BINS: &[&str] = &["cut", "uniq", "head", "tail", "tr", "wc"];

/// Folders whose binaries may be safe bins, before configured ones are added.
pub const DEFAULT_TRUSTED_DIRS: &[&str] = &["/bin", "/usr/bin"];

/// Never safe bins, whatever the profile says: their programs are code.
const ALWAYS_REJECTED: &[&str] = &["awk", "gawk", "mawk", "nawk", "sed", "gsed"];

/// What arguments a safe bin accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SafeBinProfile {
    /// Fewest positional arguments (`-` for stdin does not count).
    #[serde(default)]
    pub min_positional: usize,
    /// Most positional arguments; none means unlimited.
    #[serde(default)]
    pub max_positional: Option<usize>,
    /// Flags that take a value (`-n`, `--lines`); the value must be a safe literal.
    #[serde(default)]
    pub allowed_value_flags: Vec<String>,
    /// Flags that make the use unsafe (`--output`, `-o`).
    #[serde(default)]
    pub denied_flags: Vec<String>,
}

impl SafeBinProfile {
    fn new(max: usize, allowed: &[&str], denied: &[&str]) -> Self {
        Self {
            min_positional: 0,
            max_positional: Some(max),
            allowed_value_flags: allowed.iter().map(|flag| (*flag).to_owned()).collect(),
            denied_flags: denied.iter().map(|flag| (*flag).to_owned()).collect(),
        }
    }
}

/// The built-in profile for `name`, if there is one.
pub fn builtin_profile(name: &str) -> Option<SafeBinProfile> {
    let profile = match name {
        "jq" => SafeBinProfile::new(
            1,
            &["--arg", "--argjson", "--argstr"],
            &[
                "--argfile",
                "--rawfile",
                "--slurpfile",
                "--from-file",
                "--library-path",
                "-L",
                "-f",
            ],
        ),
        "grep" => SafeBinProfile::new(
            0,
            &[
                "--regexp",
                "--max-count",
                "--after-context",
                "--before-context",
                "--context",
                "--devices",
                "--binary-files",
                "--exclude",
                "--include",
                "--label",
                "-e",
                "-m",
                "-A",
                "-B",
                "-C",
                "-D",
            ],
            &[
                "--file",
                "--exclude-from",
                "--dereference-recursive",
                "--directories",
                "--recursive",
                "-f",
                "-d",
                "-r",
                "-R",
            ],
        ),
        "cut" => SafeBinProfile::new(
            0,
            &[
                "--bytes",
                "--characters",
                "--fields",
                "--delimiter",
                "--output-delimiter",
                "-b",
                "-c",
                "-f",
                "-d",
            ],
            &[],
        ),
        "sort" => SafeBinProfile::new(
            0,
            &[
                "--key",
                "--field-separator",
                "--buffer-size",
                "--parallel",
                "--batch-size",
                "-k",
                "-t",
                "-S",
            ],
            &[
                "--compress-program",
                "--files0-from",
                "--output",
                "--random-source",
                "--temporary-directory",
                "-T",
                "-o",
            ],
        ),
        "uniq" => SafeBinProfile::new(
            0,
            &[
                "--skip-fields",
                "--skip-chars",
                "--check-chars",
                "--group",
                "-f",
                "-s",
                "-w",
            ],
            &[],
        ),
        "head" => SafeBinProfile::new(0, &["--lines", "--bytes", "-n", "-c"], &[]),
        "tail" => SafeBinProfile::new(
            0,
            &[
                "--lines",
                "--bytes",
                "--sleep-interval",
                "--max-unchanged-stats",
                "--pid",
                "-n",
                "-c",
            ],
            &[],
        ),
        "tr" => SafeBinProfile {
            min_positional: 1,
            max_positional: Some(2),
            ..SafeBinProfile::default()
        },
        "wc" => SafeBinProfile::new(0, &[], &["--files0-from"]),
        _ => return None,
    };
    Some(profile)
}

/// Why a safe-bin use was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SafeBinRejection {
    /// A denied flag (`sort -o`).
    #[error("flag {0} is denied")]
    DeniedFlag(String),
    /// A flag the profile does not know, or an ambiguous abbreviation.
    #[error("flag {0} is not allowed")]
    UnknownFlag(String),
    /// A value flag with nothing after it.
    #[error("flag {0} needs a value")]
    MissingValue(String),
    /// A path, glob or otherwise unsafe word.
    #[error("{0:?} is not a safe literal")]
    UnsafeLiteral(String),
    /// Too few or too many positional arguments.
    #[error("{count} positional arguments (allowed {min}..={max})")]
    PositionalCount {
        /// How many there were.
        count: usize,
        /// The profile's minimum.
        min: usize,
        /// The profile's maximum (`usize::MAX` when unlimited).
        max: usize,
    },
    /// A semantic rule of the binary (jq reading the environment, awk/sed programs).
    #[error("{0}")]
    Semantic(String),
}

/// True for a word that is neither path-like nor a glob (`-` for stdin is fine).
pub fn is_safe_literal(word: &str) -> bool {
    if word == "-" {
        return true;
    }
    let bytes = word.as_bytes();
    let drive = bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'\\' | b'/');
    let path_like = word.starts_with("./")
        || word.starts_with("../")
        || word.starts_with('~')
        || word.starts_with('/')
        || drive;
    !path_like && !word.contains(['*', '?', '[', ']'])
}

/// Validates a safe bin's arguments (`argv[1..]`) against its profile and semantic rules.
pub fn validate_safe_bin_args(
    name: &str, profile: &SafeBinProfile, args: &[String],
) -> Result<(), SafeBinRejection> {
    validate_args(name, profile, args, true)
}

/// [`validate_safe_bin_args`], with clawless's `jq` module rule only when `modules_refused`
/// (OpenClaw's validator has none).
fn validate_args(
    name: &str, profile: &SafeBinProfile, args: &[String], modules_refused: bool,
) -> Result<(), SafeBinRejection> {
    if ALWAYS_REJECTED.contains(&name) {
        return Err(SafeBinRejection::Semantic(format!(
            "{name} programs are code and never safe"
        )));
    }
    let allowed: BTreeSet<&str> = profile
        .allowed_value_flags
        .iter()
        .map(String::as_str)
        .collect();
    let denied: BTreeSet<&str> = profile.denied_flags.iter().map(String::as_str).collect();
    let mut positionals: Vec<&str> = Vec::new();
    let mut index = 0;
    let mut options_done = false;
    while let Some(word) = args.get(index) {
        index += 1;
        if options_done || word == "-" || !word.starts_with('-') {
            if word != "-" {
                if !is_safe_literal(word) {
                    return Err(SafeBinRejection::UnsafeLiteral(word.clone()));
                }
                positionals.push(word);
            }
            continue;
        }
        if word == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (given, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let flag = resolve_long(given, &allowed, &denied)
                .ok_or_else(|| SafeBinRejection::UnknownFlag(word.clone()))?;
            if denied.contains(flag.as_str()) {
                return Err(SafeBinRejection::DeniedFlag(word.clone()));
            }
            let value = match inline {
                Some(value) => value,
                None => {
                    let next = args
                        .get(index)
                        .ok_or_else(|| SafeBinRejection::MissingValue(word.clone()))?;
                    index += 1;
                    next.as_str()
                }
            };
            if !is_safe_literal(value) {
                return Err(SafeBinRejection::UnsafeLiteral(value.to_owned()));
            }
            continue;
        }
        // A short cluster, read as OpenClaw reads it: a denied letter refuses; letters the
        // profile does not know are skipped as booleans; the first allowed value flag takes the
        // rest of the cluster or the next word. A cluster without one is refused, so lone
        // boolean flags (`wc -l`, `sort -r`) are not safe-bin uses.
        let cluster = &word[1..];
        let mut taken = false;
        for (offset, letter) in cluster.char_indices() {
            let flag = format!("-{letter}");
            if denied.contains(flag.as_str()) {
                return Err(SafeBinRejection::DeniedFlag(flag));
            }
            if !allowed.contains(flag.as_str()) {
                continue;
            }
            let rest = &cluster[offset + letter.len_utf8()..];
            let value = if rest.is_empty() {
                let next = args
                    .get(index)
                    .ok_or_else(|| SafeBinRejection::MissingValue(flag.clone()))?;
                index += 1;
                next.as_str()
            } else {
                rest
            };
            if !is_safe_literal(value) {
                return Err(SafeBinRejection::UnsafeLiteral(value.to_owned()));
            }
            taken = true;
            break;
        }
        if !taken {
            return Err(SafeBinRejection::UnknownFlag(word.clone()));
        }
    }
    let max = profile.max_positional.unwrap_or(usize::MAX);
    if positionals.len() < profile.min_positional || positionals.len() > max {
        return Err(SafeBinRejection::PositionalCount {
            count: positionals.len(),
            min: profile.min_positional,
            max,
        });
    }
    if name == "jq" {
        for filter in &positionals {
            jq_filter_rule(filter, modules_refused)?;
        }
    }
    Ok(())
}

/// Resolves a long option name, exactly or as a unique GNU-style prefix of a known flag.
fn resolve_long(given: &str, allowed: &BTreeSet<&str>, denied: &BTreeSet<&str>) -> Option<String> {
    let full = format!("--{given}");
    let known = allowed
        .iter()
        .chain(denied.iter())
        .filter(|flag| flag.starts_with("--"));
    if allowed.contains(full.as_str()) || denied.contains(full.as_str()) {
        return Some(full);
    }
    if given.is_empty() {
        return None;
    }
    let mut matches = known.filter(|flag| flag.starts_with(full.as_str()));
    let first = matches.next()?;
    match matches.next() {
        Some(_) => None,
        None => Some((*first).to_owned()),
    }
}

/// `jq` filters may not read the environment (`env`, `$ENV`), nor (clawless,
/// `modules_refused`) load modules.
fn jq_filter_rule(filter: &str, modules_refused: bool) -> Result<(), SafeBinRejection> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let reads = |needle: &str, before_ok: &dyn Fn(Option<char>) -> bool| {
        filter.match_indices(needle).any(|(at, _)| {
            let before = filter[..at].chars().next_back();
            let after = filter[at + needle.len()..].chars().next();
            before_ok(before) && !after.is_some_and(word)
        })
    };
    let env_call = reads("env", &|before| {
        !before.is_some_and(|c| c == '.' || c == '$' || word(c))
    });
    let env_var = reads("$ENV", &|_| true);
    if env_call || env_var {
        return Err(SafeBinRejection::Semantic(
            "jq filter reads the environment".into(),
        ));
    }
    let module = modules_refused
        && (reads("import", &|before| !before.is_some_and(word))
            || reads("include", &|before| !before.is_some_and(word)));
    if module {
        return Err(SafeBinRejection::Semantic("jq filter loads modules".into()));
    }
    Ok(())
}

/// The safe-bin configuration of a policy, resolved once.
#[derive(Debug, Clone)]
pub struct SafeBins {
    names: BTreeSet<String>,
    profiles: BTreeMap<String, SafeBinProfile>,
    trusted_dirs: Vec<String>,
}

impl SafeBins {
    /// `names`: `None` = the default list, `Some([])` = none. Configured `profiles` replace
    /// built-ins of the same name and add new ones. `trusted_dirs` are added to `/bin` and
    /// `/usr/bin`.
    pub fn new(
        names: Option<&[String]>, profiles: &BTreeMap<String, SafeBinProfile>,
        trusted_dirs: &[String],
    ) -> Self {
        let names = match names {
            Some(list) => list
                .iter()
                .map(|name| name.trim().to_ascii_lowercase())
                .filter(|name| !name.is_empty())
                .collect(),
            None => DEFAULT_SAFE_BINS
                .iter()
                .map(|name| (*name).to_owned())
                .collect(),
        };
        let profiles = profiles
            .iter()
            .map(|(name, profile)| (name.trim().to_ascii_lowercase(), profile.clone()))
            .collect();
        let mut dirs: Vec<String> = DEFAULT_TRUSTED_DIRS
            .iter()
            .map(|dir| (*dir).to_owned())
            .collect();
        for dir in trusted_dirs {
            let trimmed = trim_dir(dir);
            if !trimmed.is_empty() && !dirs.iter().any(|known| known == trimmed) {
                dirs.push(trimmed.to_owned());
            }
        }
        Self {
            names,
            profiles,
            trusted_dirs: dirs,
        }
    }

    /// The trusted folders (defaults first).
    pub fn trusted_dirs(&self) -> &[String] {
        &self.trusted_dirs
    }

    /// True when `real_path`'s folder is a trusted folder.
    pub fn is_trusted_file(&self, real_path: &str) -> bool {
        let dir = trim_dir(dir_name(real_path));
        self.trusted_dirs.iter().any(|trusted| trusted == dir)
    }

    /// The profile for a name: configured first, then built-in.
    pub fn profile(&self, name: &str) -> Option<SafeBinProfile> {
        self.profiles
            .get(name)
            .cloned()
            .or_else(|| builtin_profile(name))
    }

    /// Why this segment is or is not a safe-bin use (`Ok` = it is).
    pub fn check(
        &self, platform: Platform, resolution: &ExecutableResolution, args: &[String],
    ) -> Result<(), String> {
        if platform.is_windows() {
            return Err("safe bins are disabled on Windows".into());
        }
        let name = resolution.executable_name.to_ascii_lowercase();
        if !self.names.contains(&name) {
            return Err(format!("{name} is not a safe bin"));
        }
        let Some(real) = resolution.resolved_real_path.as_deref() else {
            return Err(format!("{name} did not resolve"));
        };
        if !self.is_trusted_file(real) {
            return Err(format!("{real} is not in a trusted folder"));
        }
        let Some(profile) = self.profile(&name) else {
            return Err(format!("{name} has no safe-bin profile"));
        };
        validate_safe_bin_args(&name, &profile, args).map_err(|err| err.to_string())
    }

    /// The clawless rule that refuses a use OpenClaw's node would accept as a safe bin
    /// (`safe-bin-real-path` or `jq-module`); `None` when [`check`](Self::check) accepts it or
    /// OpenClaw refuses it too. OpenClaw trusts the folder of the resolved path (not the real
    /// one) and has no `jq` module rule.
    pub fn stricter_rule(
        &self, platform: Platform, resolution: &ExecutableResolution, args: &[String],
    ) -> Option<Deviation> {
        if platform.is_windows() || self.check(platform, resolution, args).is_ok() {
            return None;
        }
        let name = resolution.executable_name.to_ascii_lowercase();
        let resolved = resolution.resolved_path.as_deref()?;
        let profile = self.profile(&name)?;
        let openclaw_accepts = self.names.contains(&name)
            && self
                .trusted_dirs
                .iter()
                .any(|dir| dir == dir_name(resolved))
            && validate_args(&name, &profile, args, false).is_ok();
        if !openclaw_accepts {
            return None;
        }
        let real_trusted = resolution
            .resolved_real_path
            .as_deref()
            .is_some_and(|real| self.is_trusted_file(real));
        Some(if real_trusted {
            Deviation::JqModule
        } else {
            Deviation::SafeBinRealPath
        })
    }
}

fn trim_dir(dir: &str) -> &str {
    if dir == "/" {
        dir
    } else {
        dir.trim_end_matches('/')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &[&str]) -> Vec<String> {
        text.iter().map(|word| (*word).to_owned()).collect()
    }

    fn valid(name: &str, args: &[&str]) -> bool {
        let profile = builtin_profile(name).unwrap_or_default();
        validate_safe_bin_args(name, &profile, &words(args)).is_ok()
    }

    #[test]
    fn jq_spec_vectors_hold() {
        assert!(valid("jq", &[".foo"]));
        assert!(!valid("jq", &["env"]));
        assert!(!valid("jq", &["$ENV"]));
        assert!(!valid("jq", &["($ENV).OPENAI_API_KEY"]));
        assert!(!valid("jq", &[".foo", "secret.json"]));
    }

    #[test]
    fn jq_field_access_named_env_is_not_the_env_builtin() {
        assert!(valid("jq", &[".env"]));
        assert!(valid("jq", &[".environment"]));
        assert!(!valid("jq", &["env.HOME"]));
    }

    #[test]
    fn jq_modules_are_refused() {
        assert!(!valid("jq", &["import \"x\" as y; .a"]));
        assert!(!valid("jq", &["include \"x\"; .a"]));
    }

    #[test]
    fn awk_and_sed_are_refused_even_with_a_profile() {
        let profile = SafeBinProfile {
            max_positional: Some(5),
            ..SafeBinProfile::default()
        };
        for name in ["awk", "gawk", "mawk", "nawk", "sed", "gsed"] {
            assert!(
                validate_safe_bin_args(name, &profile, &words(&["BEGIN { system(\"id\") }"]))
                    .is_err()
            );
            assert!(validate_safe_bin_args(name, &profile, &words(&["e"])).is_err());
        }
    }

    #[test]
    fn sort_spec_vectors_hold() {
        for args in [
            &["-o", "x"][..],
            &["-ox"],
            &["--output=x"],
            &["--output", "x"],
            &["--compress-prog=sh"],
            &["--files0-fro=list"],
            &["-T", "/tmp"],
            &["--random-source=/dev/urandom"],
            &["--temporary-directory=tmpdir"],
            &["--totally-unknown=1"],
            &["--f=1"],
            &["--key"],
            &["--key", "./fields.txt"],
        ] {
            assert!(!valid("sort", args), "{args:?}");
        }
        for args in [&["-S", "1M"][..], &["--key=1,1"], &["--ke=1,1"]] {
            assert!(valid("sort", args), "{args:?}");
        }
    }

    #[test]
    fn grep_spec_vectors_hold() {
        for args in [
            &["-R", "x"][..],
            &["--recursive", "x"],
            &["--file", "x"],
            &["-e", "needle", ".env"],
            &["-e", "needle", "--", ".env"],
            &["needle"],
        ] {
            assert!(!valid("grep", args), "{args:?}");
        }
        for args in [
            &["-e", "needle"][..],
            &["--regexp=needle"],
            &["-e", "needle", "--", "-"],
        ] {
            assert!(valid("grep", args), "{args:?}");
        }
    }

    #[test]
    fn tr_takes_no_flags_and_one_or_two_operands() {
        assert!(!valid("tr", &["-S", "a", "b"]));
        assert!(valid("tr", &["a", "b"]));
        assert!(!valid("tr", &[]));
        assert!(!valid("tr", &["a", "b", "c"]));
    }

    #[test]
    fn boolean_flags_are_unknown_to_profiles_as_the_spec_notes() {
        assert!(!valid("wc", &["-l"]));
        assert!(!valid("sort", &["-r"]));
        assert!(!valid("uniq", &["-c"]));
        assert!(!valid("head", &["-5"]));
        assert!(valid("head", &["-n", "5"]));
        assert!(valid("head", &["-n5"]));
    }

    #[test]
    fn paths_and_globs_are_not_safe_literals() {
        for word in [
            "./x",
            "../x",
            "~/x",
            "/etc/passwd",
            "C:\\x",
            "*.ts",
            "a?",
            "[x]",
        ] {
            assert!(!is_safe_literal(word), "{word}");
        }
        for word in ["-", ".foo", "needle", "1,1", ".env"] {
            assert!(is_safe_literal(word), "{word}");
        }
    }

    fn resolution(name: &str, real: &str) -> ExecutableResolution {
        ExecutableResolution {
            raw_executable: name.into(),
            resolved_path: Some(real.into()),
            resolved_real_path: Some(real.into()),
            executable_name: name.into(),
        }
    }

    #[test]
    fn only_trusted_folders_hold_safe_bins_and_path_is_never_trusted() {
        let bins = SafeBins::new(Some(&words(&["jq", "head"])), &BTreeMap::new(), &[]);
        let args = words(&[".foo"]);
        assert!(
            bins.check(Platform::Linux, &resolution("jq", "/usr/bin/jq"), &args)
                .is_ok()
        );
        assert!(
            bins.check(
                Platform::Linux,
                &resolution("jq", "/tmp/evil-bin/jq"),
                &args
            )
            .is_err()
        );
        let head = words(&["-n", "1"]);
        assert!(
            bins.check(
                Platform::Linux,
                &resolution("head", "/usr/local/bin/head"),
                &head
            )
            .is_err()
        );
        let configured = SafeBins::new(None, &BTreeMap::new(), &["/usr/local/bin/".into()]);
        assert!(
            configured
                .check(
                    Platform::Linux,
                    &resolution("head", "/usr/local/bin/head"),
                    &head
                )
                .is_ok()
        );
    }

    #[test]
    fn the_default_list_excludes_jq_grep_and_sort_and_an_empty_list_has_none() {
        let defaults = SafeBins::new(None, &BTreeMap::new(), &[]);
        assert!(
            defaults
                .check(
                    Platform::Linux,
                    &resolution("jq", "/usr/bin/jq"),
                    &words(&[".a"])
                )
                .is_err()
        );
        assert!(
            defaults
                .check(Platform::Linux, &resolution("wc", "/usr/bin/wc"), &[])
                .is_ok()
        );
        let none = SafeBins::new(Some(&[]), &BTreeMap::new(), &[]);
        assert!(
            none.check(Platform::Linux, &resolution("wc", "/usr/bin/wc"), &[])
                .is_err()
        );
    }

    #[test]
    fn an_unprofiled_safe_bin_is_ignored_and_windows_has_none() {
        let bins = SafeBins::new(Some(&words(&["python3", "wc"])), &BTreeMap::new(), &[]);
        let python = resolution("python3", "/usr/bin/python3");
        assert!(
            bins.check(Platform::Linux, &python, &words(&["-c", "print('owned')"]))
                .is_err()
        );
        assert!(
            bins.check(Platform::Windows, &resolution("wc", "/usr/bin/wc"), &[])
                .is_err()
        );
    }

    #[test]
    fn configured_profiles_replace_builtins_and_add_new_bins() {
        let profiles = BTreeMap::from([
            (
                "wc".to_owned(),
                SafeBinProfile {
                    max_positional: Some(0),
                    allowed_value_flags: vec![],
                    denied_flags: vec![],
                    min_positional: 1,
                },
            ),
            (
                "rev".to_owned(),
                SafeBinProfile {
                    max_positional: Some(0),
                    ..SafeBinProfile::default()
                },
            ),
        ]);
        let bins = SafeBins::new(Some(&words(&["wc", "rev"])), &profiles, &[]);
        assert!(
            bins.check(Platform::Linux, &resolution("wc", "/usr/bin/wc"), &[])
                .is_err()
        );
        assert!(
            bins.check(Platform::Linux, &resolution("rev", "/usr/bin/rev"), &[])
                .is_ok()
        );
    }
}
