//! YAML documents (such as `clawless.yaml`) as JSON values, through the same bounded YAML
//! loader that reads skill frontmatter: aliases, nesting depth and duplicate keys are
//! limited, so a hostile document fails cleanly instead of exhausting memory.

use serde_json::Value;

/// A document that is not a YAML mapping within the loader's limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a valid YAML mapping (check indentation and quoting; duplicate keys, more than 64 levels \
     of nesting and more than 100 aliases are refused)"
)]
pub struct YamlError;

/// Parses a YAML document whose top level is a mapping.
pub fn parse_document(text: &str) -> Result<Value, YamlError> {
    let mapping = crate::skills::frontmatter::yaml::parse_mapping(text).ok_or(YamlError)?;
    let object = crate::skills::frontmatter::js::JsValue::Object(mapping);
    serde_json::from_str(&object.to_json()).map_err(|_| YamlError)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn mappings_become_json_with_typed_scalars() {
        let value = parse_document("a: 1\nb: [x, true]\nc: {d: null, e: '2'}\n").unwrap();
        assert_eq!(
            value,
            json!({"a": 1, "b": ["x", true], "c": {"d": null, "e": "2"}})
        );
    }

    #[test]
    fn non_mappings_duplicates_and_bombs_are_refused() {
        assert_eq!(parse_document("- a\n- b\n"), Err(YamlError));
        assert_eq!(parse_document("a: 1\na: 2\n"), Err(YamlError));
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..10 {
            let refs = vec![format!("*a{}", level - 1); 10].join(", ");
            bomb.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        assert_eq!(parse_document(&bomb), Err(YamlError));
    }
}
