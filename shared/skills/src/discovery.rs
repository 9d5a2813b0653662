//! Discovery: which `SKILL.md` files of a source are skill candidates (spec §1.2).
//!
//! Works on a listing, not on a file system, so S3 and a directory tree behave the same:
//! the nested `skills/` root heuristic, a root that is itself a skill, immediate child
//! directories in UTF-16 order (dot directories and `node_modules` skipped), and grouping
//! folders (no `SKILL.md`, skills below) scanned up to [`MAX_GROUPING_DEPTH`] levels deep.

use std::collections::BTreeMap;

use clawless_base::object_store::{ObjectMeta, RefusalReason, RefusedEntry};

use super::diagnostics::{DiagnosticKind, SkillDiagnostic};
use super::source::{SkillLimits, SkillSource, SkillSourceKind};

/// How many directory levels below the base a skill may sit (1 = immediate child).
pub const MAX_GROUPING_DEPTH: usize = 6;

/// Directory levels kept when indexing a listing: the `skills/` heuristic level plus the
/// grouping depth. Deeper entries can never hold a candidate.
const MAX_INDEXED_DEPTH: usize = MAX_GROUPING_DEPTH + 1;

const SKILL_FILE: &str = "SKILL.md";

/// A `SKILL.md` worth reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Basename of the skill's directory: the name when the frontmatter has none.
    pub(crate) dir_name: String,
    /// The `SKILL.md` object (key relative to the store root).
    pub(crate) skill_file: ObjectMeta,
}

/// Candidates in discovery order, and what was skipped on the way.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    pub(crate) candidates: Vec<Candidate>,
    pub(crate) diagnostics: Vec<SkillDiagnostic>,
}

/// A directory as the listing shows it.
#[derive(Default)]
struct DirNode<'a> {
    subdirs: BTreeMap<&'a str, DirNode<'a>>,
    skill_file: Option<&'a ObjectMeta>,
    refused_skill_file: Option<RefusalReason>,
    refused_children: BTreeMap<&'a str, RefusalReason>,
}

/// Directories that never hold skills and are not descended into.
pub(crate) fn is_skipped_dir_name(name: &str) -> bool {
    name.starts_with('.') || name == "node_modules"
}

/// JavaScript's default sort order: by UTF-16 code units.
pub(crate) fn cmp_utf16(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

impl<'a> DirNode<'a> {
    /// Indexes `relative_key`, which must be relative to the source root.
    fn insert_object(&mut self, relative_key: &'a str, meta: &'a ObjectMeta) {
        let Some(dir) = self.dir_for(relative_key) else {
            return;
        };
        let file_name = relative_key.rsplit('/').next().unwrap_or(relative_key);
        if file_name == SKILL_FILE {
            dir.skill_file = Some(meta);
        }
    }

    fn insert_refused(&mut self, relative_key: &'a str, reason: RefusalReason) {
        let (parent, name) = match relative_key.rsplit_once('/') {
            Some((parent, name)) => (Some(parent), name),
            None => (None, relative_key),
        };
        let dir = match parent {
            Some(parent) => match self.dir_for(&relative_key[..=parent.len()]) {
                Some(dir) => dir,
                None => return,
            },
            None => self,
        };
        if name == SKILL_FILE {
            dir.refused_skill_file = Some(reason);
        } else if !is_skipped_dir_name(name) {
            dir.refused_children.insert(name, reason);
        }
    }

    /// The node for the directory holding `relative_key`, creating it; `None` when the key
    /// is under a skipped directory or deeper than discovery ever looks.
    fn dir_for(&mut self, relative_key: &'a str) -> Option<&mut DirNode<'a>> {
        let mut segments: Vec<&'a str> = relative_key.split('/').collect();
        segments.pop(); // the file name
        if segments.len() > MAX_INDEXED_DEPTH || segments.iter().any(|s| is_skipped_dir_name(s)) {
            return None;
        }
        let mut node = self;
        for segment in segments {
            node = node.subdirs.entry(segment).or_default();
        }
        Some(node)
    }

    /// Child names (directories and refused entries) in JS sort order.
    fn sorted_children(&self) -> Vec<&'a str> {
        let mut names: Vec<&'a str> = self
            .subdirs
            .keys()
            .chain(self.refused_children.keys())
            .copied()
            .filter(|name| !is_skipped_dir_name(name))
            .collect();
        names.sort_by(|a, b| cmp_utf16(a, b));
        names.dedup();
        names
    }
}

/// Finds the candidates of `source` in a listing of its prefix.
pub(crate) fn discover(
    source: &SkillSource, objects: &[ObjectMeta], refused: &[RefusedEntry], limits: &SkillLimits,
) -> Discovery {
    let mut root = DirNode::default();
    for meta in objects {
        if let Some(relative) = meta.key.strip_prefix(source.prefix.as_str()) {
            root.insert_object(relative, meta);
        }
    }
    for entry in refused {
        if let Some(relative) = entry.key.strip_prefix(source.prefix.as_str()) {
            root.insert_refused(relative, entry.reason);
        }
    }

    let mut scan = Scan {
        source,
        limits,
        budget: limits.max_candidates_per_root,
        out: Discovery::default(),
    };
    let (base, base_path) = match root.subdirs.get("skills") {
        Some(nested) if scan.holds_direct_skill(nested) => (nested, "skills/".to_owned()),
        _ => (&root, String::new()),
    };

    if let Some(skill_file) = base.skill_file {
        let dir_name = root_dir_name(source, &base_path);
        scan.out.candidates.push(Candidate {
            dir_name,
            skill_file: skill_file.clone(),
        });
        return scan.out;
    }
    if let Some(reason) = base.refused_skill_file {
        scan.refused(&format!("{base_path}{SKILL_FILE}"), reason);
        return scan.out;
    }
    scan.walk(base, &base_path, 1);
    scan.out
}

/// The basename of a source root (the name of a root-level skill without `name:`).
fn root_dir_name(source: &SkillSource, base_path: &str) -> String {
    if !base_path.is_empty() {
        return "skills".to_owned();
    }
    let location = source.location();
    location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned()
}

struct Scan<'s> {
    source: &'s SkillSource,
    limits: &'s SkillLimits,
    budget: usize,
    out: Discovery,
}

