//! `image`: shows one or more images to a vision model with a prompt and answers with what
//! the model says about them.
//!
//! Images come from the session's workspace (resolved exactly as `read` resolves a path, so
//! a sandboxed session sees only its own files and never the owner's memory), from the
//! attachments the media note names (`media/inbound/…` in the blob store), from a `data:` URL,
//! or from an `http(s)` URL fetched through the turn's web access (refused for a sandboxed
//! session). Only PNG, JPEG, GIF and WebP are accepted, by their first bytes; each is scaled
//! down to `agents.defaults.imageMaxDimensionPx` before it is sent.
//!
//! The model is `agents.defaults.imageModel` (primary, then fallbacks), else the session's
//! own model when it sees images; a `model` argument names another allowed one. The tool is
//! registered only when one of these can resolve, and offered in short form until called.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_base::media::ImageInput;
use clawless_base::model::{ModelProvider, ToolSpec};
use clawless_base::object_store::ObjectStore;
use clawless_core::tools::paths::resolve_read_path;
use clawless_core::tools::{ToolContext, ToolOutput};
use clawless_core::turn::state::SessionState;
use serde_json::{Value, json};

use super::{RuntimeTool, ToolCallContext, ToolOutcome, ToolRegistry};
use crate::media::describe::{Attempt, VisionModels, describe_images};
use crate::turn_service::{TurnError, TurnService};

/// The tool's name.
const NAME: &str = "image";
/// The prompt when the call gives none.
const DEFAULT_PROMPT: &str = "Describe the image.";
/// Images per call unless `maxImages` says otherwise.
const DEFAULT_MAX_IMAGES: usize = 20;
/// Largest image, in MB, unless `maxBytesMb` says otherwise.
const DEFAULT_MAX_MB: f64 = 6.0;
/// Output tokens of one description.
const MAX_TOKENS: u32 = 4096;
/// How long one model call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long fetching one remote image may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);
/// The prefix of attachments in the blob store, as the media note names them.
const INBOUND_PREFIX: &str = "media/inbound/";
/// The refusal when no model can look at images.
const NO_MODEL: &str = "No image model configured. Set agents.defaults.imageModel.primary or agents.defaults.imageModel.fallbacks.";

/// Registers `image` when a model can resolve: `agents.defaults.imageModel` (with a model
/// factory to build it), or the configured model when it sees images.
pub(super) fn register(registry: &mut ToolRegistry, service: &TurnService) {
    let defaults = &service.config().agents.defaults;
    let configured = defaults
        .image_model
        .as_ref()
        .map(crate::config::ImageModelConfig::models)
        .unwrap_or_default();
    let factory = service.model_factory.clone();
    let buildable = !configured.is_empty() && factory.is_some();
    if !buildable && !service.deps.model.sees_images() {
        return;
    }
    let mut allowed = service.config().models.choosable();
    allowed.extend(configured.iter().cloned());
    registry.register(ImageTool {
        allowed,
        configured,
        models: VisionModels::new(factory),
        default_model: Arc::clone(&service.deps.model),
        blobs: service.blobs.clone(),
        max_px: defaults.image_max_dimension_px(),
    });
}

/// The `image` tool.
struct ImageTool {
    /// The models a call's `model` may name: those `/new <model>` may choose, and
    /// `imageModel`'s.
    allowed: Vec<String>,
    /// `agents.defaults.imageModel`, primary first.
    configured: Vec<String>,
    /// Builds models named `provider/model`, once each.
    models: VisionModels,
    /// The service's configured model (a session without `/new <model>` uses it).
    default_model: Arc<dyn ModelProvider>,
    /// The blob store holding attachments (`media/inbound/…`).
    blobs: Option<Arc<dyn ObjectStore>>,
    /// `agents.defaults.imageMaxDimensionPx`.
    max_px: u32,
}

/// One image as the call names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ImageRef {
    /// A path: workspace-relative, absolute, `~/…`, or a `file://` URL's path.
    Path(String),
    /// A `data:` URL.
    Data(String),
    /// An `http(s)` URL.
    Remote(String),
}

