//! The `apply_patch` tool: add, delete, update and move workspace files with one patch in
//! the `*** Begin Patch` format (grammar in [`parse`], line matching in [`update`]).
//!
//! clawless offers it to every model provider (OpenClaw builds it for OpenAI models only).
//! Every path must resolve inside the workspace, with the same checks as `write`.
//!
//! A patch is applied in two steps. First every hunk is worked out against the files as
//! read (each with its version), so a hunk that does not apply changes nothing at all.
//! Then each file is written once, conditional on the version read: content first, then
//! deletions, so a move never loses its file. A file changed by someone else in between
//! fails, writing stops there, and the result says which files were written, which failed
//! and why, and which were not written. Nothing is rolled back.

mod parse;
mod update;

use std::collections::HashMap;

use async_trait::async_trait;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;
use clawless_base::object_store::{PutCondition, StoreError};

use super::paths::{ResolvedPath, resolve_write_path};
use super::read::{MAX_FILE_BYTES, decode_text, store_error_message};
use super::write::MAX_WRITE_BYTES;
use super::{Tool, ToolContext, ToolOutput, args};
use parse::{Hunk, parse_patch};

/// `apply_patch`: multi-file edits in one call.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyPatchTool;

#[async_trait]
impl Tool for ApplyPatchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "apply_patch".to_owned(),
            description: "Edit files with a patch. Format:\n*** Begin Patch\n\
                          *** Add File: <path> | *** Delete File: <path> | \
                          *** Update File: <path> [*** Move to: <path>]\n\
                          @@ <context line>\n' ' keep / '-' remove / '+' add lines\n\
                          *** End Patch"
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {"input": {"type": "string"}},
                "required": ["input"]
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        apply_patch(input, context).await
    }
}

async fn apply_patch(input: &Value, context: &ToolContext) -> ToolOutput {
    let patch = match args::string(input, &["input", "patch"]) {
        Ok(Some(patch)) => patch,
        Ok(None) | Err(_) => return ToolOutput::error("Provide a patch input."),
    };
    if patch.len() > MAX_WRITE_BYTES {
        return ToolOutput::error(format!(
            "The patch is {} bytes, over the {MAX_WRITE_BYTES}-byte limit",
            patch.len()
        ));
    }
    let hunks = match parse_patch(patch) {
        Ok(hunks) => hunks,
        Err(message) => return ToolOutput::error(message),
    };
    let mut plan = Plan::default();
    for hunk in &hunks {
        if let Err(message) = plan.apply_hunk(hunk, context).await {
            return ToolOutput::error(format!(
                "{message}\nNo file was changed: fix the patch and send it again."
            ));
        }
    }
    plan.write().await
}

/// What the patch will do to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    Unchanged,
    Write(String),
    Delete,
}

/// One file the patch touches: its version as read, and what the patch makes of it.
#[derive(Debug)]
struct PlannedFile {
    resolved: ResolvedPath,
    /// Workspace-relative path, as shown in results.
    display: String,
    /// ETag when read; `None` when the file did not exist.
    version: Option<String>,
    /// The text as read (or why it is not text); meaningless when the file did not exist.
    original: Result<String, String>,
    change: Change,
}

impl PlannedFile {
    /// The text a later hunk works on: the planned text, or the file as read.
    fn current_text(&self) -> Result<String, String> {
        match &self.change {
            Change::Write(text) => Ok(text.clone()),
            Change::Delete => Err("file not found".to_owned()),
            Change::Unchanged if self.version.is_none() => Err("file not found".to_owned()),
            Change::Unchanged => self.original.clone(),
        }
    }

    /// Whether the file exists at this point of the patch.
    fn exists_now(&self) -> bool {
        match self.change {
            Change::Write(_) => true,
            Change::Delete => false,
            Change::Unchanged => self.version.is_some(),
        }
    }

    /// `A`, `M` or `D`, for what writing this file does.
    fn letter(&self) -> char {
        match (&self.change, self.version.is_some()) {
            (Change::Delete, _) => 'D',
            (_, true) => 'M',
            (_, false) => 'A',
        }
    }
}

/// Every file the patch touches, in first-touch order, and the success summary.
#[derive(Debug, Default)]
struct Plan {
    files: Vec<PlannedFile>,
    by_key: HashMap<String, usize>,
    added: Vec<String>,
    modified: Vec<String>,
    deleted: Vec<String>,
}

impl Plan {
    async fn apply_hunk(&mut self, hunk: &Hunk, context: &ToolContext) -> Result<(), String> {
        match hunk {
            Hunk::Add { path, contents } => {
                let file = self.load(path, context).await?;
                self.files[file].change = Change::Write(contents.clone());
                let display = self.files[file].display.clone();
                push_unique(&mut self.added, display);
            }
            Hunk::Delete { path } => {
                let file = self.load(path, context).await?;
                if !self.files[file].exists_now() {
                    return Err(format!("Failed to delete file {path}: file not found"));
                }
                self.files[file].change = Change::Delete;
                let display = self.files[file].display.clone();
                push_unique(&mut self.deleted, display);
            }
            Hunk::Update {
                path,
                move_to,
                chunks,
            } => {
                let source = self.load(path, context).await?;
                let text = self.files[source]
                    .current_text()
                    .map_err(|error| format!("Failed to read file to update {path}: {error}"))?;
                let updated = update::apply_chunks(&text, chunks, path)?;
                if updated.len() > MAX_WRITE_BYTES {
                    return Err(format!(
                        "The updated {path} would be {} bytes, over the {MAX_WRITE_BYTES}-byte limit",
                        updated.len()
                    ));
                }
                let target = match move_to {
                    Some(target) => {
                        let target = self.load(target, context).await?;
                        if target != source {
                            self.files[source].change = Change::Delete;
                        }
                        target
                    }
                    None => source,
                };
                self.files[target].change = Change::Write(updated);
                let display = self.files[target].display.clone();
                push_unique(&mut self.modified, display);
            }
        }
        Ok(())
    }

