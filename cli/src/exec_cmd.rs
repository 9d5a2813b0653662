//! `clawless exec check`: would this command run on a node, and why. Reads a JSON request on
//! stdin, prints the JSON verdict; never runs anything. The request format is
//! [`clawless_core::exec::check`]'s. Without an `fs` block the command is checked against
//! this machine's filesystem.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawless_core::exec::check::{CheckRequest, NodeExecFacts, run_check};
use clawless_node::local_fs::LocalFs;

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
    },
}

pub(crate) fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ExecCommand::Check { node } => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading the request from stdin")?;
            let mut request: CheckRequest =
                serde_json::from_str(&input).context("parsing the check request")?;
            if let Some(node) = node {
                request = request.with_node_facts(node_facts(&node)?);
            }
            let response = run_check(&request, &LocalFs)?;
            println!("{}", serde_json::to_string_pretty(&response)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A paired node's reported facts. The nodes registry is not built yet; when it is, this
/// loads the node's record and everything else already works.
fn node_facts(node: &str) -> anyhow::Result<NodeExecFacts> {
    bail!(
        "the nodes registry is unavailable, so node {node:?} cannot be checked yet; \
         describe the node in the request instead (platform, path, home, policy, fs)"
    )
}
