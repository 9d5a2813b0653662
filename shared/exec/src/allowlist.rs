//! Allowlist entries (spec §7.5): a path glob over the resolved executable, and in clawless
//! an optional `argPattern` regex that binds the arguments on every platform.
//!
//! Globs: `~` at the start is the node's home; `**` is any run of characters, `*` any run
//! without `/`, `?` one character other than `/`; everything else is literal; the whole path
//! must match. Case-sensitive, except on Windows (case-insensitive, `\` read as `/`). Only
//! patterns with `/`, `\` or `~` are paths: a basename pattern such as `rg` never matches.
//! A bare `*` (without argPattern) matches any segment, even an unresolved one.
//!
//! `argPattern` (deviation `arg-pattern`: OpenClaw honours it on Windows only, so on POSIX an
//! entry written for `git status` would allow `git -c core.pager='sh -c id' log`): the
//! arguments after the executable are rendered with
//! [`format_exec_command`](super::system_run::format_exec_command) (so `"a b"` and `a b`
//! differ) and the regex must match that text in full. An entry whose argPattern does not
//! compile matches nothing (fail closed) and [`PreparedEntry::error`] says why.

use regex::Regex;

use super::{AllowlistEntry, Platform};

/// An allowlist entry with its argPattern compiled once.
#[derive(Debug, Clone)]
pub struct PreparedEntry {
    entry: AllowlistEntry,
    args: ArgMatcher,
}

#[derive(Debug, Clone)]
enum ArgMatcher {
    Any,
    Regex(Regex),
    Invalid(String),
}

impl PreparedEntry {
    /// Compiles the entry's argPattern (anchored to the whole argument text).
    pub fn new(entry: AllowlistEntry) -> Self {
        let args = match entry.arg_pattern.as_deref() {
            None => ArgMatcher::Any,
            Some(pattern) => match Regex::new(&format!("^(?:{pattern})$")) {
                Ok(regex) => ArgMatcher::Regex(regex),
                Err(err) => ArgMatcher::Invalid(format!(
                    "allowlist entry {}: argPattern does not compile: {err}",
                    entry.pattern
                )),
            },
        };
        Self { entry, args }
    }

    /// The entry as configured.
    pub fn entry(&self) -> &AllowlistEntry {
        &self.entry
    }

    /// True when the entry binds the arguments (it has a valid argPattern).
    pub fn binds_args(&self) -> bool {
        matches!(self.args, ArgMatcher::Regex(_))
    }

    /// Why the entry can never match, when its argPattern is not a valid regex.
    pub fn error(&self) -> Option<&str> {
        match &self.args {
            ArgMatcher::Invalid(message) => Some(message),
            _ => None,
        }
    }

    /// True when the entry covers a segment whose executable resolved to `resolved_path`
    /// (real path `real_path`) with arguments rendered as `rendered_args`.
    pub fn matches(
        &self, resolved_path: Option<&str>, real_path: Option<&str>,
        rendered_args: &dyn Fn() -> String, platform: Platform, home: Option<&str>,
    ) -> bool {
        if !self.matches_path(resolved_path, real_path, platform, home) {
            return false;
        }
        match &self.args {
            ArgMatcher::Any => true,
            ArgMatcher::Regex(regex) => regex.is_match(&rendered_args()),
            ArgMatcher::Invalid(_) => false,
        }
    }

    /// True when the entry's path part covers the executable, whatever its argPattern says:
    /// how OpenClaw matches on POSIX, where it ignores argPatterns.
    pub fn matches_path(
        &self, resolved_path: Option<&str>, real_path: Option<&str>, platform: Platform,
        home: Option<&str>,
    ) -> bool {
        let pattern = self.entry.pattern.trim();
        if pattern == "*" && self.entry.arg_pattern.is_none() {
            return true;
        }
        match resolved_path {
            Some(resolved) => path_matches(pattern, resolved, real_path, platform, home),
            None => false,
        }
    }
}