    /// The index of `path`'s entry, reading the file (with its version) on first touch.
    async fn load(&mut self, path: &str, context: &ToolContext) -> Result<usize, String> {
        let resolved = resolve_write_path(context, path).map_err(|error| error.to_string())?;
        if let Some(&index) = self.by_key.get(&resolved.key) {
            return Ok(index);
        }
        let read = resolved
            .store
            .get(&resolved.key, MAX_FILE_BYTES)
            .await
            .map_err(|error| store_error_message(path, &error))?;
        let (version, original) = match read {
            Some(object) => (Some(object.meta.etag), decode_text(object.bytes, path)),
            None => (None, Ok(String::new())),
        };
        let display = resolved
            .workspace_relative
            .clone()
            .unwrap_or_else(|| path.to_owned());
        self.by_key.insert(resolved.key.clone(), self.files.len());
        self.files.push(PlannedFile {
            resolved,
            display,
            version,
            original,
            change: Change::Unchanged,
        });
        Ok(self.files.len() - 1)
    }

    /// Writes every changed file (content first, then deletions), stopping at the first
    /// failure.
    async fn write(self) -> ToolOutput {
        let mut order: Vec<&PlannedFile> = self
            .files
            .iter()
            .filter(|file| matches!(file.change, Change::Write(_)))
            .collect();
        order.extend(
            self.files
                .iter()
                .filter(|file| file.change == Change::Delete),
        );
        for (position, file) in order.iter().enumerate() {
            if let Err(reason) = write_file(file).await {
                return ToolOutput::error(partial_report(&order, position, &reason));
            }
        }
        let mut text = "Success. Updated the following files:".to_owned();
        for (letter, paths) in [
            ('A', &self.added),
            ('M', &self.modified),
            ('D', &self.deleted),
        ] {
            for path in paths {
                text.push_str(&format!("\n{letter} {path}"));
            }
        }
        ToolOutput::ok(text)
    }
}

fn push_unique(list: &mut Vec<String>, path: String) {
    if !list.contains(&path) {
        list.push(path);
    }
}

/// Writes one planned file, conditional on the version the patch read.
async fn write_file(file: &PlannedFile) -> Result<(), String> {
    let store = &file.resolved.store;
    let key = &file.resolved.key;
    let conflict = || {
        format!(
            "{} was changed by someone else while the patch was being applied, so it was \
             not written",
            file.display
        )
    };
    match &file.change {
        Change::Unchanged => Ok(()),
        Change::Write(text) => {
            if file.version.is_some() && file.original.as_ref() == Ok(text) {
                return Ok(());
            }
            let condition = match &file.version {
                Some(etag) => PutCondition::IfMatch(etag.clone()),
                None => PutCondition::IfAbsent,
            };
            match store.put(key, text.clone().into_bytes(), condition).await {
                Ok(_) => Ok(()),
                Err(StoreError::Conflict(_)) => Err(conflict()),
                Err(error) => Err(store_error_message(&file.display, &error)),
            }
        }
        Change::Delete => {
            let Some(version) = &file.version else {
                return Ok(());
            };
            // The port has no conditional delete: check the version just before.
            match store.head(key).await {
                Ok(Some(meta)) if meta.etag == *version => {}
                Ok(_) => return Err(conflict()),
                Err(error) => return Err(store_error_message(&file.display, &error)),
            }
            store
                .delete(key)
                .await
                .map_err(|error| store_error_message(&file.display, &error))
        }
    }
}

/// The error text when writing stopped at `order[failed]`.
fn partial_report(order: &[&PlannedFile], failed: usize, reason: &str) -> String {
    let line = |file: &&PlannedFile| format!("{} {}", file.letter(), file.display);
    let mut text = format!("{reason}.\n");
    if failed == 0 {
        text.push_str("No file was changed.");
    } else {
        text.push_str("The patch was applied in part (nothing was rolled back). Written:");
        for file in &order[..failed] {
            text.push_str(&format!("\n{}", line(file)));
        }
    }
    text.push_str(&format!("\nFailed:\n{}", line(&order[failed])));
    let rest = &order[failed + 1..];
    if !rest.is_empty() {
        text.push_str("\nNot written:");
        for file in rest {
            text.push_str(&format!("\n{}", line(file)));
        }
    }
    text.push_str("\nRead the files that were not written and send a patch for them alone.");
    text
}

#[cfg(test)]
mod tests;
