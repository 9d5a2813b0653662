//! Time to build a skills snapshot from a directory and from S3 (moto), for 50, 1,000 and
//! 10,000 generated skills: cold (new loader: list, read and parse everything) and warm
//! (a loader that has seen the sources: one listing, nothing re-read).
//!
//! `cargo bench -p clawless --bench snapshot` runs the directory cases; the S3 cases run
//! when `CLAWLESS_TEST_AWS_ENDPOINT` points at moto (`infra/bench` starts one). Pass
//! `--quick` to stop at 1,000 skills.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_aws::S3ObjectStore;
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_local::DirObjectStore;
use clawless_skills::snapshot::build_snapshot;
use clawless_skills::{
    EligibilityContext, EligibilityInputs, SkillLimits, SkillLoader, SkillSource, SkillSourceKind,
    SkillsConfig, SnapshotOptions,
};

fn skill_text(index: usize) -> String {
    format!(
        "---\nname: skill-{index:05}\ndescription: Generated skill number {index} that does one small task and says when to use it.\n\
         metadata: {{ \"openclaw\": {{ \"emoji\": \"🧪\", \"requires\": {{ \"bins\": [\"tool-{}\"] }} }} }}\n---\n\n# Skill {index}\n\n{}\n",
        index % 50,
        "Step by step instructions. ".repeat(40)
    )
}

fn limits_for(count: usize) -> SkillLimits {
    SkillLimits {
        max_candidates_per_root: count + 10,
        max_skills_loaded_per_source: count + 10,
        max_listed_objects: count * 2 + 10,
        ..SkillLimits::default()
    }
}

/// Builds one snapshot with `loader`; returns how many skills it loaded.
async fn snapshot_once(
    loader: &SkillLoader, sources: &[SkillSource], limits: SkillLimits,
) -> usize {
    let loaded = loader.load(sources).await.expect("load");
    let skills = SkillsConfig::default();
    let context = EligibilityContext::empty();
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &serde_json::Value::Null,
        context: &context,
    };
    let options = SnapshotOptions {
        filter: None,
        home_dirs: &[],
        node_note: None,
        limits,
    };
    let snapshot = build_snapshot(&loaded, inputs, &options);
    std::hint::black_box(&snapshot);
    loaded.entries.len()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn iterations(count: usize) -> usize {
    (20_000 / count).clamp(3, 200)
}

async fn measure(label: &str, count: usize, sources: &[SkillSource]) {
    let limits = limits_for(count);
    let runs = iterations(count);
    let mut cold = Vec::with_capacity(runs);
    for _ in 0..runs {
        let loader = SkillLoader::new(limits);
        let started = Instant::now();
        let loaded = snapshot_once(&loader, sources, limits).await;
        cold.push(started.elapsed());
        assert_eq!(loaded, count, "every generated skill loads");
    }
    let loader = SkillLoader::new(limits);
    snapshot_once(&loader, sources, limits).await;
    let mut warm = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        snapshot_once(&loader, sources, limits).await;
        warm.push(started.elapsed());
    }
    let (cold, warm) = (median(cold), median(warm));
    println!(
        "{label:<10} {count:>6} skills   cold {:>10.3} ms ({:>6.2} µs/skill)   warm {:>10.3} ms ({:>6.2} µs/skill)   [{runs} runs, median]",
        cold.as_secs_f64() * 1e3,
        cold.as_secs_f64() * 1e6 / count as f64,
        warm.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e6 / count as f64,
    );
}

async fn bench_directory(count: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    for index in 0..count {
        let skill_dir = dir.path().join(format!("skill-{index:05}"));
        std::fs::create_dir_all(&skill_dir).expect("mkdir");
        std::fs::write(skill_dir.join("SKILL.md"), skill_text(index)).expect("write");
    }
    let store: Arc<dyn ObjectStore> = Arc::new(DirObjectStore::open(dir.path()).expect("store"));
    measure(
        "directory",
        count,
        &[SkillSource::new(SkillSourceKind::Bundled, store, "")],
    )
    .await;
}

async fn bench_s3(count: usize) {
    let config = clawless_aws::testing::moto_sdk_config().await;
    let client = clawless_aws::testing::s3_client(&config);
    let bucket = clawless_aws::testing::fresh_bucket(&client, "bench").await;
    let store = Arc::new(S3ObjectStore::new(client, bucket));
    // Bounded concurrency: moto (one Python process) refuses connections past a few dozen.
    let indices: Vec<usize> = (0..count).collect();
    for chunk in indices.chunks(32) {
        let uploads: Vec<_> = chunk
            .iter()
            .map(|&index| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let key = format!("skills/bundled/skill-{index:05}/SKILL.md");
                    store
                        .put(&key, skill_text(index).into_bytes(), PutCondition::Always)
                        .await
                        .expect("upload");
                })
            })
            .collect();
        for upload in uploads {
            upload.await.expect("upload task");
        }
    }
    let store: Arc<dyn ObjectStore> = store;
    measure(
        "s3 (moto)",
        count,
        &[SkillSource::new(
            SkillSourceKind::Bundled,
            store,
            "skills/bundled",
        )],
    )
    .await;
}

/// The CPU share of a cold load: parsing 1,000 `SKILL.md` texts already in memory.
fn bench_parse_only() {
    let texts: Vec<String> = (0..1_000).map(skill_text).collect();
    let mut samples = Vec::new();
    for _ in 0..10 {
        let started = Instant::now();
        for text in &texts {
            let frontmatter = clawless_skills::frontmatter::parse_frontmatter(text);
            std::hint::black_box(clawless_skills::metadata::resolve_metadata(&frontmatter));
        }
        samples.push(started.elapsed());
    }
    let per_skill = median(samples).as_secs_f64() * 1e6 / texts.len() as f64;
    println!("parse only  frontmatter + metadata: {per_skill:.2} µs/skill");
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let counts: &[usize] = if quick {
        &[50, 1_000]
    } else {
        &[50, 1_000, 10_000]
    };
    println!("skills snapshot build (load + eligibility + prompt), median of repeated runs");
    bench_parse_only();
    for &count in counts {
        bench_directory(count).await;
    }
    if std::env::var_os(clawless_aws::testing::ENDPOINT_ENV).is_some() {
        for &count in counts {
            bench_s3(count).await;
        }
    } else {
        println!(
            "s3 (moto): not run; set {} (infra/bench starts moto)",
            clawless_aws::testing::ENDPOINT_ENV
        );
    }
}