/// True when the glob `pattern` covers an executable at `resolved` (real path `real`).
pub fn path_matches(
    pattern: &str, resolved: &str, real: Option<&str>, platform: Platform, home: Option<&str>,
) -> bool {
    if !(pattern.contains('/') || pattern.contains('\\') || pattern.contains('~')) {
        return false;
    }
    let expanded = if pattern == "~" || pattern.starts_with("~/") || pattern.starts_with("~\\") {
        match home {
            Some(home) => format!("{}{}", home.trim_end_matches(['/', '\\']), &pattern[1..]),
            None => return false,
        }
    } else {
        pattern.to_owned()
    };
    let windows = platform.is_windows();
    // Windows compares a wildcard-free pattern with the real path, like OpenClaw.
    let target = if windows && !expanded.contains(['*', '?']) {
        real.unwrap_or(resolved)
    } else {
        resolved
    };
    if windows {
        let fold = |text: &str| text.replace('\\', "/").to_lowercase();
        glob_matches(&fold(&expanded), &fold(target))
    } else {
        glob_matches(&expanded, target)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `*`: any run of characters other than `/`.
    Star,
    /// `**`: any run of characters.
    DoubleStar,
    /// `?`: one character other than `/`.
    Question,
}

/// Matches a whole `text` against a glob, in `O(len(pattern) × len(text))`.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                Token::DoubleStar
            }
            '*' => Token::Star,
            '?' => Token::Question,
            other => Token::Literal(other),
        });
    }
    let text: Vec<char> = text.chars().collect();
    // reach[j]: the first i tokens can match exactly text[..j].
    let mut reach = vec![false; text.len() + 1];
    reach[0] = true;
    for token in tokens {
        let mut next = vec![false; text.len() + 1];
        match token {
            Token::Literal(expected) => {
                for j in 0..text.len() {
                    next[j + 1] = reach[j] && text[j] == expected;
                }
            }
            Token::Question => {
                for j in 0..text.len() {
                    next[j + 1] = reach[j] && text[j] != '/';
                }
            }
            Token::Star => {
                next[0] = reach[0];
                for j in 0..text.len() {
                    next[j + 1] = reach[j + 1] || (next[j] && text[j] != '/');
                }
            }
            Token::DoubleStar => {
                next[0] = reach[0];
                for j in 0..text.len() {
                    next[j + 1] = reach[j + 1] || next[j];
                }
            }
        }
        reach = next;
    }
    reach[text.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posix(pattern: &str, path: &str) -> bool {
        path_matches(pattern, path, None, Platform::Linux, Some("/home/me"))
    }

    #[test]
    fn spec_vectors_for_globs_hold() {
        assert!(posix("/opt/**/rg", "/opt/homebrew/bin/rg"));
        assert!(!posix("/opt/*/rg", "/opt/homebrew/bin/rg"));
        assert!(!posix("/tmp/a?b", "/tmp/a/b"));
        assert!(posix("/tmp/a?b", "/tmp/acb"));
        assert!(!posix("/tmp/*/tool", "/tmp/a/b/tool"));
        assert!(posix("/tmp/**/tool", "/tmp/a/b/tool"));
        assert!(!posix("/tmp/Allowed-Tool", "/tmp/allowed-tool"));
    }

    #[test]
    fn basename_patterns_never_match() {
        assert!(!posix("RG", "/opt/homebrew/bin/rg"));
        assert!(!posix("rg", "/opt/homebrew/bin/rg"));
    }

    #[test]
    fn regex_metacharacters_in_literal_paths_are_literal() {
        assert!(posix("/usr/bin/*++", "/usr/bin/g++"));
        assert!(!posix("/usr/bin/*++", "/usr/bin/gxx"));
        assert!(posix(
            "/opt/builds/tool[1](stable)",
            "/opt/builds/tool[1](stable)"
        ));
        assert!(!posix(
            "/opt/builds/tool[1](stable)",
            "/opt/builds/tool1stable"
        ));
        assert!(!posix("/usr/bin/r.", "/usr/bin/rg"));
    }

    #[test]
    fn tilde_expands_to_the_node_home_only_at_the_start() {
        assert!(posix("~/bin/tool", "/home/me/bin/tool"));
        assert!(!posix("/x/~/tool", "/x/home/me/tool"));
        assert!(!path_matches(
            "~/bin/tool",
            "/home/me/bin/tool",
            None,
            Platform::Linux,
            None
        ));
    }

    #[test]
    fn windows_matching_folds_case_and_separators() {
        assert!(path_matches(
            "C:\\Tools\\*.exe",
            "c:/tools/RG.EXE",
            None,
            Platform::Windows,
            None
        ));
        assert!(path_matches(
            "C:\\Tools\\rg.exe",
            "C:/link/rg.exe",
            Some("C:/Tools/rg.exe"),
            Platform::Windows,
            None
        ));
    }

    #[test]
    fn many_stars_do_not_blow_up() {
        let pattern = format!("/{}b", "*a".repeat(30));
        let text = format!("/{}", "a".repeat(200));
        assert!(!glob_matches(&pattern, &text));
    }

    #[test]
    fn a_bare_star_matches_even_unresolved_segments_but_not_with_an_arg_pattern() {
        let star = PreparedEntry::new(AllowlistEntry::pattern("*"));
        let args = || String::from("--flag");
        assert!(star.matches(None, None, &args, Platform::Linux, None));
        let bound = PreparedEntry::new(AllowlistEntry {
            pattern: "*".into(),
            arg_pattern: Some("--flag".into()),
            source: None,
        });
        assert!(!bound.matches(None, None, &args, Platform::Linux, None));
    }

    #[test]
    fn an_arg_pattern_must_match_the_whole_rendered_arguments() {
        let entry = PreparedEntry::new(AllowlistEntry {
            pattern: "/usr/bin/make".into(),
            arg_pattern: Some("test|build".into()),
            source: None,
        });
        let path = Some("/usr/bin/make");
        let run = |args: &'static str| {
            entry.matches(path, path, &move || args.to_owned(), Platform::Linux, None)
        };
        assert!(run("test"));
        assert!(run("build"));
        assert!(!run("test; rm -rf /"));
        assert!(!run("xtest"));
    }

    #[test]
    fn an_invalid_arg_pattern_matches_nothing_and_says_why() {
        let entry = PreparedEntry::new(AllowlistEntry {
            pattern: "/usr/bin/make".into(),
            arg_pattern: Some("(".into()),
            source: None,
        });
        assert!(entry.error().is_some());
        let path = Some("/usr/bin/make");
        assert!(!entry.matches(path, path, &String::new, Platform::Linux, None));
    }
}