/// The call's arguments.
#[derive(Debug)]
struct ImageArgs {
    prompt: String,
    images: Vec<(String, ImageRef)>,
    model: Option<String>,
    max_bytes: usize,
}

/// Reads the call's arguments, or the text of the refusal.
fn parse_args(input: &Value) -> Result<ImageArgs, String> {
    let text = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|value| !value.is_empty())
    };
    let prompt = text("prompt").unwrap_or(DEFAULT_PROMPT).to_owned();
    let listed = input
        .get("images")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    let mut names: Vec<String> = Vec::new();
    for raw in input
        .get("image")
        .and_then(Value::as_str)
        .into_iter()
        .chain(listed)
    {
        let name = raw.trim();
        let name = name.strip_prefix('@').unwrap_or(name).trim();
        if !name.is_empty() && !names.iter().any(|known| known == name) {
            names.push(name.to_owned());
        }
    }
    if names.is_empty() {
        return Err("image required".to_owned());
    }
    let max_images = input
        .get("maxImages")
        .and_then(Value::as_u64)
        .filter(|max| *max > 0)
        .map_or(DEFAULT_MAX_IMAGES, |max| {
            usize::try_from(max).unwrap_or(usize::MAX)
        });
    if names.len() > max_images {
        return Err(format!(
            "Too many images: {} provided, maximum is {max_images}. Please reduce the number of images.",
            names.len()
        ));
    }
    let max_mb = input
        .get("maxBytesMb")
        .and_then(Value::as_f64)
        .filter(|mb| mb.is_finite() && *mb > 0.0)
        .unwrap_or(DEFAULT_MAX_MB);
    // At most a few GB: the cast saturates.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let max_bytes = (max_mb * 1024.0 * 1024.0) as usize;
    let images = names
        .into_iter()
        .map(|name| parse_ref(&name).map(|parsed| (name, parsed)))
        .collect::<Result<_, _>>()?;
    Ok(ImageArgs {
        prompt,
        images,
        model: text("model").map(str::to_owned),
        max_bytes,
    })
}

