//! `clawless channels …`: connecting chat platforms to a deployment. Telegram: point the bot's
//! webhook at the API with a freshly generated secret token. Discord: register the `/ask`
//! command and the skills' slash commands with the application.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use clawless_channels::discord::{command_definitions, register_commands};
use clawless_channels::telegram::{
    DEFAULT_API_BASE_URL, generate_secret_token, get_me, set_webhook,
};
use clawless_runtime::{ClawlessConfig, SkillsService};

use crate::skills_cmd::{locations, machine_context, store_factory};

/// `clawless channels` options.
#[derive(Debug, Args)]
pub(crate) struct ChannelsArgs {
    /// The deployment's `clawless.yaml` (default: ./clawless.yaml).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: ChannelsCommand,
}

#[derive(Debug, Subcommand)]
enum ChannelsCommand {
    /// Telegram bots.
    Telegram {
        #[command(subcommand)]
        command: TelegramCommand,
    },
    /// Discord applications.
    Discord {
        #[command(subcommand)]
        command: DiscordCommand,
    },
}

#[derive(Debug, Subcommand)]
enum TelegramCommand {
    /// Point the bot's webhook at URL (…/webhook/telegram) with a new secret token, and
    /// print the token to configure as `channels.telegram.secretToken(Env)`.
    SetWebhook {
        /// The webhook URL, e.g. https://abc.execute-api.eu-west-1.amazonaws.com/webhook/telegram
        url: String,
    },
}

#[derive(Debug, Subcommand)]
enum DiscordCommand {
    /// Register `/ask` and the user-invocable skill commands of an agent.
    RegisterCommands {
        /// The agent whose skill commands are registered.
        #[arg(long, default_value = "main")]
        agent: String,
    },
}

fn load_config(path: Option<&PathBuf>) -> anyhow::Result<ClawlessConfig> {
    let default = PathBuf::from("clawless.yaml");
    let path = path.unwrap_or(&default);
    if !path.is_file() {
        bail!("no configuration at {} (pass --config)", path.display());
    }
    Ok(ClawlessConfig::from_file(path)?)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// Runs `clawless channels …`.
pub(crate) async fn run(args: ChannelsArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config.as_ref())?;
    let http = clawless_http::client_builder().build()?;
    match args.command {
        ChannelsCommand::Telegram {
            command: TelegramCommand::SetWebhook { url },
        } => {
            let Some(telegram) = &config.channels.telegram else {
                bail!("clawless.yaml has no channels.telegram block");
            };
            let token = telegram
                .bot_token
                .clone()
                .or_else(|| telegram.bot_token_env.as_deref().and_then(env))
                .context("channels.telegram: set botToken or botTokenEnv (and export it)")?;
            let api = telegram
                .api_base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_API_BASE_URL.to_owned());
            let secret = generate_secret_token().context("generating a secret token")?;
            set_webhook(&http, &api, &token, &url, &secret)
                .await
                .context("setWebhook")?;
            let bot = get_me(&http, &api, &token).await.context("getMe")?;
            println!("webhook set to {url}");
            println!(
                "secret token (store it as channels.telegram.secretToken or in the env var secretTokenEnv names):"
            );
            println!("{secret}");
            if let Some(username) = bot.username {
                println!("bot username (channels.telegram.botUsername): {username}");
            }
        }
        ChannelsCommand::Discord {
            command: DiscordCommand::RegisterCommands { agent },
        } => {
            let Some(discord) = &config.channels.discord else {
                bail!("clawless.yaml has no channels.discord block");
            };
            let resolved = discord.resolve(&env)?;
            let token = resolved
                .bot_token
                .clone()
                .context("channels.discord: registering commands needs botToken or botTokenEnv")?;
            let stores = store_factory(&locations(&config)).await;
            let skills = SkillsService::new(config.clone(), &stores)?;
            let loaded = skills.load(&agent).await?;
            let specs = skills.commands(&agent, &machine_context(&loaded)).await?;
            let definitions = command_definitions(&specs);
            register_commands(
                &http,
                &resolved.api_base_url,
                &resolved.application_id,
                &token,
                &definitions,
            )
            .await
            .context("registering the commands")?;
            let names: Vec<&str> = definitions
                .iter()
                .filter_map(|definition| definition["name"].as_str())
                .collect();
            println!(
                "registered {} commands: /{}",
                names.len(),
                names.join(", /")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
