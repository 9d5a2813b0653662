//! The YAML half of the frontmatter parser: a bounded loader over yaml-rust2's event stream.
//!
//! It stands in for npm `yaml`'s `parse(block, { schema: "core" })`. yaml-rust2's own loaders
//! recurse per nesting level and copy aliased nodes, so a hostile SKILL.md could exhaust the
//! stack or memory; this loader pulls events one at a time into an explicit stack instead and
//! fails (so the caller falls back to the line parser) on anything npm `yaml` would reject or
//! that exceeds a budget:
//!
//! - nesting deeper than [`MAX_DEPTH`], counting what aliases splice in;
//! - more than [`MAX_ALIASES`] aliases, or aliases expanding to more than [`MAX_ALIAS_NODES`]
//!   nodes or [`MAX_ALIAS_BYTES`] bytes of scalar text in total (YAML bombs);
//! - duplicate keys in one mapping, as npm `yaml` (`uniqueKeys`) rejects them;
//! - an alias to an unknown or still-open anchor, and more than one document.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use indexmap::IndexMap;
use yaml_rust2::Event;
use yaml_rust2::parser::{Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use super::js::{JsValue, MAX_DEPTH};

/// npm `yaml` refuses documents whose aliases are used more than about 100 times.
const MAX_ALIASES: usize = 100;
/// Nodes aliases may splice into the document in total (one anchored 9-level "billion laughs"
/// tree would otherwise expand to 10⁹ nodes when re-serialised).
const MAX_ALIAS_NODES: usize = 10_000;
/// Scalar bytes aliases may splice in, so a few aliases to one huge string stay bounded too.
const MAX_ALIAS_BYTES: usize = 1 << 20;

const CORE_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// Parses `block` as a single YAML document and returns its top-level mapping, or `None` when
/// it is invalid, not a mapping, or over a budget.
pub(crate) fn parse_mapping(block: &str) -> Option<IndexMap<String, JsValue>> {
    let root = Loader::default().load(block)?;
    match root.value {
        JsValue::Object(entries) => Some(entries),
        JsValue::Shared(shared) => match Rc::try_unwrap(shared) {
            Ok(JsValue::Object(entries)) => Some(entries),
            Ok(_) => None,
            Err(shared) => match shared.resolved() {
                JsValue::Object(entries) => Some(entries.clone()),
                _ => None,
            },
        },
        _ => None,
    }
}

/// A finished node and what it costs once every alias inside it is expanded.
struct Built {
    value: JsValue,
    /// Expanded node count.
    nodes: usize,
    /// Expanded scalar bytes.
    bytes: usize,
    /// Collection nesting below and including this node (0 for scalars).
    height: usize,
}

/// Expanded size of an anchored node, kept for every alias that refers to it.
#[derive(Clone, Copy)]
struct Cost {
    nodes: usize,
    bytes: usize,
    height: usize,
}

/// Identity used to detect duplicate keys: npm `yaml` compares scalar keys by their resolved
/// value (so `1` and `"1"` differ, `1` and `1.0` clash), and collection keys never clash.
#[derive(PartialEq, Eq, Hash)]
enum KeyId {
    Null,
    Bool(bool),
    Number(u64),
    String(String),
}

enum Collection {
    Seq(Vec<JsValue>),
    Map {
        entries: IndexMap<String, JsValue>,
        seen: HashSet<KeyId>,
        /// The key whose value comes next (`None` while waiting for a key).
        pending_key: Option<String>,
    },
}

struct Frame {
    collection: Collection,
    anchor: usize,
    nodes: usize,
    bytes: usize,
    height: usize,
}

#[derive(Default)]
struct Loader {
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Rc<JsValue>, Cost)>,
    root: Option<Built>,
    documents: usize,
    aliases: usize,
    alias_nodes: usize,
    alias_bytes: usize,
}

