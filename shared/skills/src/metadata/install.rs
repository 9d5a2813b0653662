//! `metadata.openclaw.install[]` entries: the per-field validators that keep installer
//! arguments from smuggling flags, paths or URLs into `brew`, `npm`, `go` or `uv`.
//!
//! An entry whose kind is unknown, or whose required field (per kind) is missing or invalid,
//! is dropped; optional fields that fail validation are simply left out.

use indexmap::IndexMap;

use super::http_url::normalize_http_url;
use super::{InstallKind, InstallSpec, normalize_string_list};
use crate::frontmatter::js::{JsValue, js_trim};

/// One `install[]` entry, or `None` when it is invalid.
pub(super) fn parse_install_spec(raw: &JsValue) -> Option<InstallSpec> {
    let JsValue::Object(entry) = raw.resolved() else {
        return None;
    };
    // `kind ?? type`: a present but non-string `kind` does not fall through to `type`.
    let kind = match present(entry, "kind").or_else(|| present(entry, "type"))? {
        JsValue::String(kind) => kind,
        _ => return None,
    };
    let kind = match js_trim(kind).to_lowercase().as_str() {
        "brew" => InstallKind::Brew,
        "node" => InstallKind::Node,
        "go" => InstallKind::Go,
        "uv" => InstallKind::Uv,
        "download" => InstallKind::Download,
        _ => return None,
    };

    let formula = match present(entry, "formula") {
        Some(formula) => string(Some(formula)),
        None => string(entry.get("cask")),
    }
    .filter(|formula| is_valid_formula(formula));
    let package = string(entry.get("package")).filter(|package| match kind {
        InstallKind::Node => is_valid_npm_registry_spec(package),
        InstallKind::Uv => is_valid_uv_package(package),
        InstallKind::Brew | InstallKind::Go | InstallKind::Download => false,
    });
    let module = string(entry.get("module")).filter(|module| is_valid_go_module(module));
    let url = string(entry.get("url")).and_then(|url| normalize_http_url(&url));

    let has_required = match kind {
        InstallKind::Brew => formula.is_some(),
        InstallKind::Node | InstallKind::Uv => package.is_some(),
        InstallKind::Go => module.is_some(),
        InstallKind::Download => url.is_some(),
    };
    if !has_required {
        return None;
    }
    Some(InstallSpec {
        kind,
        id: string(entry.get("id")),
        label: string(entry.get("label")),
        bins: normalize_string_list(entry.get("bins")),
        os: normalize_string_list(entry.get("os")),
        formula,
        package,
        module,
        url,
        archive: string(entry.get("archive")),
        extract: match entry.get("extract").map(JsValue::resolved) {
            Some(JsValue::Bool(extract)) => Some(*extract),
            _ => None,
        },
        strip_components: match entry.get("stripComponents").map(JsValue::resolved) {
            Some(JsValue::Number(n)) => Some(*n),
            _ => None,
        },
        target_dir: string(entry.get("targetDir")),
    })
}

/// The field unless it is absent or `null` (what JS's `??` skips).
fn present<'a>(entry: &'a IndexMap<String, JsValue>, key: &str) -> Option<&'a JsValue> {
    entry
        .get(key)
        .map(JsValue::resolved)
        .filter(|value| !matches!(value, JsValue::Null))
}

