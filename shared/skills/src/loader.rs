//! Loading skills from their sources, with a cache that makes a warm reload cheap.
//!
//! Sources sharing a store are listed together with one recursive listing of their common
//! prefix, so a deployment that keeps every skill source under one prefix (the default
//! layout: `skills/bundled/`, `skills/managed/`, `skills/agents/<id>/…`) pays one listing
//! per reload. A `SKILL.md` is fetched only when its ETag differs from the cached one; when
//! nothing a snapshot depends on changed, the previous result is returned as it was.

use std::hash::Hasher;

use fnv::FnvHasher;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::try_join_all;
use indexmap::IndexMap;

use clawless_base::object_store::{Listing, ObjectMeta, ObjectStore, RefusedEntry, StoreError};

use super::diagnostics::{DiagnosticKind, SkillDiagnostic};
use super::discovery::{Candidate, discover};
use super::entry::{Rejection, SkillEntry, parse_skill};
use super::source::{SkillLimits, SkillSource, SkillSourceKind};

/// The merged skills of a set of sources.
#[derive(Debug, Clone, Default)]
pub struct LoadedSkills {
    /// Merged skills: first-seen order across sources, last writer's content (spec §1.1).
    pub entries: Vec<Arc<SkillEntry>>,
    /// Everything skipped, in source order.
    pub diagnostics: Vec<SkillDiagnostic>,
    /// Hash of every input the result depends on (sources and candidate ETags).
    pub fingerprint: u64,
    /// Monotonic version, bumped whenever the fingerprint changes (spec §4.6 bump rule).
    pub version: u64,
}

impl LoadedSkills {
    /// The entry with this exact name.
    pub fn get(&self, name: &str) -> Option<&Arc<SkillEntry>> {
        self.entries.iter().find(|entry| entry.name == name)
    }
}

/// Loads and caches skills; keep one per warm process and share it between requests.
#[derive(Debug)]
pub struct SkillLoader {
    limits: SkillLimits,
    clock_ms: fn() -> u64,
    cache: Mutex<LoaderCache>,
}

#[derive(Debug, Default)]
struct LoaderCache {
    parsed: HashMap<ParseKey, CachedParse>,
    last: Option<Arc<LoadedSkills>>,
    /// The listings the latest load was based on, by store identity and listed prefix.
    listings: Vec<(String, String, Arc<Listing>)>,
    /// When the latest load listed its sources (milliseconds since the epoch).
    listed_at_ms: Option<u64>,
    /// Set by [`SkillLoader::mark_stale`]: the next debounced load lists again.
    stale: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ParseKey {
    identity: String,
    key: String,
    kind: SkillSourceKind,
}

#[derive(Debug, Clone)]
struct CachedParse {
    etag: String,
    result: Result<Arc<SkillEntry>, Rejection>,
}

/// Sources that share a store, listed with one request series.
struct ListingGroup<'s> {
    store: &'s Arc<dyn ObjectStore>,
    prefix: String,
}

impl SkillLoader {
    /// A loader with these limits, stamping versions with the system clock.
    pub fn new(limits: SkillLimits) -> Self {
        Self::with_clock(limits, clawless_base::clock::system_now_ms)
    }

    /// A loader whose version stamps come from `clock_ms` (milliseconds since the epoch).
    pub fn with_clock(limits: SkillLimits, clock_ms: fn() -> u64) -> Self {
        Self {
            limits,
            clock_ms,
            cache: Mutex::new(LoaderCache::default()),
        }
    }

    /// The limits this loader applies.
    pub fn limits(&self) -> &SkillLimits {
        &self.limits
    }

