//! Download URLs of `install[]` entries: accepted only as `http:`/`https:` and stored in the
//! form WHATWG `new URL(raw).toString()` produces (OpenClaw stores that string), by the `url`
//! crate's WHATWG parser. Stricter than `new URL()` in one way: any whitespace or control
//! character refuses the URL instead of being trimmed or dropped.

use crate::frontmatter::js::is_js_whitespace;

/// The normalised URL, or `None` when `raw` is not an absolute http(s) URL without whitespace.
pub(super) fn normalize_http_url(raw: &str) -> Option<String> {
    if raw.is_empty() || raw.chars().any(|c| is_js_whitespace(c) || c.is_control()) {
        return None;
    }
    let parsed = ::url::Url::parse(raw).ok()?;
    matches!(parsed.scheme(), "http" | "https").then(|| parsed.to_string())
}

#[cfg(test)]
mod tests {
    use super::normalize_http_url;

    #[test]
    fn http_urls_normalise_like_whatwg() {
        let cases = [
            (
                "https://example.com/tool.tar.gz",
                "https://example.com/tool.tar.gz",
            ),
            ("https://example.com", "https://example.com/"),
            ("HTTPS://Example.COM:443/a/./b/../c?q=1 #f", ""),
            (
                "HTTPS://Example.COM:443/a/./b/../c?q='1'#f",
                "https://example.com/a/c?q=%271%27#f",
            ),
            ("http://example.com:80", "http://example.com/"),
            ("http://example.com:8080/", "http://example.com:8080/"),
            ("http:example.com\\x\\y", "http://example.com/x/y"),
            ("http://user:pa@ss@host/", "http://user:pa%40ss@host/"),
            ("http://@host/", "http://host/"),
            ("http://0x7f.1/", "http://127.0.0.1/"),
            ("http://[0:0::1]:8/", "http://[::1]:8/"),
            ("http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/"),
            ("http://x/é{}/..", "http://x/"),
            ("http://x/é{}", "http://x/%C3%A9%7B%7D"),
            ("http://x/a/.", "http://x/a/"),
            // A host that needs IDNA becomes its punycode, as `new URL()` makes it.
            ("http://exämple.com/", "http://xn--exmple-cua.com/"),
        ];
        for (raw, expected) in cases {
            let expected = (!expected.is_empty()).then(|| expected.to_owned());
            assert_eq!(normalize_http_url(raw), expected, "for {raw}");
        }
    }

    #[test]
    fn other_schemes_and_broken_hosts_are_rejected() {
        for raw in [
            "file:///tmp/payload.tgz",
            "ftp://example.com/x",
            "example.com/x",
            "https://",
            "https://exa mple.com",
            "http://1.2.3.256/",
            "http://1.2.3.4.5/",
            "http://x:99999/",
            "http://x:8a/",
            "http://[::1/",
            "http://a@/",
            "javascript:alert(1)",
        ] {
            assert_eq!(normalize_http_url(raw), None, "for {raw}");
        }
    }
}
