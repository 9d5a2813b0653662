//! The shape of OpenClaw's 53 bundled skills (spec §13, from the spec's table): SKILL.md files
//! written in the bundled style (multi-line JSON5 flow mappings with trailing commas) from
//! each row's requirements, then loaded and checked against the table.

use serde_json::json;

use super::*;
use crate::bins::collect_skill_bins;
use crate::eligibility::is_eligible;
use crate::{EligibilityContext, EligibilityInputs, SkillsConfig};

const TABLE: &str = include_str!("fixtures/openclaw-bundled-skills.tsv");

struct Row<'a> {
    dir: &'a str,
    bins: Vec<&'a str>,
    any_bins: Vec<&'a str>,
    env: Vec<&'a str>,
    config: Vec<&'a str>,
    os: Vec<&'a str>,
    primary_env: &'a str,
    install_kinds: Vec<&'a str>,
    notes: &'a str,
}

fn list(cell: &str) -> Vec<&str> {
    cell.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

fn rows() -> Vec<Row<'static>> {
    TABLE
        .lines()
        .skip(1)
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            Row {
                dir: cells[0].split_whitespace().next().unwrap(),
                bins: list(cells[1]),
                any_bins: list(cells[2]),
                env: list(cells[3]),
                config: list(cells[4]),
                os: list(cells[5]),
                primary_env: cells[6].trim(),
                install_kinds: list(cells[11]),
                notes: cells.get(12).copied().unwrap_or_default(),
            }
        })
        .collect()
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("\"{i}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn install_entry(kind: &str, name: &str, bins: &[&str]) -> String {
    let field = match kind {
        "brew" => format!("\"formula\": \"{name}\""),
        "node" | "npm" | "apt" | "uv" => format!("\"package\": \"{name}\""),
        "go" => format!("\"module\": \"example.com/{name}/cmd@latest\""),
        "download" => format!("\"url\": \"https://example.com/{name}.tar.gz\""),
        other => panic!("unexpected install kind {other}"),
    };
    format!(
        "{{ \"id\": \"{kind}\", \"kind\": \"{kind}\", {field}, \"bins\": [{}] }},",
        quoted(bins)
    )
}

/// A SKILL.md in the bundled style for one row of the table.
fn skill_file(row: &Row<'_>) -> String {
    if row.notes.contains("NO frontmatter") {
        return format!("# {}\n\nInstructions without frontmatter.\n", row.dir);
    }
    let mut header = format!(
        "---\nname: {}\ndescription: Uses {} for its task.\n",
        row.dir, row.dir
    );
    if row.notes.contains("no metadata block") {
        return header + "---\n";
    }
    let mut block = String::from("        \"emoji\": \"🧩\",\n");
    if !row.os.is_empty() {
        block.push_str(&format!("        \"os\": [{}],\n", quoted(&row.os)));
    }
    if !row.primary_env.is_empty() {
        block.push_str(&format!(
            "        \"primaryEnv\": \"{}\",\n",
            row.primary_env
        ));
    }
    let has_requires = !(row.bins.is_empty()
        && row.any_bins.is_empty()
        && row.env.is_empty()
        && row.config.is_empty());
    if has_requires {
        block.push_str(&format!(
            "        \"requires\":\n          {{\n            \"bins\": [{}],\n            \"anyBins\": [{}],\n            \"env\": [{}],\n            \"config\": [{}],\n          }},\n",
            quoted(&row.bins), quoted(&row.any_bins), quoted(&row.env), quoted(&row.config)
        ));
    }
    if !row.install_kinds.is_empty() {
        let entries: Vec<String> = row
            .install_kinds
            .iter()
            .map(|kind| format!("            {}", install_entry(kind, row.dir, &row.bins)))
            .collect();
        block.push_str(&format!(
            "        \"install\":\n          [\n{}\n          ],\n",
            entries.join("\n")
        ));
    }
    header.push_str(&format!(
        "metadata:\n  {{\n    \"openclaw\":\n      {{\n{block}      }},\n  }}\n---\n\n# {}\n",
        row.dir
    ));
    header
}

fn strings(list: Option<&Vec<String>>) -> Vec<&str> {
    list.map(|items| items.iter().map(String::as_str).collect())
        .unwrap_or_default()
}

async fn corpus() -> (Vec<Row<'static>>, Arc<LoadedSkills>) {
    let rows = rows();
    let files: Vec<(String, String)> = rows
        .iter()
        .map(|r| (format!("bundled/{}/SKILL.md", r.dir), skill_file(r)))
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let store = store_with(&files);
    let loaded = load(
        &[source(SkillSourceKind::Bundled, &store, "bundled")],
        SkillLimits::default(),
    )
    .await;
    (rows, loaded)
}