/// What `name` refers to, or the refusal of a scheme the tool does not open.
fn parse_ref(name: &str) -> Result<ImageRef, String> {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("data:") {
        return Ok(ImageRef::Data(name.to_owned()));
    }
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(ImageRef::Remote(name.to_owned()));
    }
    if lower.starts_with("file://") {
        return Ok(ImageRef::Path(name["file://".len()..].to_owned()));
    }
    // A scheme of two letters or more (one letter may be a drive).
    let scheme = name.split_once(':').map(|(scheme, _)| scheme);
    let is_scheme = scheme.is_some_and(|scheme| {
        scheme.len() >= 2
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if is_scheme {
        return Err(format!(
            "Unsupported image reference: {name}. Use a file path, a file:// URL, a data: URL, or an http(s) URL."
        ));
    }
    Ok(ImageRef::Path(name.to_owned()))
}

/// The kind of `bytes` that are not an image, for the refusal.
fn kind_of(bytes: &[u8], declared: Option<&str>) -> String {
    if let Some(declared) = declared.map(str::trim).filter(|kind| !kind.is_empty()) {
        return declared
            .split(';')
            .next()
            .unwrap_or(declared)
            .trim()
            .to_owned();
    }
    if bytes.starts_with(b"%PDF") {
        "application/pdf".to_owned()
    } else if std::str::from_utf8(bytes).is_ok() {
        "text/plain".to_owned()
    } else {
        "application/octet-stream".to_owned()
    }
}

/// Checks `bytes` are an image within `max_bytes`, and scales it to `max_px`.
fn to_image(
    name: &str, bytes: Vec<u8>, declared: Option<&str>, max_bytes: usize, max_px: u32,
) -> Result<ImageInput, String> {
    let Some(media_type) = crate::media_input::image_type(&bytes) else {
        return Err(format!(
            "Unsupported media type: {}",
            kind_of(&bytes, declared)
        ));
    };
    if bytes.len() > max_bytes {
        return Err(too_large(name, max_bytes));
    }
    let input = ImageInput {
        media_type: media_type.to_owned(),
        data: bytes,
    };
    crate::media::resize::fit_image(input, max_px)
        .map_err(|error| format!("Could not read image {name}: {error}"))
}

fn too_large(name: &str, max_bytes: usize) -> String {
    #[allow(clippy::cast_precision_loss)]
    let mb = max_bytes as f64 / (1024.0 * 1024.0);
    format!("Image too large: {name} is over {mb:.1} MB (maxBytesMb).")
}

/// A `data:` URL's declared type and decoded bytes.
fn decode_data_url(url: &str) -> Result<(Option<String>, Vec<u8>), String> {
    let invalid = || format!("Invalid data: URL: {}", preview(url));
    let (header, payload) = url["data:".len()..].split_once(',').ok_or_else(invalid)?;
    let Some(declared) = header.strip_suffix(";base64") else {
        return Err(format!(
            "Unsupported data: URL (only base64 is read): {}",
            preview(url)
        ));
    };
    let compact: String = payload.chars().filter(|c| !c.is_whitespace()).collect();
    // Base64 through the image type's own field (the crate is not a dependency here).
    let decoded: ImageInput =
        serde_json::from_value(json!({"mediaType": "", "data": compact})).map_err(|_| invalid())?;
    let bytes = decoded.data;
    Ok((
        Some(declared.to_owned()).filter(|kind| !kind.is_empty()),
        bytes,
    ))
}

/// The start of a long reference, for messages.
fn preview(text: &str) -> String {
    match text.char_indices().nth(48) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

impl ImageTool {
    /// The model the session's turns use: its `/new <model>` choice, else the configured one.
    fn session_model(&self, state: &SessionState) -> Arc<dyn ModelProvider> {
        state
            .meta
            .model_override
            .as_deref()
            .and_then(|chosen| self.models.build(chosen).ok())
            .unwrap_or_else(|| Arc::clone(&self.default_model))
    }

    /// The models to try, in order: the call's `model`, else `imageModel`, else the
    /// session's model when it sees images. `Err`: the refusal.
    fn chain(
        &self, requested: Option<&str>, session: Arc<dyn ModelProvider>,
    ) -> Result<Vec<Attempt>, String> {
        if let Some(requested) = requested {
            if !self.allowed.iter().any(|allowed| allowed == requested) {
                return Err(format!(
                    "Model not allowed here: {requested}. Choose one of: {}.",
                    self.allowed.join(", ")
                ));
            }
            return Ok(vec![(requested.to_owned(), self.models.build(requested))]);
        }
        if !self.configured.is_empty() && self.models.can_build() {
            return Ok(self.models.attempts(&self.configured));
        }
        if session.sees_images() {
            return Ok(vec![(session.model_ref(), Ok(session))]);
        }
        Err(NO_MODEL.to_owned())
    }

    /// Loads one image.
    async fn load(
        &self, name: &str, reference: &ImageRef, context: &ToolContext, max_bytes: usize,
    ) -> Result<ImageInput, String> {
        let limit = max_bytes.saturating_add(1);
        let (bytes, declared) = match reference {
            ImageRef::Data(url) => {
                let (declared, bytes) = decode_data_url(url)?;
                (bytes, declared)
            }
            ImageRef::Remote(url) => {
                if context.sandbox.is_some() {
                    return Err("Sandboxed image tool does not allow remote URLs.".to_owned());
                }
                let Some(web) = &context.web else {
                    return Err("Remote images cannot be fetched here.".to_owned());
                };
                let page = web
                    .fetch(url, limit, FETCH_TIMEOUT)
                    .await
                    .map_err(|error| format!("Could not fetch {url}: {error}"))?;
                if !(200..300).contains(&page.status) {
                    return Err(format!("Could not fetch {url}: HTTP {}", page.status));
                }
                if page.truncated {
                    return Err(too_large(name, max_bytes));
                }
                (page.body, page.content_type)
            }
            ImageRef::Path(path) => (self.read_path(path, context, max_bytes).await?, None),
        };
        if bytes.len() > max_bytes {
            return Err(too_large(name, max_bytes));
        }
        to_image(name, bytes, declared.as_deref(), max_bytes, self.max_px)
    }

    /// Reads a path: an attachment the media note names from the blob store, else a file
    /// as `read` opens it.
    async fn read_path(
        &self, path: &str, context: &ToolContext, max_bytes: usize,
    ) -> Result<Vec<u8>, String> {
        let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX);
        if let (Some(blobs), true) = (&self.blobs, path.starts_with(INBOUND_PREFIX))
            && !path.split('/').any(|segment| segment == "..")
            && let Ok(Some(object)) = blobs.get(path, limit).await
        {
            return Ok(object.bytes);
        }
        let resolved = resolve_read_path(context, path).map_err(|error| error.to_string())?;
        match resolved.store.get(&resolved.key, limit).await {
            Ok(Some(object)) => Ok(object.bytes),
            Ok(None) => Err(format!("File not found: {path}")),
            Err(clawless_base::object_store::StoreError::TooLarge { .. }) => {
                Err(too_large(path, max_bytes))
            }
            Err(error) => Err(format!("Could not read {path}: {error}")),
        }
    }

    /// Runs one call: the images loaded, then the models tried in order.
    async fn describe(
        &self, input: &Value, context: Option<&ToolContext>, session: Arc<dyn ModelProvider>,
    ) -> ToolOutput {
        let args = match parse_args(input) {
            Ok(args) => args,
            Err(refusal) => return ToolOutput::error(refusal),
        };
        let chain = match self.chain(args.model.as_deref(), session) {
            Ok(chain) => chain,
            Err(refusal) => return ToolOutput::error(refusal),
        };
        let Some(context) = context else {
            return ToolOutput::error("The image tool cannot run here.");
        };
        let mut images = Vec::with_capacity(args.images.len());
        for (name, reference) in &args.images {
            match self.load(name, reference, context, args.max_bytes).await {
                Ok(image) => images.push(image),
                Err(refusal) => return ToolOutput::error(refusal),
            }
        }
        match describe_images(chain, &args.prompt, images, MAX_TOKENS, CALL_TIMEOUT).await {
            Ok(description) => ToolOutput::ok(description.text),
            Err(failures) => ToolOutput::error(format!(
                "Image analysis failed. Attempts:\n- {}",
                failures.join("\n- ")
            )),
        }
    }
}

#[async_trait]
impl RuntimeTool for ImageTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_owned(),
            description: "Analyze one or more images with a vision model. Use image for one path or URL, images for several (up to 20). Accepts workspace paths, attachment paths from the media note, data: URLs and http(s) URLs. Use it only for images not already shown to you in the conversation.".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "What to look for (default: Describe the image.)."},
                    "image": {"type": "string", "description": "One image path or URL."},
                    "images": {"type": "array", "items": {"type": "string"}, "description": "Several image paths or URLs (up to maxImages, default 20)."},
                    "model": {"type": "string", "description": "A provider/model to use instead of the configured image model."},
                    "maxBytesMb": {"type": "number", "description": "Largest image accepted, in MB (default 6)."},
                    "maxImages": {"type": "number", "description": "Most images accepted (default 20)."}
                }
            }),
        }
    }

    /// Rarely needed, and its schema is long: offered in short form until first called.
    fn deferred(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let session = self.session_model(context.state);
        let output = self
            .describe(&context.call.input, context.tool_context, session)
            .await;
        Ok(ToolOutcome::Done(output))
    }
}

