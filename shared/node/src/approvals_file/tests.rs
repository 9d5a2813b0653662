use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::*;

fn file_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(APPROVALS_FILE_NAME);
    (dir, path)
}

fn write(path: &Path, value: &Value) {
    fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

fn parse(value: &Value) -> Result<ApprovalsFile, ApprovalsFileError> {
    ApprovalsFile::parse(&value.to_string(), Path::new("/state/exec-approvals.json"))
}

fn invalid_at(value: &Value) -> String {
    match parse(value) {
        Err(ApprovalsFileError::Invalid { json_path, .. }) => json_path,
        other => panic!("expected an invalid-file error, got {other:?}"),
    }
}

#[test]
fn a_missing_file_gives_the_secure_defaults() {
    let (_dir, path) = file_path();
    let resolved = resolve_from_path(&path, "main", &[]).unwrap();
    assert_eq!(resolved.security, Security::Allowlist);
    assert_eq!(resolved.ask, Ask::OnMiss);
    assert_eq!(resolved.ask_fallback, Security::Deny);
    assert!(!resolved.auto_allow_skills);
    assert!(resolved.allowlist.is_empty());
    assert_eq!(resolved.safe_bins, None);
}

#[test]
fn an_empty_file_object_with_only_a_version_gives_the_secure_defaults_not_openclaws() {
    let resolved = parse(&json!({"version": 1})).unwrap().resolve("main", &[]);
    assert_eq!(
        (resolved.security, resolved.ask, resolved.ask_fallback),
        (Security::Allowlist, Ask::OnMiss, Security::Deny)
    );
}

#[test]
fn settings_come_from_the_agent_then_star_then_defaults_then_secure_defaults() {
    let file = parse(&json!({
        "version": 1,
        "defaults": {"security": "full", "ask": "off", "askFallback": "full"},
        "agents": {
            "*": {"ask": "always", "autoAllowSkills": true},
            "ops": {"security": "deny"}
        }
    }))
    .unwrap();

    let ops = file.resolve("ops", &[]);
    assert_eq!(ops.security, Security::Deny, "own entry wins");
    assert_eq!(ops.ask, Ask::Always, "then \"*\"");
    assert!(ops.auto_allow_skills, "then \"*\"");

    let other = file.resolve("other", &[]);
    assert_eq!(other.security, Security::Full, "then defaults");
    assert_eq!(other.ask, Ask::Always);
    assert_eq!(other.ask_fallback, Security::Full);

    let bare = parse(&json!({"version": 1, "defaults": {"ask": "off"}}))
        .unwrap()
        .resolve("x", &[]);
    assert_eq!(bare.ask, Ask::Off);
    assert_eq!(
        bare.security,
        Security::Allowlist,
        "then the secure default"
    );
}

#[test]
fn ask_fallback_is_never_looser_than_security() {
    let file = parse(&json!({
        "version": 1,
        "agents": {"main": {"security": "allowlist", "askFallback": "full"}}
    }))
    .unwrap();
    assert_eq!(file.resolve("main", &[]).ask_fallback, Security::Allowlist);
}

#[test]
fn the_allowlist_is_star_then_the_agent_then_grants_for_that_agent_only() {
    let file = parse(&json!({
        "version": 1,
        "agents": {
            "*": {"allowlist": ["/usr/bin/git"]},
            "main": {"allowlist": [
                {"pattern": "~/bin/*", "argPattern": "^--dry-run$", "source": "manual"},
                "/usr/bin/git"
            ]},
            "other": {"allowlist": ["/usr/bin/rm"]}
        }
    }))
    .unwrap();
    let granted = vec![
        ("main".to_owned(), AllowlistEntry::pattern("/opt/tool")),
        ("other".to_owned(), AllowlistEntry::pattern("/usr/bin/curl")),
        (ANY_AGENT.to_owned(), AllowlistEntry::pattern("/usr/bin/jq")),
    ];
    let resolved = file.resolve("main", &granted);
    let patterns: Vec<&str> = resolved
        .allowlist
        .iter()
        .map(|entry| entry.pattern.as_str())
        .collect();
    assert_eq!(
        patterns,
        vec!["/usr/bin/git", "~/bin/*", "/opt/tool", "/usr/bin/jq"]
    );
    assert_eq!(
        resolved.allowlist[1].arg_pattern.as_deref(),
        Some("^--dry-run$")
    );
}

#[test]
fn openclaw_entry_extras_and_the_socket_key_are_accepted() {
    let file = parse(&json!({
        "version": 1,
        "socket": {"path": "/tmp/x.sock", "token": "t"},
        "agents": {"main": {"allowlist": [
            {"id": "abc", "pattern": "/usr/bin/ls", "lastUsedAt": 123}
        ]}}
    }))
    .unwrap();
    assert_eq!(
        file.resolve("main", &[]).allowlist,
        vec![AllowlistEntry::pattern("/usr/bin/ls")]
    );
}

#[test]
fn safe_bin_keys_pass_through() {
    let file = parse(&json!({
        "version": 1,
        "safeBins": ["jq", "wc"],
        "safeBinTrustedDirs": ["/usr/bin"],
        "safeBinProfiles": {"jq": {"maxPositional": 1}}
    }))
    .unwrap();
    let resolved = file.resolve("main", &[]);
    assert_eq!(
        resolved.safe_bins,
        Some(vec!["jq".to_owned(), "wc".to_owned()])
    );
    assert_eq!(resolved.safe_bin_trusted_dirs, vec!["/usr/bin".to_owned()]);
    assert_eq!(
        resolved.safe_bin_profiles,
        Some(json!({"jq": {"maxPositional": 1}}))
    );
}

#[test]
fn a_bad_value_is_an_error_naming_the_file_and_the_json_path() {
    let err = parse(&json!({"version": 1, "agents": {"main": {"security": "yolo"}}})).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("/state/exec-approvals.json"), "{message}");
    assert!(message.contains("agents.main.security"), "{message}");
}

