//! Name wildcards: `*` stands for any run of characters (including none) and every other
//! character only for itself. The tool policy's tool names, pruning's tool-result names and
//! the sub-agent allowlist's agent ids are all matched with [`wildcard_matches`]. (Exec
//! allowlist paths are globs of another kind, where `*` stops at `/`: `clawless-exec` owns
//! those.)

/// Whether all of `text` matches `pattern`, where `*` matches any run of characters
/// (including none) and every other character only itself. There are no other
/// metacharacters: `.`, `?`, `[`, `|`, `(` and `\` are literal.
pub fn wildcard_matches(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    let Some(first) = pieces.next() else {
        return text.is_empty();
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let after_stars: Vec<&str> = pieces.collect();
    let Some((last, middle)) = after_stars.split_last() else {
        // No `*`: the pattern is a literal.
        return rest.is_empty();
    };
    // Placing each middle piece as early as possible leaves the most room for the ones after
    // it, so a greedy scan is exact when `*` is the only wildcard.
    for piece in middle.iter().filter(|piece| !piece.is_empty()) {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edges() {
        assert!(wildcard_matches("*", ""));
        assert!(wildcard_matches("a*", "a"));
        assert!(wildcard_matches("*a", "a"));
        assert!(!wildcard_matches("a*a", "a"));
        assert!(wildcard_matches("a*a", "aa"));
        assert!(wildcard_matches("a**b", "ab"));
        assert!(wildcard_matches("*_*_*", "a_b_c"));
        assert!(!wildcard_matches("*_*_*", "a_bc"));
        assert!(wildcard_matches("é*ü", "éxü"));
        assert!(wildcard_matches("", ""));
        assert!(!wildcard_matches("", "a"));
        assert!(!wildcard_matches("exec", "exec2"));
        assert!(wildcard_matches("a?c", "a?c"));
        assert!(!wildcard_matches("a?c", "abc"));
        assert!(!wildcard_matches("a.c", "abc"));
    }

    /// Every character of the pattern consumed one at a time: slow, but obviously right.
    fn reference(pattern: &[char], text: &[char]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some(('*', rest)) => (0..=text.len()).any(|skip| reference(rest, &text[skip..])),
            Some((c, rest)) => text.first() == Some(c) && reference(rest, &text[1..]),
        }
    }

    proptest! {
        #[test]
        fn agrees_with_a_reference(pattern in "[ab*.?]{0,8}", text in "[ab.?]{0,10}") {
            let p: Vec<char> = pattern.chars().collect();
            let t: Vec<char> = text.chars().collect();
            prop_assert_eq!(wildcard_matches(&pattern, &text), reference(&p, &t));
        }
    }
}