#[cfg(test)]
mod tests {
    use clawless_core::testing::InMemoryObjectStore;
    use clawless_core::tools::{SandboxView, Workspace};
    use clawless_llm::testing::{ScriptedReply, ScriptedServer};
    use clawless_llm::{AnthropicModel, ApiKey, HttpClient};

    use super::*;

    /// A 1×1 PNG.
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
        0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8,
        0xCF, 0xC0, 0xF0, 0x1F, 0x00, 0x05, 0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D, 0x1D, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ];
    /// The PNG in base64.
    const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";

    fn refusal(input: Value) -> String {
        match parse_args(&input) {
            Ok(args) => panic!("accepted: {args:?}"),
            Err(text) => text,
        }
    }

    #[test]
    fn references_are_merged_trimmed_deduplicated_and_sorted_by_form() {
        let args = parse_args(&json!({
            "image": " @shots/a.png ",
            "images": ["shots/a.png", "file:///ws/b.png", "data:image/png;base64,AAAA", "https://example.com/c.jpg", "~/d.gif"]
        }))
        .expect("valid");
        let forms: Vec<_> = args.images.into_iter().map(|(_, form)| form).collect();
        assert_eq!(
            forms,
            [
                ImageRef::Path("shots/a.png".to_owned()),
                ImageRef::Path("/ws/b.png".to_owned()),
                ImageRef::Data("data:image/png;base64,AAAA".to_owned()),
                ImageRef::Remote("https://example.com/c.jpg".to_owned()),
                ImageRef::Path("~/d.gif".to_owned()),
            ]
        );
        assert_eq!(args.prompt, DEFAULT_PROMPT);
        assert_eq!(args.max_bytes, 6 * 1024 * 1024);
    }

    #[test]
    fn missing_unsupported_and_too_many_references_are_refused_with_their_texts() {
        assert_eq!(refusal(json!({})), "image required");
        assert_eq!(
            refusal(json!({"image": "  @ ", "images": []})),
            "image required"
        );
        assert_eq!(
            refusal(json!({"image": "image:0"})),
            "Unsupported image reference: image:0. Use a file path, a file:// URL, a data: URL, or an http(s) URL."
        );
        assert!(
            refusal(json!({"image": "ftp://host/a.png"}))
                .starts_with("Unsupported image reference: ftp://")
        );
        let many: Vec<String> = (0..21).map(|n| format!("{n}.png")).collect();
        assert_eq!(
            refusal(json!({"images": many})),
            "Too many images: 21 provided, maximum is 20. Please reduce the number of images."
        );
        assert_eq!(
            refusal(json!({"images": ["a.png", "b.png"], "maxImages": 1})),
            "Too many images: 2 provided, maximum is 1. Please reduce the number of images."
        );
    }

    #[test]
    fn image_model_is_one_model_or_a_primary_with_fallbacks() {
        let models = |yaml: &str| {
            crate::ClawlessConfig::from_yaml(yaml, "test")
                .expect("valid config")
                .agents
                .defaults
                .image_model
                .map(|config| config.models())
        };
        assert_eq!(
            models("agents:\n  defaults:\n    imageModel: openai/gpt-4o\n"),
            Some(vec!["openai/gpt-4o".to_owned()])
        );
        assert_eq!(
            models(
                "agents:\n  defaults:\n    imageModel:\n      primary: a/x\n      fallbacks: [b/y, ' ']\n"
            ),
            Some(vec!["a/x".to_owned(), "b/y".to_owned()])
        );
        assert_eq!(models("agents:\n  defaults: {}\n"), None);
    }

    fn workspace(store: &InMemoryObjectStore, prefix: &str) -> Workspace {
        Workspace {
            store: Arc::new(store.clone()),
            prefix: prefix.to_owned(),
        }
    }

    fn context(store: &InMemoryObjectStore) -> ToolContext {
        ToolContext {
            workspace: workspace(store, "ws/"),
            skill_sources: Vec::new(),
            home_dirs: Vec::new(),
            web: None,
            session: Default::default(),
            sandbox: None,
        }
    }

    /// A sandboxed session's view: its own workspace, and the owner's at `/agent`.
    fn sandboxed(store: &InMemoryObjectStore) -> ToolContext {
        ToolContext {
            workspace: workspace(store, "ws/sandboxes/s1/"),
            sandbox: Some(SandboxView {
                agent: Some(workspace(store, "ws/")),
            }),
            ..context(store)
        }
    }

    fn store() -> InMemoryObjectStore {
        let store = InMemoryObjectStore::named("bucket");
        for (key, bytes) in [
            ("ws/shots/a.png", PNG),
            ("ws/MEMORY.md", b"the owner's secret".as_slice()),
            ("ws/notes.txt", b"just text".as_slice()),
            ("ws/sandboxes/s1/mine.png", PNG),
            ("media/inbound/m1.png", PNG),
        ] {
            store
                .insert(key, bytes)
                .expect("the in-memory store takes every write");
        }
        store
    }

    fn tool(
        server: &ScriptedServer, blobs: &InMemoryObjectStore,
    ) -> (ImageTool, Arc<dyn ModelProvider>) {
        let model: Arc<dyn ModelProvider> = Arc::new(
            AnthropicModel::new(HttpClient::new().expect("client"), "claude-test")
                .with_api_key(ApiKey::new("sk-ant-test"))
                .with_base_url(server.base_url())
                .with_images(true),
        );
        let tool = ImageTool {
            allowed: vec!["openai/gpt-4o".to_owned()],
            configured: Vec::new(),
            models: VisionModels::new(None),
            default_model: Arc::clone(&model),
            blobs: Some(Arc::new(blobs.clone())),
            max_px: 1200,
        };
        (tool, model)
    }

    fn answer(text: &str) -> Value {
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 3}
        })
    }

    /// The content blocks of request `index` to the model.
    fn blocks(server: &ScriptedServer, index: usize) -> Vec<Value> {
        let body = &server.requests_to("/v1/messages")[index].body;
        match &body["messages"][0]["content"] {
            Value::Array(blocks) => blocks.clone(),
            other => vec![json!({"type": "text", "text": other})],
        }
    }

    #[tokio::test]
    async fn workspace_attachment_and_data_url_images_reach_the_model_with_the_prompt() {
        let server = ScriptedServer::start().await;
        server.push("/v1/messages", ScriptedReply::json(answer("A red dot.")));
        server.push("/v1/messages", ScriptedReply::json(answer("Two dots.")));
        let files = store();
        let (tool, model) = tool(&server, &files);
        let context = context(&files);

        let output = tool
            .describe(
                &json!({"image": "shots/a.png", "prompt": "What colour?"}),
                Some(&context),
                Arc::clone(&model),
            )
            .await;
        assert_eq!(
            (output.text.as_str(), output.is_error),
            ("A red dot.", false)
        );
        let sent = blocks(&server, 0);
        let texts: Vec<_> = sent
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect();
        assert_eq!(texts, ["What colour?"]);
        let images: Vec<_> = sent
            .iter()
            .filter(|block| block["type"] == "image")
            .collect();
        assert_eq!(images.len(), 1, "{sent:?}");
        assert_eq!(images[0]["source"]["media_type"], "image/png");
        assert_eq!(images[0]["source"]["data"], PNG_BASE64);
        let body = &server.requests_to("/v1/messages")[0].body;
        assert_eq!(body["max_tokens"], 4096);
        assert!(
            body.get("tools")
                .is_none_or(|tools| tools.as_array().is_some_and(Vec::is_empty)),
            "{body}"
        );

        let data_url = format!("data:image/png;base64,{PNG_BASE64}");
        let output = tool
            .describe(
                &json!({"images": ["media/inbound/m1.png", data_url]}),
                Some(&context),
                model,
            )
            .await;
        assert_eq!(
            (output.text.as_str(), output.is_error),
            ("Two dots.", false)
        );
        let sent = blocks(&server, 1);
        assert_eq!(
            sent.iter().filter(|block| block["type"] == "image").count(),
            2,
            "{sent:?}"
        );
        assert!(
            sent.iter().any(|block| block["text"] == DEFAULT_PROMPT),
            "{sent:?}"
        );
    }

    #[tokio::test]
    async fn escapes_memory_from_a_sandbox_remote_urls_there_and_non_images_are_refused() {
        let server = ScriptedServer::start().await;
        let files = store();
        let (tool, model) = tool(&server, &files);
        let run = |input: Value, context: ToolContext| {
            let model = Arc::clone(&model);
            let tool = &tool;
            async move { tool.describe(&input, Some(&context), model).await }
        };

        let escape = run(json!({"image": "../other/a.png"}), context(&files)).await;
        assert!(
            escape.is_error && escape.text.starts_with("Refused path"),
            "{escape:?}"
        );
        let memory = run(json!({"image": "/agent/MEMORY.md"}), sandboxed(&files)).await;
        assert!(
            memory.is_error && memory.text.contains("memory"),
            "{memory:?}"
        );
        let relative = run(json!({"image": "MEMORY.md"}), sandboxed(&files)).await;
        assert_eq!(relative.text, "File not found: MEMORY.md");
        let remote = run(
            json!({"image": "https://example.com/a.png"}),
            sandboxed(&files),
        )
        .await;
        assert_eq!(
            remote.text,
            "Sandboxed image tool does not allow remote URLs."
        );
        let text = run(json!({"image": "notes.txt"}), context(&files)).await;
        assert_eq!(
            (text.text.as_str(), text.is_error),
            ("Unsupported media type: text/plain", true)
        );
        let data = run(
            json!({"image": "data:text/plain;base64,aGk="}),
            context(&files),
        )
        .await;
        assert_eq!(data.text, "Unsupported media type: text/plain");
        let big = run(
            json!({"image": "shots/a.png", "maxBytesMb": 0.00001}),
            context(&files),
        )
        .await;
        assert!(
            big.is_error && big.text.starts_with("Image too large"),
            "{big:?}"
        );
        assert!(
            server.requests_to("/v1/messages").is_empty(),
            "nothing refused reached the model"
        );

        // The sandbox's own image is read.
        server.push("/v1/messages", ScriptedReply::json(answer("Mine.")));
        let own = run(json!({"image": "mine.png"}), sandboxed(&files)).await;
        assert_eq!((own.text.as_str(), own.is_error), ("Mine.", false));
    }

    #[tokio::test]
    async fn without_a_vision_model_the_call_is_refused_and_failures_name_each_attempt() {
        let server = ScriptedServer::start().await;
        let files = store();
        let (tool, _) = tool(&server, &files);
        let blind: Arc<dyn ModelProvider> = Arc::new(
            AnthropicModel::new(HttpClient::new().expect("client"), "claude-test")
                .with_base_url(server.base_url())
                .with_images(false),
        );
        let output = tool
            .describe(
                &json!({"image": "shots/a.png"}),
                Some(&context(&files)),
                blind,
            )
            .await;
        assert_eq!((output.text.as_str(), output.is_error), (NO_MODEL, true));

        let output = tool
            .describe(
                &json!({"image": "shots/a.png", "model": "openai/gpt-4o"}),
                Some(&context(&files)),
                Arc::clone(&tool.default_model),
            )
            .await;
        assert!(output.is_error, "{output:?}");
        let unlisted = tool
            .describe(
                &json!({"image": "shots/a.png", "model": "other/vision"}),
                Some(&context(&files)),
                Arc::clone(&tool.default_model),
            )
            .await;
        assert_eq!(
            unlisted.text,
            "Model not allowed here: other/vision. Choose one of: openai/gpt-4o."
        );
        assert!(
            output
                .text
                .contains("- openai/gpt-4o: models cannot be chosen here"),
            "{}",
            output.text
        );

        server.push("/v1/messages", ScriptedReply::status_json(400, json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad image"}})));
        let output = tool
            .describe(
                &json!({"image": "shots/a.png"}),
                Some(&context(&files)),
                Arc::clone(&tool.default_model),
            )
            .await;
        assert!(
            output.is_error
                && output.text.contains("anthropic/claude-test")
                && output.text.contains("bad image"),
            "{}",
            output.text
        );
    }
}
