//! SKILL.md frontmatter: block extraction and the lenient dual (line + YAML) parser.
//!
//! Every value comes out as a string, as OpenClaw's parser produces them (spec §2.1–§2.2).
//! Two parsers read the block: a forgiving line parser (`key: value`, plus indented
//! continuation lines) and a YAML parser (the private `yaml` module). YAML wins where it
//! succeeds, except that a one-line value containing `:` which YAML read as a structure keeps
//! its raw text (so `description: a IMPORTANT: b` survives), and keys only the line parser
//! saw are added. Any input is accepted: the YAML side is bounded against bombs, duplicate
//! keys and deep nesting, and falls back to the line parser alone when it fails.

pub(crate) mod js;
pub(crate) mod yaml;

use indexmap::IndexMap;

use self::js::{JsValue, is_js_whitespace, js_trim};

/// Parsed frontmatter: key → string value, in the order keys were first seen.
pub type Frontmatter = IndexMap<String, String>;

/// Parses the frontmatter block at the start of `content`; `{}` when there is none.
///
/// Never fails: malformed YAML degrades to what the line parser can read.
pub fn parse_frontmatter(content: &str) -> Frontmatter {
    // Most files have no `\r`: skip copying the whole file (body included) in that case.
    let normalized: std::borrow::Cow<'_, str> = if content.contains('\r') {
        content.replace("\r\n", "\n").replace('\r', "\n").into()
    } else {
        content.into()
    };
    let Some(block) = extract_block(&normalized) else {
        return Frontmatter::new();
    };
    let lines = parse_lines(block);
    let Some(yaml) = yaml::parse_mapping(block) else {
        return lines
            .into_iter()
            .map(|(key, line)| (key, line.value))
            .collect();
    };

    let mut merged = Frontmatter::new();
    for (key, value) in coerce_yaml(yaml) {
        let keep_line_text = value.structured
            && lines.get(&key).is_some_and(|line| {
                line.kind == LineKind::Inline
                    && !is_block_scalar_indicator(&line.value)
                    && line.value.contains(':')
            });
        let text = match lines.get(&key) {
            Some(line) if keep_line_text => line.value.clone(),
            _ => value.text,
        };
        merged.insert(key, text);
    }
    for (key, line) in lines {
        merged.entry(key).or_insert(line.value);
    }
    merged
}

/// The text between the opening `---` and the first later line starting with `---`.
///
/// Offsets follow OpenClaw's: the block starts one character after the `---` (normally the
/// newline) and the closing marker is searched from index 3, so `---\n---` is an empty block.
fn extract_block(normalized: &str) -> Option<&str> {
    let after_marker = normalized.strip_prefix("---")?;
    let end = 3 + after_marker.find("\n---")?;
    let start = 3 + after_marker.chars().next().map_or(0, char::len_utf8);
    Some(normalized.get(start..end).unwrap_or(""))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    /// The value was on the key's line.
    Inline,
    /// The value was the indented lines below an empty `key:`.
    Multiline,
}

#[derive(Debug)]
struct LineValue {
    value: String,
    kind: LineKind,
}

/// The line parser: `^([\w-]+):\s*(.*)$` per line, with indented continuation lines for an
/// empty inline value. Later duplicates overwrite earlier ones (keeping the first position).
fn parse_lines(block: &str) -> IndexMap<String, LineValue> {
    let lines: Vec<&str> = block.split('\n').collect();
    let mut values = IndexMap::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        index += 1;
        let Some((key, inline)) = split_key_line(line) else {
            continue;
        };
        let starts_indented = |l: &str| l.starts_with([' ', '\t']);
        let parsed =
            if inline.is_empty() && lines.get(index).is_some_and(|next| starts_indented(next)) {
                let start = index;
                while lines
                    .get(index)
                    .is_some_and(|l| l.is_empty() || starts_indented(l))
                {
                    index += 1;
                }
                LineValue {
                    value: js_trim(&lines[start..index].join("\n")).to_owned(),
                    kind: LineKind::Multiline,
                }
            } else {
                LineValue {
                    value: strip_matching_quotes(js_trim(inline)).to_owned(),
                    kind: LineKind::Inline,
                }
            };
        if !parsed.value.is_empty() {
            values.insert(key.to_owned(), parsed);
        }
    }
    values
}

/// Matches `^([\w-]+):\s*(.*)$` (JavaScript flavour: `\w` is ASCII, `.` stops at U+2028/U+2029).
fn split_key_line(line: &str) -> Option<(&str, &str)> {
    let key_len = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(line.len());
    if key_len == 0 {
        return None;
    }
    let rest = line[key_len..].strip_prefix(':')?;
    let inline = rest.trim_start_matches(is_js_whitespace);
    if inline.contains(['\u{2028}', '\u{2029}']) {
        return None;
    }
    Some((&line[..key_len], inline))
}