impl Scan<'_> {
    /// The nested-root heuristic: does any of the first `maxCandidatesPerRoot` children of
    /// `dir` hold a `SKILL.md` directly?
    fn holds_direct_skill(&self, dir: &DirNode<'_>) -> bool {
        dir.sorted_children()
            .into_iter()
            .take(self.limits.max_candidates_per_root)
            .any(|name| {
                dir.subdirs
                    .get(name)
                    .is_some_and(|child| child.skill_file.is_some())
            })
    }

    fn walk(&mut self, dir: &DirNode<'_>, path: &str, depth: usize) {
        let children = dir.sorted_children();
        for (index, name) in children.iter().enumerate() {
            if self.budget == 0 {
                self.diagnose(
                    path,
                    DiagnosticKind::Truncated,
                    format!(
                        "Skills root looks suspiciously large, truncating discovery. \
                         ({} entries not examined; maxCandidatesPerRoot={})",
                        children.len() - index,
                        self.limits.max_candidates_per_root
                    ),
                );
                return;
            }
            self.budget -= 1;
            let child_path = format!("{path}{name}/");
            if let Some(reason) = dir.refused_children.get(name) {
                self.refused(child_path.trim_end_matches('/'), *reason);
                continue;
            }
            let Some(child) = dir.subdirs.get(name) else {
                continue;
            };
            if let Some(skill_file) = child.skill_file {
                self.out.candidates.push(Candidate {
                    dir_name: (*name).to_owned(),
                    skill_file: skill_file.clone(),
                });
            } else if let Some(reason) = child.refused_skill_file {
                self.refused(&format!("{child_path}{SKILL_FILE}"), reason);
            } else if depth < MAX_GROUPING_DEPTH {
                self.walk(child, &child_path, depth + 1);
            }
        }
    }

    fn refused(&mut self, relative_path: &str, reason: RefusalReason) {
        let (kind, message) = match reason {
            RefusalReason::SymlinkEscape => {
                let why = if self.source.kind == SkillSourceKind::Bundled {
                    "reason=bundled-symlink-escape hint=likely-stray-local-symlink-or-checkout-mutation"
                } else {
                    "reason=symlink-escape"
                };
                (
                    DiagnosticKind::SymlinkEscape,
                    format!("Skipping escaped skill path outside its configured root: {why}"),
                )
            }
            RefusalReason::SymlinkedFile => (
                DiagnosticKind::SymlinkedSkillFile,
                "Skipping symlinked file: a skill's files must be real files inside its root"
                    .to_owned(),
            ),
            RefusalReason::Unreadable => (
                DiagnosticKind::Unreadable,
                "Skipping an entry the store could not read".to_owned(),
            ),
        };
        self.diagnose(relative_path, kind, message);
    }

    fn diagnose(&mut self, relative_path: &str, kind: DiagnosticKind, message: String) {
        let key = format!(
            "{}{}",
            self.source.prefix,
            relative_path.trim_end_matches('/')
        );
        let location = self.source.store.location(key.trim_end_matches('/'));
        self.out.diagnostics.push(SkillDiagnostic {
            source: self.source.kind,
            location,
            kind,
            message,
        });
    }
}