    /// The complete listing the latest [`SkillLoader::load`] made of store `identity`, if it
    /// covers every key under `prefix`. Callers reading other files of the same store right
    /// after a load (bootstrap files in the workspace) use it to skip requests for objects
    /// that are absent or unchanged.
    pub fn recent_listing(&self, identity: &str, prefix: &str) -> Option<Arc<Listing>> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .listings
            .iter()
            .find(|(id, listed, listing)| {
                id == identity && prefix.starts_with(listed.as_str()) && !listing.truncated
            })
            .map(|(_, _, listing)| Arc::clone(listing))
    }

    /// The latest load when it listed its sources less than `max_age_ms` ago and nothing
    /// marked it stale since; otherwise a new [`SkillLoader::load`]. A warm process thus
    /// checks its sources for changes at most once per `max_age_ms` (OpenClaw's watcher
    /// debounces the same way).
    pub async fn load_within(
        &self, sources: &[SkillSource], max_age_ms: u64,
    ) -> Result<Arc<LoadedSkills>, StoreError> {
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let now = (self.clock_ms)();
            if let (Some(last), Some(listed_at), false) =
                (&cache.last, cache.listed_at_ms, cache.stale)
                && now.saturating_sub(listed_at) < max_age_ms
            {
                return Ok(Arc::clone(last));
            }
        }
        self.load(sources).await
    }

    /// Makes the next [`SkillLoader::load_within`] list the sources again (something was
    /// written to one of them).
    pub fn mark_stale(&self) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stale = true;
    }

    /// Loads and merges `sources` (any order; they are applied in precedence order).
    pub async fn load(&self, sources: &[SkillSource]) -> Result<Arc<LoadedSkills>, StoreError> {
        let mut sources: Vec<&SkillSource> = sources.iter().collect();
        sources.sort_by_key(|source| source.kind);

        let groups = listing_groups(&sources);
        let listings = try_join_all(groups.iter().map(|group| {
            group
                .store
                .list(&group.prefix, self.limits.max_listed_objects)
        }))
        .await?;
        let listings: Vec<Arc<Listing>> = listings.into_iter().map(Arc::new).collect();
        {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.listed_at_ms = Some((self.clock_ms)());
            cache.stale = false;
            cache.listings = groups
                .iter()
                .zip(&listings)
                .map(|(group, listing)| {
                    (
                        group.store.identity(),
                        group.prefix.clone(),
                        Arc::clone(listing),
                    )
                })
                .collect();
        }
        let listing_by_identity: HashMap<String, &Listing> = groups
            .iter()
            .zip(&listings)
            .map(|(group, listing)| (group.store.identity(), listing.as_ref()))
            .collect();

        let mut discovered = Vec::with_capacity(sources.len());
        let mut fingerprint = FnvHasher::default();
        for source in &sources {
            let listing = listing_by_identity.get(&source.store.identity()).copied();
            let (objects, refused) =
                listing.map_or((&[][..], &[][..]), |l| within_prefix(l, &source.prefix));
            let mut found = discover(source, objects, refused, &self.limits);
            if listing.is_some_and(|l| l.truncated) {
                found
                    .diagnostics
                    .push(truncated_listing(source, self.limits.max_listed_objects));
            }
            write_source(
                &mut fingerprint,
                source,
                &found.candidates,
                &found.diagnostics,
            );
            discovered.push((*source, found));
        }
        let fingerprint = fingerprint.finish();

        if let Some(last) = self.cached_result(fingerprint) {
            return Ok(last);
        }

        let parsed = self.parse_candidates(&discovered).await?;
        let mut merged: IndexMap<String, Arc<SkillEntry>> = IndexMap::new();
        let mut diagnostics = Vec::new();
        for (source, found) in &discovered {
            diagnostics.extend(found.diagnostics.iter().cloned());
            let mut loaded = 0;
            for (position, candidate) in found.candidates.iter().enumerate() {
                if loaded == self.limits.max_skills_loaded_per_source {
                    diagnostics.push(SkillDiagnostic {
                        source: source.kind,
                        location: source.location(),
                        kind: DiagnosticKind::Truncated,
                        message: format!(
                            "Skills root has many entries, truncating discovery. ({} candidates not loaded; \
                             maxSkillsLoadedPerSource={})",
                            found.candidates.len() - position,
                            self.limits.max_skills_loaded_per_source
                        ),
                    });
                    break;
                }
                let key = parse_key(source, candidate);
                match parsed.get(&key).map(|cached| &cached.result) {
                    Some(Ok(entry)) => {
                        loaded += 1;
                        merged.insert(entry.name.clone(), Arc::clone(entry));
                    }
                    Some(Err(rejection)) => diagnostics.push(SkillDiagnostic {
                        source: source.kind,
                        location: source.store.location(&candidate.skill_file.key),
                        kind: rejection.kind,
                        message: rejection.message.clone(),
                    }),
                    None => {}
                }
            }
        }

        let mut cache = self.lock();
        let previous_version = cache.last.as_ref().map_or(0, |last| last.version);
        let result = Arc::new(LoadedSkills {
            entries: merged.into_values().collect(),
            diagnostics,
            fingerprint,
            version: bump_version(previous_version, (self.clock_ms)()),
        });
        cache.last = Some(Arc::clone(&result));
        Ok(result)
    }

    fn cached_result(&self, fingerprint: u64) -> Option<Arc<LoadedSkills>> {
        let cache = self.lock();
        cache
            .last
            .as_ref()
            .filter(|last| last.fingerprint == fingerprint)
            .cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LoaderCache> {
        // The cache holds no invariant a panicking holder could break halfway.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Parses every candidate, reading only those whose ETag the cache does not know.
    async fn parse_candidates(
        &self, discovered: &[(&SkillSource, super::discovery::Discovery)],
    ) -> Result<HashMap<ParseKey, CachedParse>, StoreError> {
        let mut known = HashMap::new();
        let mut to_read = Vec::new();
        {
            let cache = self.lock();
            for (source, found) in discovered {
                for candidate in &found.candidates {
                    let key = parse_key(source, candidate);
                    match cache.parsed.get(&key) {
                        Some(cached) if cached.etag == candidate.skill_file.etag => {
                            known.insert(key, cached.clone());
                        }
                        _ => to_read.push((key, (*source).clone(), candidate.clone())),
                    }
                }
            }
        }

        let fresh = read_and_parse_all(to_read, self.limits.max_skill_file_bytes).await?;

        let mut cache = self.lock();
        // Forget parses under the prefixes just listed that are no longer there, so a
        // long-lived loader does not accumulate deleted skills.
        cache
            .parsed
            .retain(|key, _| known.contains_key(key) || !discovered_under(discovered, key));
        for (key, cached) in fresh {
            cache.parsed.insert(key.clone(), cached.clone());
            known.insert(key, cached);
        }
        Ok(known)
    }
}

fn discovered_under(
    discovered: &[(&SkillSource, super::discovery::Discovery)], key: &ParseKey,
) -> bool {
    discovered.iter().any(|(source, _)| {
        source.kind == key.kind
            && source.store.identity() == key.identity
            && key.key.starts_with(&source.prefix)
    })
}

fn parse_key(source: &SkillSource, candidate: &Candidate) -> ParseKey {
    ParseKey {
        identity: source.store.identity(),
        key: candidate.skill_file.key.clone(),
        kind: source.kind,
    }
}

/// Reads the candidates (one batch per store) and parses them.
async fn read_and_parse_all(
    to_read: Vec<(ParseKey, SkillSource, Candidate)>, max_bytes: u64,
) -> Result<Vec<(ParseKey, CachedParse)>, StoreError> {
    let mut by_store: BTreeMap<String, Vec<(ParseKey, SkillSource, Candidate)>> = BTreeMap::new();
    for item in to_read {
        by_store
            .entry(item.1.store.identity())
            .or_default()
            .push(item);
    }
    let mut parsed = Vec::new();
    for batch in by_store.into_values() {
        let Some(store) = batch
            .first()
            .map(|(_, source, _)| Arc::clone(&source.store))
        else {
            continue;
        };
        // Oversized files are refused from the listing's size, without being fetched.
        let (too_large, readable): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .partition(|(_, _, candidate)| candidate.skill_file.size > max_bytes);
        for (key, _, candidate) in too_large {
            parsed.push((
                key,
                rejected(
                    &candidate,
                    too_large_rejection(candidate.skill_file.size, max_bytes),
                ),
            ));
        }
        let keys: Vec<String> = readable
            .iter()
            .map(|(_, _, candidate)| candidate.skill_file.key.clone())
            .collect();
        let objects = store.get_many(&keys, max_bytes).await;
        for ((key, source, candidate), object) in readable.into_iter().zip(objects) {
            let cached = match object {
                Ok(Some(object)) => {
                    let meta = &candidate.skill_file;
                    let location = source.store.location(&meta.key);
                    let result = parse_skill(&object.bytes, &candidate.dir_name).map(|parsed| {
                        Arc::new(parsed.into_entry(source.kind, meta.key.clone(), location))
                    });
                    // Cached under the ETag the listing showed: if the object changed in
                    // between, the next listing shows a new ETag and it is read again.
                    CachedParse {
                        etag: meta.etag.clone(),
                        result,
                    }
                }
                Ok(None) => rejected(
                    &candidate,
                    Rejection {
                        kind: DiagnosticKind::Vanished,
                        message: "SKILL.md disappeared while loading".to_owned(),
                    },
                ),
                Err(StoreError::TooLarge { size, .. }) => {
                    rejected(&candidate, too_large_rejection(size, max_bytes))
                }
                Err(err) => return Err(err),
            };
            parsed.push((key, cached));
        }
    }
    Ok(parsed)
}

fn rejected(candidate: &Candidate, rejection: Rejection) -> CachedParse {
    CachedParse {
        etag: candidate.skill_file.etag.clone(),
        result: Err(rejection),
    }
}

fn too_large_rejection(size: u64, max_bytes: u64) -> Rejection {
    Rejection {
        kind: DiagnosticKind::TooLarge,
        message: format!("SKILL.md is {size} bytes, over maxSkillFileBytes={max_bytes}"),
    }
}

/// Groups sources by store and finds the longest common `/`-prefix of each group.
fn listing_groups<'s>(sources: &[&'s SkillSource]) -> Vec<ListingGroup<'s>> {
    let mut groups: BTreeMap<String, ListingGroup<'s>> = BTreeMap::new();
    for source in sources {
        groups
            .entry(source.store.identity())
            .and_modify(|group| group.prefix = common_dir_prefix(&group.prefix, &source.prefix))
            .or_insert_with(|| ListingGroup {
                store: &source.store,
                prefix: source.prefix.clone(),
            });
    }
    groups.into_values().collect()
}

