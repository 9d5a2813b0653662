//! `clawless workspace init <dir|s3://bucket/prefix>`: gives an agent workspace the default
//! bootstrap files ([`clawless_core::system_prompt::seed`]) before its first conversation.
//! Existing files are never overwritten, and the first-conversation ritual (`BOOTSTRAP.md`) is
//! only written into a brand-new workspace. S3 uses this machine's AWS configuration, as
//! `clawless skills sync` does.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use clawless_core::system_prompt::seed::{BOOTSTRAP_RITUAL_FILE_NAME, SeedScope, seed_workspace};
use clawless_runtime::SourceUri;
use clawless_runtime::config::absolute_dir;

use crate::skills_cmd::store_factory;

/// Agent workspaces.
#[derive(Debug, Args)]
pub(crate) struct WorkspaceArgs {
    #[command(subcommand)]
    command: WorkspaceCommand,
}

#[derive(Debug, Subcommand)]
enum WorkspaceCommand {
    /// Write the default AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md, USER.md and HEARTBEAT.md
    /// that are missing (and BOOTSTRAP.md into a brand-new workspace). Nothing is overwritten.
    Init {
        /// The workspace: a directory, or s3://bucket/prefix (e.g.
        /// s3://my-bucket/agents/main/workspace).
        location: String,
    },
}

/// Runs `clawless workspace …`.
pub(crate) async fn run(args: WorkspaceArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        WorkspaceCommand::Init { location } => init(&location).await,
    }
}

async fn init(location: &str) -> anyhow::Result<ExitCode> {
    let location = absolute_dir(location);
    let uri = SourceUri::parse(&location)?;
    let stores = store_factory(&[location.as_str()]).await;
    let (store, prefix) = stores.open(&uri)?;
    let report = seed_workspace(store.as_ref(), &prefix, SeedScope::MissingFiles)
        .await
        .with_context(|| format!("seeding the workspace {uri}"))?;
    for name in &report.written {
        println!("wrote {name}");
    }
    for name in &report.existing {
        println!("kept {name} (already there)");
    }
    let ritual = if report.written.contains(&BOOTSTRAP_RITUAL_FILE_NAME) {
        "the agent starts with its first-conversation ritual"
    } else if report.brand_new {
        "BOOTSTRAP.md already there"
    } else {
        "the workspace was already in use, so no BOOTSTRAP.md"
    };
    println!(
        "workspace {uri}: {} written, {} kept; {ritual}",
        report.written.len(),
        report.existing.len()
    );
    Ok(ExitCode::SUCCESS)
}
