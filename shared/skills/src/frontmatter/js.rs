//! A value tree with JavaScript semantics, shared by the YAML loader and the `metadata` JSON5
//! reader.
//!
//! OpenClaw turns parsed values into strings with `String(v)`, `JSON.stringify(v)` and
//! `.trim()`; the helpers here reproduce those so that the strings clawless stores are the
//! ones OpenClaw would store. Trees are at most [`MAX_DEPTH`] deep (both producers enforce
//! it), so the recursive helpers below cannot exhaust the stack.

use std::rc::Rc;

use indexmap::IndexMap;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Deepest collection nesting either producer accepts; deeper input is treated as unparseable.
pub(crate) const MAX_DEPTH: usize = 64;

/// A parsed value, shaped like the JavaScript value OpenClaw would hold.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsValue {
    Null,
    Bool(bool),
    /// Every number is a double, as in JavaScript.
    Number(f64),
    String(String),
    Array(Vec<JsValue>),
    /// Own properties in insertion order; re-setting a key keeps its first position, like a JS
    /// object. Integer-like keys are moved first only when serialised (see [`JsValue::to_json`]).
    Object(IndexMap<String, JsValue>),
    /// A YAML anchor's value, shared by every alias that refers to it (never copied, so alias
    /// expansion costs no memory; the loader budgets the *expanded* size instead).
    Shared(Rc<JsValue>),
}

impl JsValue {
    /// Looks through [`JsValue::Shared`] indirections.
    pub(crate) fn resolved(&self) -> &JsValue {
        let mut value = self;
        while let JsValue::Shared(inner) = value {
            value = inner;
        }
        value
    }

    /// `String(value)`.
    pub(crate) fn to_js_string(&self) -> String {
        let mut out = String::new();
        self.write_js_string(&mut out);
        out
    }

    fn write_js_string(&self, out: &mut String) {
        match self.resolved() {
            JsValue::Null => out.push_str("null"),
            JsValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            JsValue::Number(n) => out.push_str(&number_to_string(*n)),
            JsValue::String(s) => out.push_str(s),
            // `Array.prototype.join(",")`: null/undefined elements become empty strings.
            JsValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if !matches!(item.resolved(), JsValue::Null) {
                        item.write_js_string(out);
                    }
                }
            }
            JsValue::Object(_) => out.push_str("[object Object]"),
            JsValue::Shared(_) => {}
        }
    }

    /// `JSON.stringify(value)`: compact, non-finite numbers as `null`, and object keys in JS
    /// property order (array-index keys ascending, then the rest in insertion order).
    pub(crate) fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        match self.resolved() {
            JsValue::Null => out.push_str("null"),
            JsValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            JsValue::Number(n) if n.is_finite() => out.push_str(&number_to_string(*n)),
            JsValue::Number(_) => out.push_str("null"),
            JsValue::String(s) => write_json_string(s, out),
            JsValue::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            JsValue::Object(entries) => {
                out.push('{');
                for (i, (key, value)) in js_property_order(entries).into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_json_string(key, out);
                    out.push(':');
                    value.write_json(out);
                }
                out.push('}');
            }
            JsValue::Shared(_) => {}
        }
    }
}

/// JS objects enumerate array-index keys (`"0"`…`"4294967294"`) first, ascending, then the
/// other keys in insertion order; `JSON.stringify` follows that order.
fn js_property_order(entries: &IndexMap<String, JsValue>) -> Vec<(&String, &JsValue)> {
    let mut indexed: Vec<(u32, &String, &JsValue)> = Vec::new();
    let mut named: Vec<(&String, &JsValue)> = Vec::new();
    for (key, value) in entries {
        match array_index(key) {
            Some(index) => indexed.push((index, key, value)),
            None => named.push((key, value)),
        }
    }
    if indexed.is_empty() {
        return named;
    }
    indexed.sort_by_key(|(index, _, _)| *index);
    indexed
        .into_iter()
        .map(|(_, key, value)| (key, value))
        .chain(named)
        .collect()
}

/// A canonical decimal below 2³²−1 (no sign, no leading zero except `"0"` itself).
fn array_index(key: &str) -> Option<u32> {
    if key.is_empty()
        || !key.bytes().all(|b| b.is_ascii_digit())
        || (key.len() > 1 && key.starts_with('0'))
    {
        return None;
    }
    key.parse::<u32>().ok().filter(|index| *index != u32::MAX)
}

