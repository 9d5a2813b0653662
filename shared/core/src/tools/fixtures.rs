//! Test fixtures shared by the tools' tests: a workspace and a bundled skill source in one
//! in-memory store.

use std::sync::Arc;

use crate::testing::InMemoryObjectStore;
use crate::tools::{SessionFacts, ToolContext, Workspace};
use clawless_base::object_store::ObjectStore;
use clawless_skills::source::{SkillSource, SkillSourceKind};

/// Workspace prefix of the fixtures.
pub(crate) const WS: &str = "agents/main/workspace/";

/// A context whose workspace is [`WS`] in `store`, with `skills/bundled` as a skill source and
/// the store's `skills` location as the home directory.
pub(crate) fn context(store: &InMemoryObjectStore) -> ToolContext {
    let home = store.location("skills");
    context_over(Arc::new(store.clone()), home)
}

/// A store holding `files` (`(path, content)`) in the workspace [`WS`].
pub(crate) fn workspace_with(files: &[(&str, &str)]) -> InMemoryObjectStore {
    let store = InMemoryObjectStore::named("bucket");
    for (path, content) in files {
        store
            .insert(&format!("{WS}{path}"), *content)
            .expect("the in-memory store takes every write");
    }
    store
}

/// [`context`] over any store (tests wrap the in-memory one to inject races).
pub(crate) fn context_over(shared: Arc<dyn ObjectStore>, home: String) -> ToolContext {
    ToolContext {
        workspace: Workspace {
            store: Arc::clone(&shared),
            prefix: WS.to_owned(),
        },
        skill_sources: vec![SkillSource::new(
            SkillSourceKind::Bundled,
            shared,
            "skills/bundled",
        )],
        home_dirs: vec![home],
        web: None,
        session: SessionFacts::default(),
        sandbox: None,
    }
}
