//! A reply's `MEDIA:` lines become files sent with it: each names a file of the session's own
//! workspace (its sandbox's, for a sandboxed session), read when the reply is sent and
//! attached to it; the line leaves the text. What is not sent is said in the text instead:
//! a URL (clawless fetches nothing on a reply's say-so), a path outside the workspace, the
//! agent's memory in a session it does not reach, another session's sandbox, a missing or
//! oversized file. A line may also name a file of the blob store this chat has seen (an
//! attachment it received, a node command's upload), and the files a trusted tool's result
//! asked for (`tool_media.rs`) go with the reply that follows it. The reply keeps its id, so a resend after a crash sends the same files
//! once (the channels claim each upload).

use clawless_base::media::{MediaKind, OutboundMedia};
use clawless_base::object_store::ObjectStore;
use clawless_channels::media_lines::{MediaLines, MediaRef, extract_media_lines};
use clawless_core::tools::Workspace;
use clawless_core::turn::OutboundReply;

use super::handlers::EventRun;
use super::tool_media::{is_blob_key, session_has_seen, tool_result_media};
use super::{TurnError, TurnService};

/// Largest file a reply sends.
const MAX_REPLY_FILE_BYTES: u64 = 50 * 1024 * 1024;

impl TurnService {
    /// `reply` with its `MEDIA:` lines taken out and their files attached, and the files
    /// this turn's trusted tools asked to send ([`tool_result_media`]) attached too.
    pub(super) async fn with_reply_media(
        &self, run: &mut EventRun<'_>, reply: &OutboundReply,
    ) -> Result<OutboundReply, TurnError> {
        let from_tools = tool_result_media(run.state.current_turn_steps(), &reply.reply_id);
        let names_media = reply.text.to_ascii_uppercase().contains("MEDIA:");
        if !names_media && from_tools.is_empty() {
            return Ok(reply.clone());
        }
        let lines = if names_media {
            extract_media_lines(&reply.text)
        } else {
            MediaLines {
                text: reply.text.clone(),
                ..MediaLines::default()
            }
        };
        if lines.media.is_empty() && lines.refused.is_empty() && from_tools.is_empty() {
            return Ok(reply.clone());
        }
        let mut media = Vec::new();
        let mut not_sent: Vec<String> = lines
            .refused
            .iter()
            .map(|refused| format!("{} ({})", refused.candidate, refused.reason))
            .collect();
        let mut workspace = None;
        for reference in &lines.media {
            let path = match reference {
                MediaRef::Url(url) => {
                    not_sent.push(format!("{url} (only workspace files are sent)"));
                    continue;
                }
                MediaRef::Workspace(path) => path,
            };
            let file = if is_blob_key(path) {
                if !session_has_seen(&run.state.steps, path) {
                    not_sent.push(format!("{path} (not a file this chat has seen)"));
                    continue;
                }
                self.blob_file(path, lines.audio_as_voice).await
            } else {
                if workspace.is_none() {
                    let sandboxed = self.sandbox_of(&run.agent_id, &run.state);
                    let memory_reaches = self.memory_reaches(&run.state, sandboxed.is_some());
                    let (found, _) = self
                        .session_workspace(&run.agent_id, &mut run.state, sandboxed.as_ref())
                        .await?;
                    workspace = Some((found, memory_reaches));
                }
                let Some((workspace, memory_reaches)) = &workspace else {
                    continue;
                };
                workspace_file(workspace, path, *memory_reaches, lines.audio_as_voice).await
            };
            match file {
                Ok(file) => media.push(file),
                Err(reason) => not_sent.push(format!("{path} ({reason})")),
            }
        }
        for key in &from_tools {
            if lines.media.contains(&MediaRef::Workspace(key.clone())) {
                continue;
            }
            match self.blob_file(key, lines.audio_as_voice).await {
                Ok(file) => media.push(file),
                Err(reason) => not_sent.push(format!("{key} ({reason})")),
            }
        }
        let mut text = lines.text;
        if !not_sent.is_empty() {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!("(Not sent: {}.)", not_sent.join("; ")));
        }
        Ok(OutboundReply {
            text,
            media,
            ..reply.clone()
        })
    }

    /// The blob-store file `key` (an attachment received, a node's upload) as a file to send,
    /// or why it is not sent.
    pub(super) async fn blob_file(
        &self, key: &str, as_voice: bool,
    ) -> Result<OutboundMedia, String> {
        let Some(blobs) = &self.blobs else {
            return Err("no blob store here".to_owned());
        };
        file_to_send(blobs.as_ref(), key, key, as_voice, "no such stored file").await
    }
}