/// JSON string literal as `JSON.stringify` writes it (`\b \f \n \r \t`, other controls as
/// lowercase `\u00xx`, everything else verbatim).
fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `Number.prototype.toString()` for a double: shortest round-trip digits, plain notation for
/// decimal exponents in `-7..21`, exponent notation (`1e+21`, `1.5e-7`) outside it.
pub(crate) fn number_to_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".to_owned();
    }
    if n == 0.0 {
        // Covers -0, which JS prints as "0".
        return "0".to_owned();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if n < 0.0 {
        return format!("-{}", number_to_string(-n));
    }
    // Rust's `{:e}` prints the shortest round-trip digits, e.g. "1.2345e3" or "5e-7".
    let formatted = format!("{n:e}");
    let Some((mantissa, exponent)) = formatted.split_once('e') else {
        return formatted;
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let Ok(exponent) = exponent.parse::<i64>() else {
        return formatted;
    };
    let k = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    // JS's `n`: the value is 0.digits × 10^point.
    let point = exponent + 1;
    if k <= point && point <= 21 {
        let zeros = usize::try_from(point - k).unwrap_or(0);
        format!("{digits}{}", "0".repeat(zeros))
    } else if 0 < point && point <= 21 {
        let split = usize::try_from(point).unwrap_or(0).min(digits.len());
        format!("{}.{}", &digits[..split], &digits[split..])
    } else if -6 < point && point <= 0 {
        let zeros = usize::try_from(-point).unwrap_or(0);
        format!("0.{}{digits}", "0".repeat(zeros))
    } else {
        let sign = if point - 1 < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        format!("{first}{fraction}e{sign}{}", (point - 1).abs())
    }
}

/// JavaScript's `\s` / `String.prototype.trim` whitespace (differs from Rust's `char::is_whitespace`
/// on U+FEFF, which JS trims, and U+0085, which it does not).
pub(crate) fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// `String.prototype.trim`.
pub(crate) fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// Reads any self-describing serde input (here: JSON5) into a [`JsValue`]. Recursion follows
/// the input's nesting, so callers must bound that first (see `metadata`'s depth pre-scan).
impl<'de> Deserialize<'de> for JsValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsValueVisitor)
    }
}

struct JsValueVisitor;

impl<'de> Visitor<'de> for JsValueVisitor {
    type Value = JsValue;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON5 value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<JsValue, E> {
        Ok(JsValue::Bool(v))
    }

    // Integers become doubles (`as` rounds to nearest), losing precision past 2^53 as
    // JSON5.parse does.
    fn visit_i64<E>(self, v: i64) -> Result<JsValue, E> {
        Ok(JsValue::Number(v as f64))
    }

    fn visit_u64<E>(self, v: u64) -> Result<JsValue, E> {
        Ok(JsValue::Number(v as f64))
    }

    fn visit_i128<E>(self, v: i128) -> Result<JsValue, E> {
        Ok(JsValue::Number(v as f64))
    }

    fn visit_u128<E>(self, v: u128) -> Result<JsValue, E> {
        Ok(JsValue::Number(v as f64))
    }

    fn visit_f64<E>(self, v: f64) -> Result<JsValue, E> {
        Ok(JsValue::Number(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<JsValue, E> {
        Ok(JsValue::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<JsValue, E> {
        Ok(JsValue::String(v))
    }

    fn visit_unit<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::Null)
    }

    fn visit_none<E>(self) -> Result<JsValue, E> {
        Ok(JsValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<JsValue, D::Error> {
        JsValue::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<JsValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<JsValue>()? {
            items.push(item);
        }
        Ok(JsValue::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsValue, A::Error> {
        let mut entries = IndexMap::new();
        // A repeated key overwrites the value but keeps its first position, as in JSON5.parse.
        while let Some((key, value)) = map.next_entry::<String, JsValue>()? {
            entries.insert(key, value);
        }
        Ok(JsValue::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_javascript() {
        let cases = [
            (3.0, "3"),
            (1.5, "1.5"),
            (1.0, "1"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123_456_789_012_345_680_000.0, "123456789012345680000"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000_001, "0.000001"),
            (2.5e300, "2.5e+300"),
            (-42.25, "-42.25"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
        ];
        for (n, expected) in cases {
            assert_eq!(number_to_string(n), expected, "for {n:e}");
        }
    }

    #[test]
    fn json_output_matches_json_stringify() {
        let mut inner = IndexMap::new();
        inner.insert("b".to_owned(), JsValue::Number(f64::NAN));
        inner.insert("10".to_owned(), JsValue::Bool(true));
        inner.insert("2".to_owned(), JsValue::String("q\"\u{1}\n".to_owned()));
        let value = JsValue::Array(vec![
            JsValue::Object(inner),
            JsValue::Null,
            JsValue::Number(1.0),
        ]);
        assert_eq!(
            value.to_json(),
            r#"[{"2":"q\"\u0001\n","10":true,"b":null},null,1]"#
        );
    }

    #[test]
    fn js_string_joins_arrays_and_hides_objects() {
        let value = JsValue::Array(vec![
            JsValue::Number(1.0),
            JsValue::Null,
            JsValue::Array(vec![JsValue::Bool(false), JsValue::String("x".to_owned())]),
            JsValue::Object(IndexMap::new()),
        ]);
        assert_eq!(value.to_js_string(), "1,,false,x,[object Object]");
    }

    #[test]
    fn js_trim_uses_javascript_whitespace() {
        assert_eq!(js_trim("\u{feff} a \u{3000}"), "a");
        assert_eq!(js_trim("\u{85}a"), "\u{85}a");
    }
}
