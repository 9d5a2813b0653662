//! The chat channels of a deployment, built once from `clawless.yaml` and shared by the
//! webhook function, the turn function and `clawless local`: each channel's inbound side
//! (verification, who may talk) for ingress, and its outbound side for replies.

use std::collections::BTreeMap;
use std::sync::Arc;

use clawless_base::object_store::ObjectStore;
use clawless_channels::generic::GenericMedia;
use clawless_channels::media::{MediaDownloader, MediaIngest, WithMedia};
use clawless_channels::media_links::MediaPublisher;
use clawless_channels::{
    ChannelOutbox, DiscordChannel, DiscordSender, GenericWebhook, HttpReplySender, SlackChannel,
    SlackSender,
};
use clawless_core::outbox::Outbox;
use clawless_core::session::Inbox;
use clawless_core::tools::WebFetcher;

use crate::config::{ClawlessConfig, GENERIC_DEFAULT_ALLOW_FROM, GENERIC_DEFAULT_GROUP_POLICY};
use crate::ingress::{ChannelAccess, ChatChannel};

/// The [`ChannelAccess`] of a platform channel's config: every platform's config names its
/// owners, `allowFrom`, `groupPolicy` and unauthorized reply alike.
macro_rules! access_of {
    ($config:expr, $require_mention:expr) => {
        ChannelAccess {
            owners: $config.owners.clone(),
            allow_from: $config.allow_from.clone(),
            group_policy: $config.group_policy.unwrap_or_default(),
            require_mention: $require_mention,
            unauthorized_reply: $config.unauthorized_reply.clone(),
        }
    };
}

/// Everything about channels that is not in the config file: where secrets come from and the
/// defaults of the running mode.
pub struct ChannelSetup<'a> {
    /// The deployment's configuration.
    pub config: &'a ClawlessConfig,
    /// Environment lookup (secrets named by `*Env` keys).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// HTTP client for replies.
    pub http: reqwest::Client,
    /// The generic channel's secret when the config names none (local mode makes one).
    pub generic_secret: Option<String>,
    /// The generic channel's reply URL when the config names none.
    pub generic_reply_url: Option<String>,
    /// The generic channel's owners when the config names none (`clawless chat`'s sender).
    pub generic_owners: Vec<String>,
    /// Claims of sent reply chunks, so a retried turn never sends a chunk twice.
    pub sent_chunks: Arc<dyn Inbox>,
}

/// The configured channels.
#[derive(Default)]
pub struct ChannelSet {
    /// Inbound sides, by channel id.
    pub inbound: BTreeMap<String, ChatChannel>,
    /// Outbound sides, routed by a reply's channel.
    pub outbox: ChannelOutbox,
    /// How each channel fetches the files people send, by channel id.
    downloaders: BTreeMap<String, Arc<dyn MediaDownloader>>,
    /// The generic channel's reply sender as built, before any media publisher is added.
    generic_sender: Option<HttpReplySender>,
    /// The generic channel's cap on one attachment, in bytes.
    generic_media_max_bytes: u64,
}