/// The longest prefix of both that ends at a `/` (or is empty).
fn common_dir_prefix(a: &str, b: &str) -> String {
    let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let cut = a[..shared].rfind('/').map_or(0, |slash| slash + 1);
    a[..cut].to_owned()
}

/// The objects and refusals of a sorted listing that lie under `prefix`.
fn within_prefix<'l>(listing: &'l Listing, prefix: &str) -> (&'l [ObjectMeta], &'l [RefusedEntry]) {
    let start = listing
        .objects
        .partition_point(|meta| meta.key.as_str() < prefix);
    let len = listing.objects[start..].partition_point(|meta| meta.key.starts_with(prefix));
    let refused_start = listing
        .refused
        .partition_point(|entry| entry.key.as_str() < prefix);
    let refused_len =
        listing.refused[refused_start..].partition_point(|entry| entry.key.starts_with(prefix));
    (
        &listing.objects[start..start + len],
        &listing.refused[refused_start..refused_start + refused_len],
    )
}

fn truncated_listing(source: &SkillSource, limit: usize) -> SkillDiagnostic {
    SkillDiagnostic {
        source: source.kind,
        location: source.location(),
        kind: DiagnosticKind::Truncated,
        message: format!(
            "listing stopped after {limit} objects (maxListedObjects); later skills were not seen"
        ),
    }
}

/// OpenClaw's bump rule: the clock if it moved forward, else one more than before.
pub fn bump_version(current: u64, now_ms: u64) -> u64 {
    if now_ms > current {
        now_ms
    } else {
        current + 1
    }
}

/// Writes a field followed by a separator no field contains, into a fingerprint (FNV-1a:
/// stable across builds, so fingerprints stored in sessions stay comparable).
pub(crate) fn write_field(hasher: &mut FnvHasher, text: &str) {
    hasher.write(text.as_bytes());
    hasher.write(&[0]);
}

fn write_source(
    hasher: &mut FnvHasher, source: &SkillSource, candidates: &[Candidate],
    diagnostics: &[SkillDiagnostic],
) {
    write_field(hasher, source.kind.label());
    write_field(hasher, &source.store.identity());
    write_field(hasher, &source.prefix);
    for candidate in candidates {
        write_field(hasher, &candidate.skill_file.key);
        write_field(hasher, &candidate.skill_file.etag);
    }
    for diagnostic in diagnostics {
        write_field(hasher, &diagnostic.location);
        write_field(hasher, &diagnostic.message);
    }
    hasher.write(&[1]);
}
