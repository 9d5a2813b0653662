//! The `clawless` command line: `clawless local` (the whole system on one machine),
//! `clawless chat` (talk to it), `clawless skills …`, `clawless exec check`, `clawless nodes …`
//! (pairing codes and the node registry), `clawless node …` (this machine as a node host),
//! `clawless sessions …` (what sessions did), `clawless cron …` (scheduled jobs and
//! reminders), `clawless doctor` (check a deployment), `clawless workspace init` (a new agent
//! workspace's default bootstrap files) and `clawless config …` (the schema of
//! `clawless.yaml`, checking a file against it).

mod admin_client;
mod channels_cmd;
mod config_cmd;
mod cron_cmd;
mod doctor_cmd;
mod exec_cmd;
mod local_cmd;
mod node_cmd;
mod sessions_cmd;
mod skills_cmd;
mod workspace_cmd;

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
    /// Run the whole system on 127.0.0.1 (SQLite, directories, bundled skills).
    Local(local_cmd::LocalArgs),
    /// Send a message to `clawless local` and print the reply.
    Chat(local_cmd::ChatArgs),
    /// The operator's side of node hosts: pairing codes and the registry.
    Nodes(node_cmd::NodesArgs),
    /// This machine as a node host: pair it, run the worker.
    Node(node_cmd::NodeArgs),
    /// Check commands against exec-approval policies (nothing is run).
    Exec(exec_cmd::ExecArgs),
    /// Connect chat platforms: Telegram webhooks, Discord commands.
    Channels(channels_cmd::ChannelsArgs),
    /// What sessions did: list them, show one's transcript with its tool calls.
    Sessions(sessions_cmd::SessionsArgs),
    /// Cron jobs and reminders: add, list, change, run them; wake the main session.
    Cron(cron_cmd::CronArgs),
    /// Check a deployment (or --local state) and say what to fix.
    Doctor(doctor_cmd::DoctorArgs),
    /// Agent workspaces: give one the default bootstrap files (`workspace init`).
    Workspace(workspace_cmd::WorkspaceArgs),
    /// clawless.yaml: print its JSON Schema, check a file.
    Config(config_cmd::ConfigArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    clawless_runtime::telemetry::init_cli_tracing();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Skills(args) => skills_cmd::run(args).await,
        Command::Local(args) => local_cmd::run_local(args).await,
        Command::Chat(args) => local_cmd::run_chat(args).await,
        Command::Nodes(args) => node_cmd::run_nodes(args).await,
        Command::Node(args) => node_cmd::run_node(args).await,
        Command::Exec(args) => exec_cmd::run(args).await,
        Command::Channels(args) => channels_cmd::run(args).await,
        Command::Sessions(args) => sessions_cmd::run(args).await,
        Command::Cron(args) => cron_cmd::run(args).await,
        Command::Doctor(args) => doctor_cmd::run(args).await,
        Command::Workspace(args) => workspace_cmd::run(args).await,
        Command::Config(args) => config_cmd::run(args).await,
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