impl Loader {
    fn load(mut self, block: &str) -> Option<Built> {
        let mut parser = Parser::new_from_str(block);
        loop {
            let (event, _) = parser.next_token().ok()?;
            match event {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::StreamEnd => break,
                // npm `yaml`'s `parse` throws on a stream with several documents.
                Event::DocumentStart => {
                    self.documents += 1;
                    if self.documents > 1 {
                        return None;
                    }
                }
                Event::Scalar(text, style, anchor, tag) => {
                    let bytes = text.len();
                    let value = resolve_scalar(text, style, tag.as_ref());
                    self.deliver(
                        Built {
                            value,
                            nodes: 1,
                            bytes,
                            height: 0,
                        },
                        anchor,
                    )?;
                }
                Event::SequenceStart(anchor, _) => {
                    self.open(Collection::Seq(Vec::new()), anchor)?
                }
                Event::MappingStart(anchor, _) => self.open(
                    Collection::Map {
                        entries: IndexMap::new(),
                        seen: HashSet::new(),
                        pending_key: None,
                    },
                    anchor,
                )?,
                Event::SequenceEnd | Event::MappingEnd => {
                    let frame = self.stack.pop()?;
                    let value = match frame.collection {
                        Collection::Seq(items) => JsValue::Array(items),
                        Collection::Map {
                            pending_key: Some(_),
                            ..
                        } => return None,
                        Collection::Map { entries, .. } => JsValue::Object(entries),
                    };
                    let built = Built {
                        value,
                        nodes: frame.nodes,
                        bytes: frame.bytes,
                        height: frame.height,
                    };
                    self.deliver(built, frame.anchor)?;
                }
                Event::Alias(id) => {
                    // An anchor still being built is not in the table yet: a self-referencing
                    // alias fails here rather than looping.
                    let (shared, cost) = self.anchors.get(&id)?.clone();
                    self.aliases += 1;
                    self.alias_nodes = self.alias_nodes.saturating_add(cost.nodes);
                    self.alias_bytes = self.alias_bytes.saturating_add(cost.bytes);
                    if self.aliases > MAX_ALIASES
                        || self.alias_nodes > MAX_ALIAS_NODES
                        || self.alias_bytes > MAX_ALIAS_BYTES
                        || self.stack.len() + cost.height > MAX_DEPTH
                    {
                        return None;
                    }
                    let built = Built {
                        value: JsValue::Shared(shared),
                        nodes: cost.nodes,
                        bytes: cost.bytes,
                        height: cost.height,
                    };
                    self.deliver(built, 0)?;
                }
            }
        }
        if !self.stack.is_empty() {
            return None;
        }
        self.root
    }

    fn open(&mut self, collection: Collection, anchor: usize) -> Option<()> {
        if self.stack.len() >= MAX_DEPTH {
            return None;
        }
        self.stack.push(Frame {
            collection,
            anchor,
            nodes: 1,
            bytes: 0,
            height: 1,
        });
        Some(())
    }

    /// Hands a finished node to the open collection (or makes it the document root).
    fn deliver(&mut self, mut built: Built, anchor: usize) -> Option<()> {
        if anchor != 0 {
            let shared = Rc::new(built.value);
            let cost = Cost {
                nodes: built.nodes,
                bytes: built.bytes,
                height: built.height,
            };
            // A re-used anchor name gets a fresh id from the parser, so inserts never clash.
            self.anchors.insert(anchor, (Rc::clone(&shared), cost));
            built.value = JsValue::Shared(shared);
        }
        let Some(frame) = self.stack.last_mut() else {
            if self.root.is_some() {
                return None;
            }
            self.root = Some(built);
            return Some(());
        };
        frame.nodes = frame.nodes.saturating_add(built.nodes);
        frame.bytes = frame.bytes.saturating_add(built.bytes);
        frame.height = frame.height.max(built.height + 1);
        match &mut frame.collection {
            Collection::Seq(items) => items.push(built.value),
            Collection::Map {
                entries,
                seen,
                pending_key,
            } => match pending_key.take() {
                Some(key) => {
                    entries.insert(key, built.value);
                }
                None => {
                    if let Some(id) = key_id(&built.value)
                        && !seen.insert(id)
                    {
                        return None;
                    }
                    *pending_key = Some(key_string(&built.value));
                }
            },
        }
        Some(())
    }
}

fn key_id(key: &JsValue) -> Option<KeyId> {
    match key.resolved() {
        JsValue::Null => Some(KeyId::Null),
        JsValue::Bool(b) => Some(KeyId::Bool(*b)),
        // NaN never equals itself, so it never clashes; -0 and 0 are the same key.
        JsValue::Number(n) if n.is_nan() => None,
        JsValue::Number(n) => Some(KeyId::Number(if *n == 0.0 { 0 } else { n.to_bits() })),
        JsValue::String(s) => Some(KeyId::String(s.clone())),
        JsValue::Array(_) | JsValue::Object(_) | JsValue::Shared(_) => None,
    }
}

/// The property name a key becomes in a JS object: `null` → `""`, scalars via `String()`,
/// collections as compact JSON.
fn key_string(key: &JsValue) -> String {
    match key.resolved() {
        JsValue::Null => String::new(),
        JsValue::Array(_) | JsValue::Object(_) => key.to_json(),
        other => other.to_js_string(),
    }
}

/// YAML 1.2 core schema: quoted and block scalars are strings, plain scalars may be null,
/// booleans or numbers, and an explicit `!!` tag forces its type where the text allows it.
fn resolve_scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> JsValue {
    if let Some(tag) = tag {
        if tag.handle != CORE_TAG_PREFIX {
            // Local and non-specific tags: npm `yaml` warns and keeps the text as a string.
            return JsValue::String(text);
        }
        let typed = match tag.suffix.as_str() {
            "null" => Some(JsValue::Null),
            "bool" => parse_bool(&text).map(JsValue::Bool),
            "int" => parse_int(&text).map(JsValue::Number),
            "float" => parse_float(&text)
                .or_else(|| parse_int(&text))
                .map(JsValue::Number),
            _ => None,
        };
        return typed.unwrap_or(JsValue::String(text));
    }
    if style != TScalarStyle::Plain {
        return JsValue::String(text);
    }
    if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL") {
        return JsValue::Null;
    }
    if let Some(b) = parse_bool(&text) {
        return JsValue::Bool(b);
    }
    if let Some(n) = parse_int(&text).or_else(|| parse_float(&text)) {
        return JsValue::Number(n);
    }
    JsValue::String(text)
}

fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// `[-+]?[0-9]+`, `0o[0-7]+` or `0x[0-9a-fA-F]+`, as a double (JS has no other number).
fn parse_int(text: &str) -> Option<f64> {
    if let Some(octal) = text.strip_prefix("0o") {
        return parse_radix(octal, 8);
    }
    if let Some(hex) = text.strip_prefix("0x") {
        return parse_radix(hex, 16);
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<f64>().ok()
}

fn parse_radix(digits: &str, radix: u32) -> Option<f64> {
    if digits.is_empty() {
        return None;
    }
    let mut value = 0.0_f64;
    for c in digits.chars() {
        value = value * f64::from(radix) + f64::from(c.to_digit(radix)?);
    }
    Some(value)
}

/// `[-+]?.inf`, `.nan`, and decimals with a fraction and/or an exponent.
fn parse_float(text: &str) -> Option<f64> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return Some(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if matches!(text, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    let (number, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = all_digits(whole)
        && match fraction {
            // `.5`, `1.`, `1.5`; a lone `.` is not a number.
            Some(fraction) => all_digits(fraction) && !(whole.is_empty() && fraction.is_empty()),
            // Without a fraction, only the exponent form counts (plain digits are ints).
            None => !whole.is_empty() && exponent.is_some(),
        };
    let exponent_ok = exponent.is_none_or(|e| {
        let digits = e.strip_prefix(['-', '+']).unwrap_or(e);
        !digits.is_empty() && all_digits(digits)
    });
    if !mantissa_ok || !exponent_ok {
        return None;
    }
    // Rust's parser rejects a bare `1.` before an exponent in some forms; normalise the
    // mantissa so every accepted spelling parses.
    let mut normalised = String::with_capacity(text.len() + 2);
    if negative {
        normalised.push('-');
    }
    normalised.push_str(if whole.is_empty() { "0" } else { whole });
    if let Some(fraction) = fraction.filter(|f| !f.is_empty()) {
        normalised.push('.');
        normalised.push_str(fraction);
    }
    if let Some(exponent) = exponent {
        normalised.push('e');
        normalised.push_str(exponent);
    }
    normalised.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(block: &str) -> Option<String> {
        parse_mapping(block).map(|entries| JsValue::Object(entries).to_json())
    }

    #[test]
    fn plain_scalars_resolve_per_core_schema() {
        let block = "a: true\nb: FALSE\nc: ~\nd: 0x1F\ne: 0o17\nf: -12\ng: 1.50\nh: .inf\ni: -.Inf\nj: .nan\n\
                     k: 1e3\nl: 1.\nm: .5\nn: yes\no: 012\np: 1_000\nq: null\nr: '3'\ns: !!str 4\nt: !!int 5\n\
                     u: !!float 6\nv: !foo 7";
        assert_eq!(
            parse(block).as_deref(),
            Some(
                r#"{"a":true,"b":false,"c":null,"d":31,"e":15,"f":-12,"g":1.5,"h":null,"i":null,"j":null,"k":1000,"l":1,"m":0.5,"n":"yes","o":12,"p":"1_000","q":null,"r":"3","s":"4","t":5,"u":6,"v":"7"}"#
            )
        );
    }

    #[test]
    fn duplicate_keys_fail_but_distinct_types_do_not() {
        assert_eq!(parse("a: 1\na: 2"), None);
        assert_eq!(parse("x:\n  1: a\n  1.0: b"), None);
        assert_eq!(parse("1: a\n'1': b").as_deref(), Some(r#"{"1":"b"}"#));
    }

    #[test]
    fn anchors_and_aliases_share_values() {
        assert_eq!(
            parse("a: &x [1, 2]\nb: *x").as_deref(),
            Some(r#"{"a":[1,2],"b":[1,2]}"#)
        );
        assert_eq!(parse("a: &x [1, *x]"), None);
        assert_eq!(parse("a: *nope"), None);
    }

    #[test]
    fn non_mappings_and_multiple_documents_fail() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("- a\n- b"), None);
        assert_eq!(parse("plain"), None);
        assert_eq!(parse("a: 1\n...\n--- \nb: 2"), None);
    }

    #[test]
    fn nesting_is_bounded_even_through_aliases() {
        let ok = format!(
            "a: {}{}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(parse(&ok).is_some());
        let too_deep = format!("a: {}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(parse(&too_deep), None);
        let nested = "[".repeat(40) + &"]".repeat(40);
        let spliced = format!(
            "a: &x {nested}\nb: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
        );
        assert_eq!(parse(&spliced), None);
    }

    #[test]
    fn alias_budget_stops_a_billion_laughs() {
        let mut block = String::from(
            "l0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for level in 1..9 {
            let prev = level - 1;
            let refs = vec![format!("*l{prev}"); 10].join(",");
            block.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
        }
        assert_eq!(parse(&block), None);
    }
}