impl std::fmt::Debug for ChannelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelSet")
            .field("inbound", &self.inbound.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl ChannelSet {
    /// Builds every channel the config (and `setup`'s defaults) enable. A channel without its
    /// secret is left out with a warning: its webhook answers 404.
    pub fn build(setup: &ChannelSetup<'_>) -> Self {
        let mut set = Self::default();
        set.add_generic(setup);
        set.add_platforms(setup);
        set
    }

    /// Stores the files people send on every channel in `blobs` (`media/inbound/…`), once
    /// per platform event. Without this, attachments reach the agent as skipped.
    #[must_use]
    pub fn with_blob_store(mut self, blobs: Arc<dyn ObjectStore>) -> Self {
        for (id, channel) in &mut self.inbound {
            let Some(downloader) = self.downloaders.get(id) else {
                continue;
            };
            let ingest = MediaIngest::new(
                channel.platform.id(),
                Arc::clone(&blobs),
                Arc::clone(downloader),
            );
            channel.platform = Arc::new(WithMedia::new(Arc::clone(&channel.platform), ingest));
        }
        self
    }

    /// Fetches the generic channel's `url` attachments with `fetcher` instead of the default
    /// (`web_fetch`'s address policy); tests use it to reach fakes on loopback. Call it before
    /// [`ChannelSet::with_blob_store`].
    #[must_use]
    pub fn with_generic_fetcher(mut self, fetcher: Arc<dyn WebFetcher>) -> Self {
        if self
            .downloaders
            .contains_key(clawless_channels::generic::CHANNEL_ID)
        {
            self.downloaders.insert(
                clawless_channels::generic::CHANNEL_ID.to_owned(),
                Arc::new(GenericMedia::new(
                    self.generic_media_max_bytes,
                    Some(fetcher),
                )),
            );
        }
        self
    }

    /// Hands the generic channel's reply files out as links made by `publisher` (stored in
    /// the blob store, linked by a presigned S3 URL or the local media route) instead of
    /// inline base64.
    #[must_use]
    pub fn with_reply_links(mut self, publisher: MediaPublisher) -> Self {
        let Some(sender) = self.generic_sender.clone() else {
            return self;
        };
        let id = clawless_channels::generic::CHANNEL_ID;
        let outbox: Arc<dyn Outbox> = Arc::new(sender.with_media_publisher(publisher));
        self.outbox = std::mem::take(&mut self.outbox).with_channel(id, Arc::clone(&outbox));
        if let Some(channel) = self.inbound.get_mut(id) {
            channel.outbox = Some(outbox);
        }
        self
    }

    fn add_platforms(&mut self, setup: &ChannelSetup<'_>) {
        let channels = &setup.config.channels;
        if let Some(config) = &channels.telegram {
            match config.resolve(setup.env) {
                Ok(resolved) => self.add_with_media(
                    ChatChannel {
                        platform: Arc::new(resolved.channel()),
                        access: access_of!(config, config.require_mention()),
                        outbox: Some(Arc::new(
                            resolved.sender(setup.http.clone(), Arc::clone(&setup.sent_chunks)),
                        )),
                    },
                    Arc::new(resolved.media(setup.http.clone())),
                ),
                Err(err) => tracing::error!(error = %err, "channels.telegram left out"),
            }
        }
        if let Some(config) = &channels.slack {
            match config.resolve(setup.env) {
                Ok(resolved) => self.add_with_media(
                    ChatChannel {
                        platform: Arc::new(SlackChannel::from_config(&resolved)),
                        // Slack threads are addressed by their mention; every thread message is
                        // the conversation's.
                        access: access_of!(config, false),
                        outbox: Some(Arc::new(SlackSender::from_config(
                            setup.http.clone(),
                            &resolved,
                            Arc::clone(&setup.sent_chunks),
                        ))),
                    },
                    Arc::new(resolved.media(setup.http.clone())),
                ),
                Err(err) => tracing::error!(error = %err, "channels.slack left out"),
            }
        }
        if let Some(config) = &channels.discord {
            match config.resolve(setup.env) {
                Ok(resolved) => self.add_with_media(
                    ChatChannel {
                        platform: Arc::new(DiscordChannel::new(resolved.public_key)),
                        // Commands are always addressed to the bot.
                        access: access_of!(config, false),
                        outbox: Some(Arc::new(DiscordSender::new(
                            setup.http.clone(),
                            &resolved,
                            Arc::clone(&setup.sent_chunks),
                        ))),
                    },
                    Arc::new(resolved.media(setup.http.clone())),
                ),
                Err(err) => tracing::error!(error = %err, "channels.discord left out"),
            }
        }
    }

    fn add_with_media(&mut self, channel: ChatChannel, downloader: Arc<dyn MediaDownloader>) {
        self.downloaders
            .insert(channel.platform.id().to_owned(), downloader);
        self.add(channel);
    }

    fn add(&mut self, channel: ChatChannel) {
        let id = channel.platform.id();
        if let Some(outbox) = &channel.outbox {
            self.outbox = std::mem::take(&mut self.outbox).with_channel(id, Arc::clone(outbox));
        }
        self.inbound.insert(id.to_owned(), channel);
    }

    fn add_generic(&mut self, setup: &ChannelSetup<'_>) {
        let generic = setup.config.channels.generic.clone().unwrap_or_default();
        // `resolve_secret` falls back to `CLAWLESS_GENERIC_SECRET`.
        let secret = generic
            .resolve_secret(setup.env)
            .or_else(|| setup.generic_secret.clone());
        let Some(secret) = secret else {
            tracing::warn!("no generic channel secret configured: /webhook/generic answers 404");
            return;
        };
        let max_bytes = match clawless_channels::media::media_max_bytes(
            generic.media_max_mb,
            clawless_channels::generic::DEFAULT_MEDIA_MAX_MB,
        ) {
            Ok(max_bytes) => max_bytes,
            Err(reason) => {
                tracing::error!(%reason, "channels.generic left out");
                return;
            }
        };
        self.generic_media_max_bytes = max_bytes;
        self.generic_sender = generic
            .reply_url
            .clone()
            .or_else(|| setup.generic_reply_url.clone())
            .map(|url| HttpReplySender::new(setup.http.clone(), url, secret.as_bytes()));
        let outbox = self
            .generic_sender
            .clone()
            .map(|sender| Arc::new(sender) as Arc<dyn Outbox>);
        let owners = if generic.owners.is_empty() {
            setup.generic_owners.clone()
        } else {
            generic.owners.clone()
        };
        // `url` attachments go through `web_fetch`'s address policy.
        let media = Arc::new(GenericMedia::new(
            max_bytes,
            crate::web_fetcher::default_web_fetcher(),
        ));
        self.add_with_media(
            ChatChannel {
                platform: Arc::new(GenericWebhook::new(secret.as_bytes())),
                access: ChannelAccess {
                    owners,
                    allow_from: generic
                        .allow_from
                        .unwrap_or_else(|| vec![GENERIC_DEFAULT_ALLOW_FROM.to_owned()]),
                    group_policy: generic.group_policy.unwrap_or(GENERIC_DEFAULT_GROUP_POLICY),
                    require_mention: false,
                    unauthorized_reply: generic.unauthorized_reply,
                },
                outbox,
            },
            media,
        );
    }
}
