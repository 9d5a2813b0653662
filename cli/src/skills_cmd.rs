//! `clawless skills`: list, check, prompt, bins, commands and sync, over sources from
//! `clawless.yaml` or flags.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_runtime::config::{ClawlessConfig, absolute_dir};
use clawless_runtime::local_machine::local_context;
use clawless_runtime::skills_service::SkillStatus;
use clawless_runtime::sources::looks_like_skills_dir;
use clawless_runtime::{SkillsService, SourceUri, StoreFactory};
use clawless_skills::{EligibilityContext, LoadedSkills};
use serde_json::json;

/// Where to read skills from, and what to do.
#[derive(Debug, Args)]
pub(crate) struct SkillsArgs {
    /// Config file or s3:// URI (default: $CLAWLESS_CONFIG, else ./clawless.yaml if present).
    #[arg(long, global = true, value_name = "FILE|URI")]
    config: Option<String>,
    /// Bundled skills: a directory or s3:// URI.
    #[arg(long, global = true, value_name = "DIR|URI")]
    bundled: Option<String>,
    /// Managed skills: a directory or s3:// URI.
    #[arg(long, global = true, value_name = "DIR|URI")]
    managed: Option<String>,
    /// Agent workspace (its skills/ and .agents/skills/): a directory or s3:// URI.
    #[arg(long, global = true, value_name = "DIR|URI")]
    workspace: Option<String>,
    /// Extra skill sources, lowest precedence (repeatable).
    #[arg(long, global = true, value_name = "DIR|URI")]
    extra: Vec<String>,
    /// Which agent's view (filter and workspace).
    #[arg(long, global = true, default_value = clawless_runtime::config::DEFAULT_AGENT_ID)]
    agent: String,
    #[command(subcommand)]
    command: SkillsCommand,
}

