//! The `clawless` command line. Today: `clawless skills …`; local mode, chat and the node
//! host arrive with their issues.

mod skills_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// clawless: a serverless agent backend.
#[derive(Debug, Parser)]
#[command(name = "clawless", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect, check and sync skills.
    Skills(skills_cmd::SkillsArgs),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    clawless_runtime::telemetry::init_cli_tracing();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Skills(args) => skills_cmd::run(args).await,
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