fn string(value: Option<&JsValue>) -> Option<String> {
    match value.map(JsValue::resolved) {
        Some(JsValue::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// `^[A-Za-z0-9]` followed by characters from `allowed`.
fn starts_alnum_then(text: &str, allowed: impl Fn(char) -> bool) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || allowed(c))
}

/// Homebrew formula or cask: `^[A-Za-z0-9][A-Za-z0-9@+._/-]*$` without `..`.
fn is_valid_formula(formula: &str) -> bool {
    starts_alnum_then(formula, |c| matches!(c, '@' | '+' | '.' | '_' | '/' | '-'))
        && !formula.contains("..")
}

/// uv package spec: `^[A-Za-z0-9][A-Za-z0-9._\-[\]=<>!~+,]*$` (so no `://`, `\` or leading `-`).
fn is_valid_uv_package(package: &str) -> bool {
    starts_alnum_then(package, |c| {
        matches!(
            c,
            '.' | '_' | '-' | '[' | ']' | '=' | '<' | '>' | '!' | '~' | '+' | ','
        )
    })
}

/// Go module path with an optional `@version`, each part
/// `[A-Za-z0-9][A-Za-z0-9._~+\-/]*` (so no scheme, `\` or leading `-`).
fn is_valid_go_module(module: &str) -> bool {
    let part_ok =
        |part: &str| starts_alnum_then(part, |c| matches!(c, '.' | '_' | '~' | '+' | '-' | '/'));
    match module.split_once('@') {
        Some((path, version)) => part_ok(path) && part_ok(version),
        None => part_ok(module),
    }
}

/// An npm *registry* spec: `name` or `@scope/name`, optionally `@version`, `@tag` or
/// `@range`. Everything npm would resolve elsewhere is refused: `file:`/`git+…`/`npm:`
/// aliases and URLs (`:`), paths and GitHub shorthands (`/` outside a scope, `..`, `\`),
/// option-like `-…`, and whitespace.
fn is_valid_npm_registry_spec(spec: &str) -> bool {
    const MAX_NAME_LEN: usize = 214;
    if spec.starts_with('-') || spec.contains("..") || spec.contains('\\') {
        return false;
    }
    let name_part_ok = |part: &str| {
        !part.is_empty()
            && !part.starts_with(['.', '_'])
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'))
    };
    let (name_len, version) = if let Some(scoped) = spec.strip_prefix('@') {
        let Some((scope, rest)) = scoped.split_once('/') else {
            return false;
        };
        let (name, version) = split_version(rest);
        if !name_part_ok(scope) || !name_part_ok(name) {
            return false;
        }
        (scope.len() + name.len() + 2, version)
    } else {
        let (name, version) = split_version(spec);
        if !name_part_ok(name) {
            return false;
        }
        (name.len(), version)
    };
    let version_ok = version.is_none_or(|version| {
        !version.is_empty()
            && version.chars().all(|c| {
                c.is_ascii_alphanumeric()
                    || matches!(
                        c,
                        '.' | '-' | '_' | '+' | '^' | '~' | '<' | '>' | '=' | '|' | '*'
                    )
            })
    });
    name_len <= MAX_NAME_LEN && version_ok
}

fn split_version(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (spec, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_registry_specs_accept_names_scopes_and_versions() {
        for spec in [
            "gh",
            "@scope/pkg",
            "@scope/pkg@1.2.3",
            "clawhub@latest",
            "pkg@^1.2",
            "pkg@>=1.0.0",
            "JSONStream",
        ] {
            assert!(is_valid_npm_registry_spec(spec), "{spec}");
        }
    }

    #[test]
    fn npm_specs_that_resolve_outside_the_registry_are_rejected() {
        for spec in [
            "file:../malicious",
            "git+https://github.com/a/b.git",
            "https://example.com/x.tgz",
            "npm:other@1",
            "github:user/repo",
            "user/repo",
            "./local",
            "/abs/path",
            "../up",
            "-g",
            "--registry=evil",
            "pkg@1 || 2",
            "pkg@",
            "@scope",
            "@/x",
            ".hidden",
            "_private",
            "",
        ] {
            assert!(!is_valid_npm_registry_spec(spec), "{spec}");
        }
    }

    #[test]
    fn formula_uv_and_go_validators_follow_the_spec_patterns() {
        assert!(is_valid_formula("python@3.12"));
        assert!(is_valid_formula("steipete/tap/gogcli"));
        assert!(!is_valid_formula("wget --HEAD"));
        assert!(!is_valid_formula("-x"));
        assert!(!is_valid_formula("a/../b"));
        assert!(is_valid_uv_package("uvicorn[standard]==0.31.0"));
        assert!(!is_valid_uv_package("git+https://x"));
        assert!(!is_valid_uv_package("--index-url"));
        assert!(is_valid_go_module("example.com/tool/cmd@v1.2.3"));
        assert!(is_valid_go_module("github.com/a/b@latest"));
        assert!(!is_valid_go_module("https://evil.example/mod"));
        assert!(!is_valid_go_module("a@b@c"));
        assert!(!is_valid_go_module("-mod"));
    }
}