#[derive(Debug, Subcommand)]
enum SkillsCommand {
    /// List the loaded skills and whether each is eligible on this machine.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Explain why each skill is or is not eligible, and what was skipped.
    Check {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the exact skills block the model would see.
    Prompt,
    /// Print the binaries the skills declare (what node hosts auto-allow).
    Bins {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the slash commands the skills provide.
    Commands {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy a skills tree to a directory or S3 prefix, uploading only what changed.
    Sync {
        /// Source directory or s3:// URI.
        from: String,
        /// Destination directory or s3:// URI.
        to: String,
        /// Also delete destination objects that the source does not have.
        #[arg(long)]
        delete: bool,
        /// Show what would change without writing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Largest single file `sync` copies.
const MAX_SYNC_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Most files one `sync` copies.
const MAX_SYNC_FILES: usize = 100_000;

pub(crate) async fn run(args: SkillsArgs) -> anyhow::Result<ExitCode> {
    if let SkillsCommand::Sync {
        from,
        to,
        delete,
        dry_run,
    } = &args.command
    {
        let stores = store_factory(&[from.as_str(), to.as_str()]).await;
        return sync(&stores, from, to, *delete, *dry_run).await;
    }
    let config = resolve_config(&args)?;
    let stores = store_factory(&locations(&config)).await;
    let service = SkillsService::new(config, &stores)?;
    let loaded = service.load(&args.agent).await?;
    let context = machine_context(&loaded);
    let mut out = std::io::stdout().lock();
    match args.command {
        SkillsCommand::List { json } => {
            let statuses = service.check(&args.agent, &context).await?;
            if json {
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&status_json(&statuses))?
                )?;
            } else {
                print_list(&mut out, &statuses)?;
            }
        }
        SkillsCommand::Check { json } => {
            let statuses = service.check(&args.agent, &context).await?;
            if json {
                let report =
                    json!({ "skills": status_json(&statuses), "skipped": loaded.diagnostics });
                writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                print_check(&mut out, &statuses, &loaded.diagnostics, &context)?;
            }
        }
        SkillsCommand::Prompt => {
            let snapshot = service
                .snapshot(&args.agent, &context, &home_dirs(), None)
                .await?;
            writeln!(out, "{}", snapshot.prompt)?;
        }
        SkillsCommand::Bins { json } => {
            let bins = service.bins().await?;
            if json {
                writeln!(out, "{}", json!({ "bins": bins }))?;
            } else {
                for bin in bins {
                    writeln!(out, "{bin}")?;
                }
            }
        }
        SkillsCommand::Commands { json } => {
            let specs = service.commands(&args.agent, &context).await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&specs)?)?;
            } else {
                for spec in specs {
                    let dispatch = spec
                        .dispatch
                        .map(|d| format!(" [→ tool {}]", d.tool_name))
                        .unwrap_or_default();
                    writeln!(out, "/{} — {}{dispatch}", spec.name, spec.description)?;
                }
            }
        }
        SkillsCommand::Sync { .. } => unreachable!("handled above"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The config file, then flags on top, then a bundled directory found nearby.
fn resolve_config(args: &SkillsArgs) -> anyhow::Result<ClawlessConfig> {
    let explicit = args.config.clone().or_else(|| {
        std::env::var("CLAWLESS_CONFIG")
            .ok()
            .filter(|v| !v.is_empty())
    });
    let mut config = match explicit {
        Some(location) if location.starts_with("s3://") => {
            bail!("--config from S3 is read by the functions; for the CLI, copy it locally first")
        }
        Some(location) => ClawlessConfig::from_file(Path::new(&location))?,
        None if Path::new("clawless.yaml").is_file() => {
            ClawlessConfig::from_file(Path::new("clawless.yaml"))?
        }
        None => ClawlessConfig::from_yaml("", "defaults")?,
    };
    if config.agent(&args.agent).is_none() {
        bail!("no agent {:?} in the config", args.agent);
    }
    if let Some(bundled) = &args.bundled {
        config.skills.bundled = Some(absolute_dir(bundled));
    }
    if let Some(managed) = &args.managed {
        config.skills.managed = Some(absolute_dir(managed));
    }
    if !args.extra.is_empty() {
        config.skills.extra = args.extra.iter().map(|e| absolute_dir(e)).collect();
    }
    if let Some(workspace) = &args.workspace {
        let workspace = absolute_dir(workspace);
        config.agents.defaults.workspace = Some(workspace.clone());
        for agent in config
            .agents
            .list
            .iter_mut()
            .filter(|a| a.id.eq_ignore_ascii_case(&args.agent))
        {
            agent.workspace = Some(workspace.clone());
        }
    }
    if config.skills.bundled.is_none() {
        config.skills.bundled = find_bundled_dir().map(|dir| dir.display().to_string());
    }
    for location in locations(&config) {
        SourceUri::parse(location)?;
    }
    Ok(config)
}

/// `$CLAWLESS_BUNDLED_SKILLS_DIR`, else a `skills/` holding skills in the current directory
/// or up to six levels above it, else next to the executable.
fn find_bundled_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLAWLESS_BUNDLED_SKILLS_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let cwd = std::env::current_dir().ok()?;
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    cwd.ancestors()
        .take(7)
        .chain(exe_dir.as_deref())
        .map(|dir| dir.join("skills"))
        .find(|dir| looks_like_skills_dir(dir))
}

/// What this machine offers the loaded skills: which of the binaries they ask for are on
/// `PATH`, and the rest of [`local_context`].
pub(crate) fn machine_context(loaded: &LoadedSkills) -> EligibilityContext {
    let wanted = loaded
        .entries
        .iter()
        .filter_map(|entry| entry.metadata.as_ref()?.requires.as_ref())
        .flat_map(|requires| requires.bins.iter().chain(&requires.any_bins))
        .map(String::as_str);
    local_context(wanted)
}

pub(crate) fn locations(config: &ClawlessConfig) -> Vec<&str> {
    let skills = &config.skills;
    let workspaces = config
        .agents
        .list
        .iter()
        .filter_map(|a| a.workspace.as_deref());
    skills
        .bundled
        .as_deref()
        .into_iter()
        .chain(skills.managed.as_deref())
        .chain(skills.extra.iter().map(String::as_str))
        .chain(config.agents.defaults.workspace.as_deref())
        .chain(workspaces)
        .collect()
}

/// A store factory; the AWS SDK is only set up when an `s3://` location is involved, so
/// purely local use never touches AWS configuration.
pub(crate) async fn store_factory(locations: &[&str]) -> StoreFactory {
    if locations.iter().any(|l| l.trim().starts_with("s3://")) {
        StoreFactory::with_s3_client(clawless_runtime::aws_env::s3_client_from_env().await)
    } else {
        StoreFactory::new(|| unreachable!("no s3:// location was configured"))
    }
}

fn home_dirs() -> Vec<String> {
    let Some(home) = std::env::home_dir() else {
        return Vec::new();
    };
    let mut dirs = vec![home.display().to_string()];
    if let Ok(real) = std::fs::canonicalize(&home) {
        dirs.push(real.display().to_string());
    }
    dirs
}

fn status_json(statuses: &[SkillStatus]) -> serde_json::Value {
    statuses
        .iter()
        .map(|status| {
            let entry = &status.entry;
            json!({
                "name": entry.name,
                "description": entry.description,
                "source": entry.source,
                "location": entry.location,
                "eligible": status.ineligible.is_empty() && !status.filtered_out,
                "reasons": status.ineligible.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "filteredOut": status.filtered_out,
                "visibleToModel": entry.visible_to_model(),
                "userInvocable": entry.invocation.user_invocable,
                "metadata": entry.metadata,
            })
        })
        .collect()
}

fn print_list(out: &mut impl Write, statuses: &[SkillStatus]) -> std::io::Result<()> {
    let width = statuses
        .iter()
        .map(|s| s.entry.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    for status in statuses {
        let mark = if status.ineligible.is_empty() && !status.filtered_out {
            "✓"
        } else {
            "✗"
        };
        let entry = &status.entry;
        writeln!(
            out,
            "{mark} {:<width$}  {:<14} {}",
            entry.name,
            entry.source.label(),
            entry.description
        )?;
    }
    Ok(())
}

fn print_check(
    out: &mut impl Write, statuses: &[SkillStatus], skipped: &[clawless_skills::SkillDiagnostic],
    context: &EligibilityContext,
) -> std::io::Result<()> {
    let platforms: Vec<&str> = context.platforms.iter().map(String::as_str).collect();
    writeln!(
        out,
        "Eligibility on this machine ({}):",
        platforms.join(", ")
    )?;
    for status in statuses {
        let entry = &status.entry;
        let why = if status.filtered_out {
            "not in this agent's skill filter".to_owned()
        } else {
            status
                .ineligible
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        if why.is_empty() {
            let hidden = if entry.visible_to_model() {
                ""
            } else {
                " (hidden from the model)"
            };
            writeln!(out, "  ✓ {} [{}]{hidden}", entry.name, entry.source)?;
        } else {
            writeln!(out, "  ✗ {} [{}]: {why}", entry.name, entry.source)?;
        }
    }
    if !skipped.is_empty() {
        writeln!(out, "Skipped:")?;
        for diagnostic in skipped {
            writeln!(out, "  ! {}: {}", diagnostic.location, diagnostic.message)?;
        }
    }
    let eligible = statuses
        .iter()
        .filter(|s| s.ineligible.is_empty() && !s.filtered_out)
        .count();
    writeln!(
        out,
        "{eligible} eligible, {} not eligible, {} skipped",
        statuses.len() - eligible,
        skipped.len()
    )
}

/// Copies every object under `from` to `to`, writing only those whose bytes differ.
async fn sync(
    stores: &StoreFactory, from: &str, to: &str, delete: bool, dry_run: bool,
) -> anyhow::Result<ExitCode> {
    let (source, source_prefix) = stores.open(&SourceUri::parse(from)?)?;
    let (target, target_prefix) = stores.open(&SourceUri::parse(&absolute_dir(to))?)?;
    let listing = source
        .list(&source_prefix, MAX_SYNC_FILES)
        .await
        .with_context(|| format!("listing {from}"))?;
    if listing.truncated {
        bail!("{from} holds more than {MAX_SYNC_FILES} files; sync a smaller tree");
    }
    if listing.objects.is_empty() {
        bail!("{from} holds no files");
    }
    let mut out = std::io::stdout().lock();
    for refused in &listing.refused {
        writeln!(out, "skipped {} ({})", refused.key, refused.reason.as_str())?;
    }
    let existing = target
        .list(&target_prefix, MAX_SYNC_FILES)
        .await
        .with_context(|| format!("listing {to}"))?;
    let (mut uploaded, mut unchanged, mut deleted) = (0, 0, 0);
    let mut wanted = std::collections::BTreeSet::new();
    for meta in &listing.objects {
        let relative = &meta.key[source_prefix.len()..];
        let target_key = format!("{target_prefix}{relative}");
        wanted.insert(target_key.clone());
        let object = source
            .get(&meta.key, MAX_SYNC_FILE_BYTES)
            .await
            .with_context(|| format!("reading {}", source.location(&meta.key)))?
            .with_context(|| format!("{} disappeared during sync", source.location(&meta.key)))?;
        if same_content(target.as_ref(), &target_key, &object.bytes).await? {
            unchanged += 1;
            continue;
        }
        writeln!(out, "upload {relative}")?;
        if !dry_run {
            target
                .put(&target_key, object.bytes, PutCondition::Always)
                .await
                .with_context(|| format!("writing {}", target.location(&target_key)))?;
        }
        uploaded += 1;
    }
    if delete {
        for stale in existing
            .objects
            .iter()
            .filter(|meta| !wanted.contains(&meta.key))
        {
            writeln!(out, "delete {}", &stale.key[target_prefix.len()..])?;
            if !dry_run {
                target
                    .delete(&stale.key)
                    .await
                    .with_context(|| format!("deleting {}", target.location(&stale.key)))?;
            }
            deleted += 1;
        }
    }
    let verb = if dry_run { "would upload" } else { "uploaded" };
    writeln!(
        out,
        "{verb} {uploaded}, unchanged {unchanged}, deleted {deleted}"
    )?;
    Ok(ExitCode::SUCCESS)
}

async fn same_content(store: &dyn ObjectStore, key: &str, bytes: &[u8]) -> anyhow::Result<bool> {
    let Some(meta) = store
        .head(key)
        .await
        .with_context(|| format!("checking {}", store.location(key)))?
    else {
        return Ok(false);
    };
    if meta.size != bytes.len() as u64 {
        return Ok(false);
    }
    let current = store
        .get(key, MAX_SYNC_FILE_BYTES)
        .await
        .with_context(|| format!("reading {}", store.location(key)))?;
    Ok(current.is_some_and(|object| object.bytes == bytes))
}