fn strip_matching_quotes(value: &str) -> &str {
    for quote in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// `^[|>][+-]?(\d+)?[+-]?$`: a YAML block scalar header such as `|`, `>-` or `|2+`.
fn is_block_scalar_indicator(value: &str) -> bool {
    let Some(rest) = value.strip_prefix(['|', '>']) else {
        return false;
    };
    let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    rest.is_empty()
}

struct CoercedValue {
    text: String,
    /// Came from a YAML mapping or sequence (rendered as JSON).
    structured: bool,
}

/// Turns the YAML mapping into strings: strings trimmed, numbers and booleans via `String()`,
/// collections as compact JSON, nulls dropped; keys trimmed, empty keys dropped.
fn coerce_yaml(yaml: IndexMap<String, JsValue>) -> IndexMap<String, CoercedValue> {
    let mut coerced = IndexMap::new();
    for (key, value) in yaml {
        let key = js_trim(&key);
        if key.is_empty() {
            continue;
        }
        let value = match value.resolved() {
            JsValue::Null => continue,
            JsValue::String(s) => CoercedValue {
                text: js_trim(s).to_owned(),
                structured: false,
            },
            JsValue::Array(_) | JsValue::Object(_) => CoercedValue {
                text: value.to_json(),
                structured: true,
            },
            scalar => CoercedValue {
                text: scalar.to_js_string(),
                structured: false,
            },
        };
        coerced.insert(key.to_owned(), value);
    }
    coerced
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;

    /// A frontmatter holding `pairs` as keys and values.
    pub(crate) fn fm(pairs: &[(&str, &str)]) -> Frontmatter {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    // --- Spec §2.1: block extraction ---

    #[test]
    fn content_without_a_leading_marker_has_no_frontmatter() {
        assert!(parse_frontmatter("# No frontmatter").is_empty());
        assert!(parse_frontmatter("\n---\nname: x\n---").is_empty());
        assert!(parse_frontmatter("").is_empty());
    }

    #[test]
    fn content_without_a_closing_marker_has_no_frontmatter() {
        assert!(parse_frontmatter("---\nname: x\ndescription: y\n").is_empty());
    }

    #[test]
    fn crlf_and_cr_line_endings_are_normalised() {
        let expected = fm(&[("name", "x"), ("description", "y")]);
        assert_eq!(
            parse_frontmatter("---\r\nname: x\r\ndescription: y\r\n---\r\nbody"),
            expected
        );
        assert_eq!(
            parse_frontmatter("---\rname: x\rdescription: y\r---\rbody"),
            expected
        );
    }

    #[test]
    fn any_line_starting_with_three_dashes_closes_the_block() {
        assert_eq!(
            parse_frontmatter("---\nname: x\n-----\nrest: y\n---"),
            fm(&[("name", "x")])
        );
        assert!(parse_frontmatter("---\n---\nname: x\n---").is_empty());
        assert!(parse_frontmatter("------").is_empty());
    }

    // --- Spec §2.2 test vectors ---

    #[test]
    fn literal_block_scalar_keeps_its_lines() {
        let parsed = parse_frontmatter("---\ndescription: |\n  line one\n  line two\n---\n");
        assert_eq!(parsed["description"], "line one\nline two");
    }

    #[test]
    fn multiline_json5_metadata_is_re_stringified_as_json() {
        let content = "---\nname: x\nmetadata:\n  {\n    \"openclaw\":\n      {\n        \"emoji\": \"disk\",\n        \"events\": [\"command:new\"],\n      },\n  }\n---\n";
        let parsed = parse_frontmatter(content);
        assert_eq!(
            parsed["metadata"],
            r#"{"openclaw":{"emoji":"disk","events":["command:new"]}}"#
        );
        let reparsed: serde_json::Value =
            json5::from_str(&parsed["metadata"]).expect("metadata is JSON5");
        assert_eq!(reparsed["openclaw"]["emoji"], "disk");
    }

    #[test]
    fn inline_json_metadata_keeps_its_raw_text() {
        let parsed =
            parse_frontmatter("---\nmetadata: {\"openclaw\": {\"events\": [\"test\"]}}\n---\n");
        assert_eq!(parsed["metadata"], r#"{"openclaw": {"events": ["test"]}}"#);
    }

    #[test]
    fn yaml_scalars_and_lists_become_strings() {
        let parsed = parse_frontmatter(
            "---\nenabled: true\nretries: 3\ntags: [alpha, beta]\nlist:\n  - a\n  - b\n---\n",
        );
        assert_eq!(parsed["enabled"], "true");
        assert_eq!(parsed["retries"], "3");
        assert_eq!(parsed["tags"], r#"["alpha","beta"]"#);
        assert_eq!(parsed["list"], r#"["a","b"]"#);
    }

    #[test]
    fn nested_yaml_metadata_becomes_json() {
        let parsed = parse_frontmatter(
            "---\nmetadata:\n  openclaw:\n    events:\n      - command:new\n---\n",
        );
        assert_eq!(
            parsed["metadata"],
            r#"{"openclaw":{"events":["command:new"]}}"#
        );
    }

    #[test]
    fn unquoted_description_with_colon_falls_back_to_the_line_value() {
        let parsed = parse_frontmatter(
            "---\nname: anime\ndescription: Use anime style IMPORTANT: Must be kawaii\n---\n",
        );
        assert_eq!(
            parsed["description"],
            "Use anime style IMPORTANT: Must be kawaii"
        );
        assert_eq!(parsed["name"], "anime");
    }

    #[test]
    fn strip_chomped_block_scalar_keeps_braces_as_text() {
        let parsed = parse_frontmatter("---\ndescription: |-\n  {json-like text}\n---\n");
        assert_eq!(parsed["description"], "{json-like text}");
    }

    #[test]
    fn nested_boolean_metadata_is_compact_json() {
        let parsed = parse_frontmatter("---\nmetadata:\n  openclaw: true\n---\n");
        assert_eq!(parsed["metadata"], r#"{"openclaw":true}"#);
    }

    // --- Coercion and merge details ---

    #[test]
    fn yaml_numbers_print_like_javascript() {
        let parsed = parse_frontmatter(
            "---\na: 1.0\nb: 1.5\nc: 0x10\nd: 1e21\ne: .inf\nf: '  padded  '\n---\n",
        );
        assert_eq!(parsed["a"], "1");
        assert_eq!(parsed["b"], "1.5");
        assert_eq!(parsed["c"], "16");
        assert_eq!(parsed["d"], "1e+21");
        assert_eq!(parsed["e"], "Infinity");
        assert_eq!(parsed["f"], "padded");
    }

    #[test]
    fn yaml_nulls_are_dropped_but_line_values_fill_the_gap() {
        // YAML drops `homepage: ~`, so the line parser's raw "~" is added back (as OpenClaw does).
        let parsed = parse_frontmatter("---\nname: x\nempty:\nhomepage: ~\n---\n");
        assert_eq!(parsed, fm(&[("name", "x"), ("homepage", "~")]));
    }

    #[test]
    fn non_string_top_level_keys_are_stringified() {
        let parsed =
            parse_frontmatter("---\n1: one\ntrue: yes\n? [a, b]\n: pair\n\"  spaced  \": v\n---\n");
        assert_eq!(parsed["1"], "one");
        assert_eq!(parsed["true"], "yes");
        assert_eq!(parsed[r#"["a","b"]"#], "pair");
        assert_eq!(parsed["spaced"], "v");
    }

    #[test]
    fn block_scalar_indicator_is_not_treated_as_inline_text() {
        assert!(is_block_scalar_indicator("|"));
        assert!(is_block_scalar_indicator(">-"));
        assert!(is_block_scalar_indicator("|2+"));
        assert!(is_block_scalar_indicator("|+2"));
        assert!(!is_block_scalar_indicator("|a"));
        assert!(!is_block_scalar_indicator("a: b"));
    }

    #[test]
    fn line_parser_strips_matching_quotes_and_skips_empty_values() {
        let parsed =
            parse_frontmatter("---\na: \"quoted: yes\nb: 'x'\nc: \"\"\nd:\ne: \"mis'\n---\n");
        // The unterminated quote makes the YAML invalid, so this is the line parser alone.
        assert_eq!(
            parsed,
            fm(&[("a", "\"quoted: yes"), ("b", "x"), ("e", "\"mis'")])
        );
    }

    #[test]
    fn line_parser_reads_indented_continuations_when_yaml_fails() {
        let content = "---\nname: x\nbad: [unclosed\nnotes:\n  first\n\n  second\nnext: y\n---\n";
        let parsed = parse_frontmatter(content);
        assert_eq!(
            parsed,
            fm(&[
                ("name", "x"),
                ("bad", "[unclosed"),
                ("notes", "first\n\n  second"),
                ("next", "y")
            ])
        );
    }

    #[test]
    fn duplicate_keys_fall_back_to_the_line_parser() {
        let parsed = parse_frontmatter("---\nname: first\ntags: [a]\nname: second\n---\n");
        // YAML would have rendered `tags` as `["a"]`; the line parser keeps the raw text.
        assert_eq!(parsed, fm(&[("name", "second"), ("tags", "[a]")]));
    }

    #[test]
    fn yaml_bomb_returns_quickly_and_falls_back_to_the_line_parser() {
        let mut content = String::from(
            "---\nname: bomb\na0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for level in 1..=9 {
            let refs = vec![format!("*a{}", level - 1); 10].join(",");
            content.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        content.push_str("---\n");
        let started = Instant::now();
        let parsed = parse_frontmatter(&content);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
        assert_eq!(parsed["name"], "bomb");
        assert_eq!(parsed["a9"], format!("&a9 [{}]", ["*a8"; 10].join(",")));
    }

    #[test]
    fn a_few_aliases_are_expanded() {
        let parsed = parse_frontmatter("---\nbase: &b {x: 1}\ncopy: *b\n---\n");
        assert_eq!(parsed["copy"], r#"{"x":1}"#);
    }

    #[test]
    fn deeply_nested_flow_sequences_do_not_overflow_the_stack() {
        let content = format!("---\nname: deep\nkey: {}\n---\n", "[".repeat(100_000));
        let parsed = parse_frontmatter(&content);
        assert_eq!(parsed["name"], "deep");
        assert_eq!(parsed["key"].len(), 100_000);
        let closed = format!(
            "---\nkey: {}{}\n---\n",
            "{a: ".repeat(50_000),
            "}".repeat(50_000)
        );
        assert_eq!(parse_frontmatter(&closed).len(), 1);
        let block_seq = format!("---\nkey: {}x\n---\n", "- ".repeat(50_000));
        assert_eq!(parse_frontmatter(&block_seq).len(), 1);
    }

    #[test]
    fn binary_junk_does_not_panic() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for round in 0..200 {
            let bytes: Vec<u8> = (0..(round * 17 % 900))
                .map(|_| {
                    // xorshift: deterministic noise without a dependency.
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state.to_le_bytes()[0]
                })
                .collect();
            let text = format!("---\n{}\n---\n", String::from_utf8_lossy(&bytes));
            assert_keys_are_clean(&parse_frontmatter(&text));
        }
    }

    #[test]
    fn multibyte_character_after_the_opening_marker_is_skipped_whole() {
        let parsed = parse_frontmatter("---é\nname: x\n---\n");
        assert_eq!(parsed, fm(&[("name", "x")]));
    }

    // --- Property tests ---

    fn assert_keys_are_clean(parsed: &Frontmatter) {
        for key in parsed.keys() {
            assert!(!key.is_empty());
            assert_eq!(js_trim(key), key.as_str());
        }
    }

    fn yamlish_line() -> impl Strategy<Value = String> {
        let indent = prop::sample::select(vec!["", "", "", " ", "  ", "    ", "\t", "- ", "  - "]);
        let key = prop::sample::select(vec![
            "name",
            "description",
            "metadata",
            "a",
            "b",
            "user-invocable",
            "k_1",
            "\"q\"",
            "'s'",
            "? x",
            "1",
            "~",
            "",
        ]);
        let sep = prop::sample::select(vec![
            ": ", ":", ":  ", " : ", ": |", ": >-", ": &a ", ": *a ", ": !!str ", "",
        ]);
        let value = prop::sample::select(vec![
            "",
            "x",
            "true",
            "yes",
            "3",
            "1.5",
            "0x1f",
            "~",
            "null",
            "\"q: v\"",
            "'it''s'",
            "[a, b]",
            "{a: 1}",
            "{",
            "[",
            "]",
            "}",
            "a: b",
            "*a",
            "&a v",
            "- item",
            "#c",
            "{\"openclaw\": {\"always\": true}}",
            "\"\\u00e9\"",
            "|",
            "...",
            "---",
            "@",
            "`",
            "%TAG ! x",
            "!t v",
        ]);
        (indent, key, sep, value).prop_map(|(i, k, s, v)| format!("{i}{k}{s}{v}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_text_never_panics(text in any::<String>(), framed in any::<bool>()) {
            let content = if framed { format!("---\n{text}\n---\n") } else { text.clone() };
            let parsed = parse_frontmatter(&content);
            assert_keys_are_clean(&parsed);
            if !content.starts_with("---") {
                prop_assert!(parsed.is_empty());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            let content = format!("---\n{}\n---", String::from_utf8_lossy(&bytes));
            assert_keys_are_clean(&parse_frontmatter(&content));
        }

        #[test]
        fn yaml_punctuation_soup_never_panics(block in "[\\[\\]{}:,?&*!|>'\"#%@\n \t.a1~\\\\-]{0,160}") {
            assert_keys_are_clean(&parse_frontmatter(&format!("---\n{block}\n---\n")));
        }

        #[test]
        fn yamlish_frontmatter_never_panics(lines in prop::collection::vec(yamlish_line(), 0..24)) {
            let block = lines.join("\n");
            let parsed = parse_frontmatter(&format!("---\n{block}\n---\nbody"));
            assert_keys_are_clean(&parsed);
            // Without the opening marker nothing is read, whatever the block holds.
            prop_assert!(parse_frontmatter(&block.replace("---", "-")).is_empty());
        }
    }
}