#[test]
fn a_misspelled_key_is_an_error_rather_than_a_silently_dropped_rule() {
    assert_eq!(
        invalid_at(&json!({"version": 1, "agents": {"main": {"securty": "deny"}}})),
        "agents.main.securty"
    );
    assert_eq!(
        invalid_at(&json!({"version": 1, "defaults": {"askfallback": "deny"}})),
        "defaults.askfallback"
    );
    assert_eq!(invalid_at(&json!({"version": 1, "agnets": {}})), "agnets");
}

#[test]
fn other_versions_missing_versions_and_empty_patterns_are_refused() {
    assert_eq!(invalid_at(&json!({"version": 2})), "version");
    assert_eq!(invalid_at(&json!({"agents": {}})), ".");
    assert_eq!(
        invalid_at(&json!({"version": 1, "agents": {"main": {"allowlist": ["ok", "  "]}}})),
        "agents.main.allowlist[1].pattern"
    );
    assert_eq!(
        invalid_at(&json!({"version": 1, "agents": {"main": {"allowlist": [42]}}})),
        "agents.main.allowlist[0]"
    );
}

#[test]
fn text_that_is_not_json_is_an_error() {
    let err = ApprovalsFile::parse("{\"version\": 1,", Path::new("f.json")).unwrap_err();
    assert!(matches!(err, ApprovalsFileError::Invalid { .. }), "{err:?}");
    let err = ApprovalsFile::parse("{\"version\": 1} trailing", Path::new("f.json")).unwrap_err();
    assert!(matches!(err, ApprovalsFileError::Invalid { .. }), "{err:?}");
}

#[test]
fn an_unreadable_file_is_an_error_not_the_defaults() {
    let (_dir, path) = file_path();
    fs::create_dir(&path).unwrap();
    let err = resolve_from_path(&path, "main", &[]).unwrap_err();
    assert!(matches!(err, ApprovalsFileError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains(APPROVALS_FILE_NAME));
}

#[test]
fn a_world_writable_file_is_refused() {
    let (_dir, path) = file_path();
    write(&path, &json!({"version": 1}));
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
    let err = ApprovalsFile::load(&path).unwrap_err();
    assert!(
        matches!(err, ApprovalsFileError::WorldWritable { mode: 0o666, .. }),
        "{err:?}"
    );
}

#[test]
fn add_entry_creates_a_private_file_that_loads_back() {
    let (dir, _) = file_path();
    let path = dir.path().join("fresh").join(APPROVALS_FILE_NAME);
    let entry = AllowlistEntry {
        pattern: "/usr/bin/rg".to_owned(),
        arg_pattern: None,
        source: Some("allow-always".to_owned()),
    };
    assert!(add_entry(&path, "main", &entry).unwrap());
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let resolved = resolve_from_path(&path, "main", &[]).unwrap();
    assert_eq!(resolved.allowlist, vec![entry]);
    assert_eq!(resolved.security, Security::Allowlist);
}

#[test]
fn add_entry_keeps_the_rest_of_the_file_and_skips_duplicates() {
    let (_dir, path) = file_path();
    write(
        &path,
        &json!({
            "version": 1,
            "defaults": {"ask": "always"},
            "agents": {"main": {"allowlist": ["/usr/bin/git", {"id": "x", "pattern": "/bin/ls"}]}},
            "safeBinProfiles": {"jq": {}}
        }),
    );
    assert!(!add_entry(&path, "main", &AllowlistEntry::pattern("/usr/bin/git")).unwrap());
    assert!(add_entry(&path, "main", &AllowlistEntry::pattern("/usr/bin/jq")).unwrap());
    assert!(add_entry(&path, "ops", &AllowlistEntry::pattern("/usr/bin/jq")).unwrap());

    let written: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(written["defaults"], json!({"ask": "always"}));
    assert_eq!(written["safeBinProfiles"], json!({"jq": {}}));
    assert_eq!(
        written["agents"]["main"]["allowlist"],
        json!(["/usr/bin/git", {"id": "x", "pattern": "/bin/ls"}, {"pattern": "/usr/bin/jq"}])
    );
    assert_eq!(
        written["agents"]["ops"]["allowlist"],
        json!([{"pattern": "/usr/bin/jq"}])
    );
}

#[test]
fn add_entry_leaves_an_invalid_file_untouched() {
    let (_dir, path) = file_path();
    let original = "{\"version\": 1, \"agents\": {\"main\": {\"security\": \"yolo\"}}}";
    fs::write(&path, original).unwrap();
    let err = add_entry(&path, "main", &AllowlistEntry::pattern("/bin/ls")).unwrap_err();
    assert!(matches!(err, ApprovalsFileError::Invalid { .. }), "{err:?}");
    assert_eq!(fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn add_entry_refuses_an_empty_pattern_or_agent() {
    let (_dir, path) = file_path();
    assert!(add_entry(&path, "main", &AllowlistEntry::pattern(" ")).is_err());
    assert!(add_entry(&path, "", &AllowlistEntry::pattern("/bin/ls")).is_err());
    assert!(!path.exists());
}