/// The session's workspace file `path` (as [`check_reference`] accepted it: relative, no
/// `..`) as a file to send, or why it is not sent: another session's sandbox, the agent's
/// memory where it does not reach (`memory_reaches`), a missing, unreadable or oversized file.
/// `workspace` is the session's own (its sandbox's when sandboxed). Shared by a reply's
/// `MEDIA:` lines and the `message` tool's `media`.
///
/// [`check_reference`]: clawless_channels::media_lines::check_reference
pub(super) async fn workspace_file(
    workspace: &Workspace, path: &str, memory_reaches: bool, as_voice: bool,
) -> Result<OutboundMedia, String> {
    if let Some(reason) = off_limits(path, memory_reaches) {
        return Err(reason.to_owned());
    }
    let key = format!("{}{path}", workspace.prefix);
    let missing = "no such file in the workspace";
    file_to_send(workspace.store.as_ref(), &key, path, as_voice, missing).await
}

/// The object `key` of `store` as a file named after `name`, or why it is not sent (`missing`
/// when there is no such object).
async fn file_to_send(
    store: &dyn ObjectStore, key: &str, name: &str, as_voice: bool, missing: &str,
) -> Result<OutboundMedia, String> {
    match store.get(key, MAX_REPLY_FILE_BYTES + 1).await {
        Ok(Some(object)) if object.bytes.len() as u64 > MAX_REPLY_FILE_BYTES => {
            Err("larger than 50 MB".to_owned())
        }
        Ok(Some(object)) => Ok(outbound_file(name, object.bytes, as_voice)),
        Ok(None) => Err(missing.to_owned()),
        Err(err) => {
            tracing::warn!(%key, error = %err, "file to send unreadable");
            Err("unreadable".to_owned())
        }
    }
}

/// Why `path` may not leave the workspace in a reply, if it may not.
fn off_limits(path: &str, memory_reaches: bool) -> Option<&'static str> {
    let first = path.split('/').next().unwrap_or_default();
    if first == ".sandboxes" {
        return Some("another session's files");
    }
    let memory = first.eq_ignore_ascii_case("MEMORY.md") || first.eq_ignore_ascii_case("memory");
    (memory && !memory_reaches).then_some("the agent's memory stays out of this chat")
}

/// A file as a reply attachment: its kind and type from its bytes (images) or its name.
pub(super) fn outbound_file(path: &str, bytes: Vec<u8>, as_voice: bool) -> OutboundMedia {
    let name = path.rsplit('/').next().unwrap_or(path).to_owned();
    let mime = crate::media_input::image_type(&bytes)
        .map(str::to_owned)
        .unwrap_or_else(|| mime_of_name(&name).to_owned());
    OutboundMedia {
        kind: MediaKind::of_mime(&mime),
        name,
        mime,
        bytes,
        as_voice,
    }
}

/// The MIME type a file name's extension suggests.
fn mime_of_name(name: &str) -> &'static str {
    let extension = name
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "ogg" | "oga" | "opus" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        "mov" => "video/quicktime",
        "webm" => "video/webm",
        "pdf" => "application/pdf",
        "csv" => "text/csv",
        "txt" | "md" | "log" => "text/plain",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_other_sandboxes_never_leave_in_a_reply() {
        assert_eq!(off_limits("chart.png", false), None);
        assert!(off_limits("MEMORY.md", false).is_some());
        assert!(off_limits("memory/2026-11-29.md", false).is_some());
        assert_eq!(off_limits("memory/2026-11-29.md", true), None);
        assert!(off_limits(".sandboxes/agent-main-x/SOUL.md", true).is_some());
    }

    #[test]
    fn a_files_kind_comes_from_its_bytes_then_its_name() {
        let png = outbound_file("out/chart.png", b"\x89PNG\r\n\x1a\n".to_vec(), false);
        assert_eq!(
            (png.kind, png.mime.as_str(), png.name.as_str()),
            (MediaKind::Image, "image/png", "chart.png")
        );
        // A name does not make an image: these bytes are not one.
        let fake = outbound_file("x.png", b"not an image".to_vec(), false);
        assert_eq!(fake.kind, MediaKind::Document);
        let voice = outbound_file("note.ogg", b"OggS".to_vec(), true);
        assert_eq!((voice.kind, voice.as_voice), (MediaKind::Audio, true));
        assert_eq!(
            outbound_file("r.pdf", b"%PDF".to_vec(), false).mime,
            "application/pdf"
        );
    }
}
