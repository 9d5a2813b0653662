//! Images shown to a vision model with a prompt, the first model that answers winning
//! (spec `openclaw-tools.md` §3.5–3.6): what the `image` tool and the understanding of a
//! photo sent to a model without vision share.
//!
//! [`VisionModels`] builds models by `provider/model`, once each; [`describe_images`] tries
//! them in order, each within a time limit, and says what every failed attempt returned.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clawless_base::media::ImageInput;
use clawless_base::model::{ModelProvider, ModelRequest, UserImages};
use clawless_base::transcript::{AssistantBlock, Message};

/// A model to try: its `provider/model`, and the model or why it cannot be built.
pub type Attempt = (String, Result<Arc<dyn ModelProvider>, String>);

/// Models built by name from a factory, once each.
pub struct VisionModels {
    factory: Option<clawless_llm::ModelFactory>,
    built: Mutex<BTreeMap<String, Arc<dyn ModelProvider>>>,
}

impl VisionModels {
    /// Models `factory` builds (`None`: none can be chosen by name).
    pub fn new(factory: Option<clawless_llm::ModelFactory>) -> Self {
        Self {
            factory,
            built: Mutex::default(),
        }
    }

    /// True when models can be built by name.
    pub fn can_build(&self) -> bool {
        self.factory.is_some()
    }

    /// The model named `model_ref`, built once.
    pub fn build(&self, model_ref: &str) -> Result<Arc<dyn ModelProvider>, String> {
        let Some(factory) = &self.factory else {
            return Err(format!("{model_ref}: models cannot be chosen here"));
        };
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(model) = built.get(model_ref) {
            return Ok(Arc::clone(model));
        }
        let model = factory(model_ref).map_err(|error| format!("{model_ref}: {error}"))?;
        built.insert(model_ref.to_owned(), Arc::clone(&model));
        Ok(model)
    }

    /// Each of `model_refs` as an attempt, in order.
    pub fn attempts(&self, model_refs: &[String]) -> Vec<Attempt> {
        model_refs
            .iter()
            .map(|model_ref| (model_ref.clone(), self.build(model_ref)))
            .collect()
    }
}

/// What one successful description returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// What the model said.
    pub text: String,
    /// The `provider/model` that said it.
    pub model: String,
}

/// Shows `images` with `prompt` to each model of `chain` in turn until one answers with text
/// within `timeout`. `Err`: one line per failed attempt.
pub async fn describe_images(
    chain: Vec<Attempt>, prompt: &str, images: Vec<ImageInput>, max_tokens: u32, timeout: Duration,
) -> Result<Description, Vec<String>> {
    let request = ModelRequest {
        system: String::new(),
        messages: vec![Message::User {
            text: prompt.to_owned(),
        }],
        tools: Vec::new(),
        max_tokens,
        images: vec![UserImages { message: 0, images }],
        thinking: Default::default(),
    };
    let mut failures = Vec::new();
    for (model_ref, model) in chain {
        let model = match model {
            Ok(model) => model,
            Err(error) => {
                failures.push(error);
                continue;
            }
        };
        match tokio::time::timeout(timeout, model.complete(&request)).await {
            Ok(Ok(response)) => {
                let text = answer_text(&response.content);
                if text.is_empty() {
                    failures.push(format!("{model_ref}: the model gave no description"));
                    continue;
                }
                return Ok(Description {
                    text,
                    model: model_ref,
                });
            }
            Ok(Err(error)) => failures.push(format!("{model_ref}: {error}")),
            Err(_) => failures.push(format!(
                "{model_ref}: no answer within {} s",
                timeout.as_secs()
            )),
        }
    }
    Err(failures)
}

/// The text blocks of an answer, joined and trimmed.
fn answer_text(content: &[AssistantBlock]) -> String {
    content
        .iter()
        .filter_map(|block| match block {
            AssistantBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

/// `text` cut to at most `max_chars` characters (an ellipsis marks a cut).
pub fn trimmed_to(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_descriptions_are_cut_to_the_limit_with_an_ellipsis() {
        assert_eq!(trimmed_to("  a cat  ", 500), "a cat");
        let long = "word ".repeat(200);
        let cut = trimmed_to(&long, 500);
        assert!(cut.ends_with("wo…") || cut.ends_with("word…"), "{cut}");
        assert!((495..=500).contains(&cut.chars().count()));
    }

    #[tokio::test]
    async fn a_model_that_cannot_be_built_is_skipped_and_named() {
        let models = VisionModels::new(None);
        let failures = describe_images(
            models.attempts(&["openai/gpt-5.4-mini".to_owned()]),
            "Describe the image.",
            Vec::new(),
            100,
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert_eq!(
            failures,
            ["openai/gpt-5.4-mini: models cannot be chosen here"]
        );
    }
}