#[tokio::test]
async fn fifty_two_of_the_fifty_three_bundled_skills_load_and_canvas_does_not() {
    let (rows, loaded) = corpus().await;
    assert_eq!(rows.len(), 53);
    assert_eq!(loaded.entries.len(), 52);
    assert!(loaded.get("canvas").is_none());
}

#[tokio::test]
async fn requirements_os_and_install_kinds_match_the_table() {
    let (rows, loaded) = corpus().await;
    for row in rows.iter().filter(|r| r.dir != "canvas") {
        let entry = loaded
            .get(row.dir)
            .unwrap_or_else(|| panic!("{} not loaded", row.dir));
        let metadata = entry.metadata.as_ref();
        let requires = metadata.and_then(|m| m.requires.as_ref());
        assert_eq!(
            strings(requires.map(|r| &r.bins)),
            row.bins,
            "{} bins",
            row.dir
        );
        assert_eq!(
            strings(requires.map(|r| &r.any_bins)),
            row.any_bins,
            "{} anyBins",
            row.dir
        );
        assert_eq!(
            strings(requires.map(|r| &r.env)),
            row.env,
            "{} env",
            row.dir
        );
        assert_eq!(
            strings(requires.map(|r| &r.config)),
            row.config,
            "{} config",
            row.dir
        );
        assert_eq!(strings(metadata.map(|m| &m.os)), row.os, "{} os", row.dir);
        assert_eq!(
            metadata
                .and_then(|m| m.primary_env.as_deref())
                .unwrap_or(""),
            row.primary_env,
            "{}",
            row.dir
        );
        let kept: Vec<String> = metadata
            .map(|m| {
                m.install
                    .iter()
                    .map(|i| format!("{:?}", i.kind).to_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        let expected: Vec<&str> = row
            .install_kinds
            .iter()
            .copied()
            .filter(|k| !matches!(*k, "apt" | "npm"))
            .collect();
        assert_eq!(
            kept, expected,
            "{} install kinds (apt and npm are dropped)",
            row.dir
        );
    }
}

#[tokio::test]
async fn on_a_bare_linux_machine_only_the_requirement_free_skills_are_eligible() {
    let (_, loaded) = corpus().await;
    let skills = SkillsConfig::default();
    let context = EligibilityContext {
        platforms: ["linux".to_owned()].into(),
        ..Default::default()
    };
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &json!({}),
        context: &context,
    };
    let mut eligible: Vec<&str> = loaded
        .entries
        .iter()
        .filter(|e| is_eligible(e, inputs))
        .map(|e| e.name.as_str())
        .collect();
    eligible.sort();
    assert_eq!(
        eligible,
        [
            "healthcheck",
            "node-connect",
            "skill-creator",
            "taskflow",
            "taskflow-inbox-triage"
        ]
    );
}

#[tokio::test]
async fn a_mac_node_with_every_bin_and_env_makes_all_but_config_gated_skills_eligible() {
    let (rows, loaded) = corpus().await;
    let skills = SkillsConfig::default();
    let mut context = EligibilityContext {
        platforms: ["darwin".to_owned()].into(),
        ..Default::default()
    };
    for row in &rows {
        context
            .bins
            .extend(row.bins.iter().chain(&row.any_bins).map(|b| b.to_string()));
        context.env.extend(row.env.iter().map(|e| e.to_string()));
    }
    let config = json!({"channels": {"discord": {"token": "t"}, "slack": {"appToken": "x"}}});
    let inputs = EligibilityInputs {
        skills: &skills,
        config: &config,
        context: &context,
    };
    let mut excluded: Vec<&str> = loaded
        .entries
        .iter()
        .filter(|e| !is_eligible(e, inputs))
        .map(|e| e.name.as_str())
        .collect();
    excluded.sort();
    assert_eq!(
        excluded,
        ["bluebubbles", "voice-call"],
        "config-gated without config; everything else runs on a mac node"
    );
}

#[tokio::test]
async fn skills_bins_covers_every_declared_binary() {
    let (rows, loaded) = corpus().await;
    let bins = collect_skill_bins(&loaded.entries);
    for row in rows.iter().filter(|r| r.dir != "canvas") {
        for bin in row.bins.iter().chain(&row.any_bins) {
            assert!(bins.iter().any(|b| b == bin), "{bin} of {}", row.dir);
        }
    }
    let mut sorted = bins.clone();
    sorted.sort();
    assert_eq!(bins, sorted);
}
