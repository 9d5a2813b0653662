//! `clawless exec check`: would this command run on a node, and why. Reads a JSON request on
//! stdin, prints the JSON verdict; never runs anything. The request format is
//! [`clawless_exec::check`]'s. Without an `fs` block the command is checked against
//! this machine's filesystem; with `--node ID`, against what that paired node last reported
//! (its platform, PATH, home, described executables and its policy for `--agent`, with the
//! entries granted from the chat), read from the local registry (`--state-dir`) or a deployed
//! backend (`--url`, admin token in `$CLAWLESS_ADMIN_TOKEN`).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use clawless_exec::check::{CheckRequest, run_check};
use clawless_node::local_fs::LocalFs;

use crate::node_cmd::paired_node_exec_facts;

/// Exec approvals.
#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(subcommand)]
    command: ExecCommand,
}

#[derive(Debug, Subcommand)]
enum ExecCommand {
    /// Decide a command against an exec policy (JSON request on stdin, JSON verdict on
    /// stdout). Nothing is run.
    Check {
        /// Check against a paired node's reported PATH, filesystem and policy.
        #[arg(long, value_name = "ID")]
        node: Option<String>,
        /// With --node: the agent whose policy applies.
        #[arg(long, default_value = "main", requires = "node")]
        agent: String,
        /// With --node: the state directory of `clawless local` (holds the node registry).
        #[arg(long, default_value = ".clawless")]
        state_dir: PathBuf,
        /// With --node: a deployed backend's base URL (admin token from
        /// $CLAWLESS_ADMIN_TOKEN) instead of the local registry.
        #[arg(long, env = "CLAWLESS_URL")]
        url: Option<String>,
    },
}

pub(crate) async fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ExecCommand::Check {
            node,
            agent,
            state_dir,
            url,
        } => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading the request from stdin")?;
            let mut request: CheckRequest =
                serde_json::from_str(&input).context("parsing the check request")?;
            if let Some(node) = node {
                let facts =
                    paired_node_exec_facts(&state_dir, url.as_deref(), &node, &agent).await?;
                request = request.with_node_facts(facts);
            }
            let response = run_check(&request, &LocalFs)?;
            println!("{}", serde_json::to_string_pretty(&response)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}
