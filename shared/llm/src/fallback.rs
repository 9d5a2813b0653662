//! A chain of models tried in order: when one fails in a way another model could get past,
//! the next one is asked. Each link is usually a [`crate::retry::Retrying`] provider, so a
//! link gives up only after its own retries.
//!
//! Falls back on retryable errors (rate limit, 5xx, timeout, transport) **and** on `Auth`: a
//! revoked or missing key for one provider should not silence the agent when another is
//! configured. `Invalid` (400/404/422, unreadable response) does not fall back: the request
//! itself is at fault and the first model's message is the useful one.
//!
//! Images: the chain [`sees_images`](ModelProvider::sees_images) when its primary does, since
//! the primary answers nearly every call; a link that does not see them is handed the request
//! without its images (the message text still stands), never refused for having them.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::model::{ModelError, ModelProvider, ModelRequest, ModelResponse};

/// Whether the chain moves on to the next model after `error`.
pub fn should_fall_back(error: &ModelError) -> bool {
    error.is_retryable() || matches!(error, ModelError::Auth { .. })
}

/// Models tried in order until one answers.
#[derive(Debug, Clone)]
pub struct FallbackChain {
    primary: Arc<dyn ModelProvider>,
    fallbacks: Vec<Arc<dyn ModelProvider>>,
}

impl FallbackChain {
    /// The primary model, then `fallbacks` in order.
    pub fn new(primary: Arc<dyn ModelProvider>, fallbacks: Vec<Arc<dyn ModelProvider>>) -> Self {
        Self { primary, fallbacks }
    }

    /// `model_ref` of every link, primary first.
    pub fn model_refs(&self) -> Vec<String> {
        self.links().map(|link| link.model_ref()).collect()
    }

    fn links(&self) -> impl Iterator<Item = &Arc<dyn ModelProvider>> {
        std::iter::once(&self.primary).chain(self.fallbacks.iter())
    }
}

#[async_trait]
impl ModelProvider for FallbackChain {
    /// The first answer wins; its `model` names the link that gave it. When every link fails,
    /// the last link's error is returned.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let mut links = self.links().peekable();
        loop {
            let Some(link) = links.next() else {
                // Unreachable: the loop returns on the last link. Kept total without a panic.
                return Err(ModelError::Invalid {
                    provider: self.primary.model_ref(),
                    message: "fallback chain has no models".to_owned(),
                });
            };
            let shown = if link.sees_images() || request.images.is_empty() {
                Cow::Borrowed(request)
            } else {
                Cow::Owned(ModelRequest {
                    images: Vec::new(),
                    ..request.clone()
                })
            };
            match link.complete(&shown).await {
                Ok(response) => return Ok(response),
                Err(error) if should_fall_back(&error) && links.peek().is_some() => {
                    tracing::warn!(
                        from = %link.model_ref(),
                        to = %links.peek().map(|next| next.model_ref()).unwrap_or_default(),
                        error = %error,
                        "model failed; falling back"
                    );
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn model_ref(&self) -> String {
        self.primary.model_ref()
    }

    fn sees_images(&self) -> bool {
        self.primary.sees_images()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_and_retryable_errors_fall_back_invalid_does_not() {
        let p = || "p".to_owned();
        assert!(should_fall_back(&ModelError::Auth {
            provider: p(),
            message: String::new()
        }));
        assert!(should_fall_back(&ModelError::Server {
            provider: p(),
            status: 503
        }));
        assert!(!should_fall_back(&ModelError::Invalid {
            provider: p(),
            message: String::new()
        }));
    }
}
