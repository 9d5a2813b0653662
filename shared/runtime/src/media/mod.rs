//! Media understanding's building blocks (spec `openclaw-tools.md` §3): what the model reads
//! about a message's attachments, the text of attached files, voice notes turned into text,
//! and images scaled down before a model sees them.
//!
//! Each piece works on bytes and values it is given; none reads the blob store or knows the
//! turn. Storing attachments, loading them and putting the results into the turn is the
//! caller's job.
//!
//! - [`note`]: the `[media attached: …]` note and the `[Audio]` / `[Image]` understanding body.
//! - [`files`]: text extracted from attached text files and PDFs, fenced as untrusted.
//! - [`transcribe`]: an OpenAI-compatible transcription client with model fallback.
//! - [`describe`]: images shown to a vision model, the first model that answers winning.
//! - [`resize`]: images larger than `agents.defaults.imageMaxDimensionPx`, scaled down.

pub mod describe;
pub mod files;
pub mod note;
pub mod resize;
pub mod transcribe;
