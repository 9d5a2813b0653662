//! Download URLs of `install[]` entries: accepted only as `http:`/`https:` and stored in the
//! form WHATWG `new URL(raw).toString()` produces (OpenClaw stores that string).
//!
//! This is the subset of the WHATWG URL parser that http(s) URLs need: scheme and host
//! lowercasing, `\` as `/`, default ports dropped, IPv4 shorthand (`0x7f.1`) and IPv6
//! canonicalisation, dot-segment removal and percent-encoding of path, query and fragment.
//! Where the full algorithm would go further it rejects instead: hosts with non-ASCII or `%`
//! (which need IDNA / percent-decoding) and any control character.

use std::net::Ipv6Addr;

use crate::frontmatter::js::is_js_whitespace;

/// The normalised URL, or `None` when `raw` is not an absolute http(s) URL without whitespace.
pub(super) fn normalize_http_url(raw: &str) -> Option<String> {
    if raw.is_empty() || raw.chars().any(|c| is_js_whitespace(c) || c.is_control()) {
        return None;
    }
    let (scheme, rest) = raw.split_once(':')?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    // Special schemes ignore any run of slashes (either kind) before the authority.
    let rest = rest.trim_start_matches(['/', '\\']);
    let authority_end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);

    let (userinfo, host_port) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let (host, port) = split_host_port(host_port)?;
    let host = parse_host(host)?;
    let port = match port {
        None | Some("") => None,
        Some(digits) => Some(parse_port(digits)?).filter(|port| *port != default_port),
    };

    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };

    let mut url = format!("{scheme}://");
    if let Some(userinfo) = userinfo {
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        if !user.is_empty() || !password.is_empty() {
            percent_encode(user, is_userinfo_encoded, &mut url);
            if !password.is_empty() {
                url.push(':');
                percent_encode(password, is_userinfo_encoded, &mut url);
            }
            url.push('@');
        }
    }
    url.push_str(&host);
    if let Some(port) = port {
        url.push_str(&format!(":{port}"));
    }
    url.push_str(&normalize_path(path));
    if let Some(query) = query {
        url.push('?');
        percent_encode(query, is_query_encoded, &mut url);
    }
    if let Some(fragment) = fragment {
        url.push('#');
        percent_encode(fragment, is_fragment_encoded, &mut url);
    }
    Some(url)
}

/// Splits `host[:port]`, where an IPv6 host is bracketed and may itself contain `:`.
fn split_host_port(host_port: &str) -> Option<(&str, Option<&str>)> {
    if host_port.starts_with('[') {
        let close = host_port.find(']')?;
        let (host, after) = host_port.split_at(close + 1);
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    Some(match host_port.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (host_port, None),
    })
}

fn parse_port(digits: &str) -> Option<u16> {
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Some(0);
    }
    significant.parse::<u16>().ok()
}

fn parse_host(host: &str) -> Option<String> {
    if host.is_empty() {
        return None;
    }
    if let Some(inner) = host.strip_prefix('[') {
        let address: Ipv6Addr = inner.strip_suffix(']')?.parse().ok()?;
        return Some(format!("[{}]", format_ipv6(&address)));
    }
    let forbidden = |c: char| {
        !c.is_ascii()
            || c.is_ascii_control()
            || matches!(
                c,
                ' ' | '#' | '%' | '/' | ':' | '<' | '>' | '?' | '@' | '[' | '\\' | ']' | '^' | '|'
            )
    };
    if host.chars().any(forbidden) {
        return None;
    }
    let host = host.to_ascii_lowercase();
    if ends_in_number(&host) {
        return parse_ipv4(&host).map(|address| {
            let [a, b, c, d] = address.to_be_bytes();
            format!("{a}.{b}.{c}.{d}")
        });
    }
    Some(host)
}

/// WHATWG "ends in a number": the last label (ignoring one trailing dot) is decimal or `0x…`.
fn ends_in_number(host: &str) -> bool {
    let mut labels: Vec<&str> = host.split('.').collect();
    if labels.len() > 1 && labels.last() == Some(&"") {
        labels.pop();
    }
    let Some(last) = labels.last() else {
        return false;
    };
    if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    last.strip_prefix("0x")
        .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// IPv4 in any form browsers accept: 1–4 parts, each decimal, octal (`0…`) or hex (`0x…`),
/// the last part filling the remaining bytes (`127.1` is `127.0.0.1`).
fn parse_ipv4(host: &str) -> Option<u32> {
    let mut parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    if parts.len() > 4 {
        return None;
    }
    let numbers = parts
        .iter()
        .map(|part| parse_ipv4_number(part))
        .collect::<Option<Vec<u64>>>()?;
    let (last, leading) = numbers.split_last()?;
    if leading.iter().any(|n| *n > 255) {
        return None;
    }
    let remaining_bytes = u32::try_from(5 - numbers.len()).ok()?;
    if *last >= 256_u64.pow(remaining_bytes) {
        return None;
    }
    let mut address = *last;
    for (index, n) in leading.iter().enumerate() {
        address += n << (8 * (3 - index));
    }
    u32::try_from(address).ok()
}

fn parse_ipv4_number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    let mut value: u64 = 0;
    for c in digits.chars() {
        let digit = u64::from(c.to_digit(radix)?);
        // Saturate: anything this large fails the range checks anyway.
        value = value.saturating_mul(u64::from(radix)).saturating_add(digit);
    }
    Some(value)
}

/// RFC 5952 / WHATWG: lowercase hex pieces, the first longest run of 2+ zero pieces as `::`,
/// and no dotted IPv4 tail.
fn format_ipv6(address: &Ipv6Addr) -> String {
    let pieces = address.segments();
    let (mut best_start, mut best_len) = (0, 0);
    let mut index = 0;
    while index < pieces.len() {
        let run = pieces[index..]
            .iter()
            .take_while(|piece| **piece == 0)
            .count();
        if run > best_len {
            (best_start, best_len) = (index, run);
        }
        index += run.max(1);
    }
    let hex = |pieces: &[u16]| {
        pieces
            .iter()
            .map(|piece| format!("{piece:x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    if best_len < 2 {
        return hex(&pieces);
    }
    format!(
        "{}::{}",
        hex(&pieces[..best_start]),
        hex(&pieces[best_start + best_len..])
    )
}

/// Path segments with `.`/`..` (also percent-encoded) resolved and each segment encoded.
fn normalize_path(path: &str) -> String {
    let mut segments: Vec<String> = Vec::new();
    let raw: Vec<&str> = if path.is_empty() {
        Vec::new()
    } else {
        path[1..].split(['/', '\\']).collect()
    };
    for (index, segment) in raw.iter().enumerate() {
        let is_last = index + 1 == raw.len();
        let lower = segment.to_ascii_lowercase();
        match lower.as_str() {
            "." | "%2e" => {}
            ".." | ".%2e" | "%2e." | "%2e%2e" => {
                segments.pop();
            }
            _ => {
                let mut encoded = String::with_capacity(segment.len());
                percent_encode(segment, is_path_encoded, &mut encoded);
                segments.push(encoded);
                continue;
            }
        }
        // A trailing `.` or `..` still leaves the path ending in a slash.
        if is_last {
            segments.push(String::new());
        }
    }
    format!("/{}", segments.join("/"))
}

fn percent_encode(text: &str, encoded: fn(char) -> bool, out: &mut String) {
    let mut buffer = [0; 4];
    for c in text.chars() {
        if encoded(c) {
            for byte in c.encode_utf8(&mut buffer).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
}

fn is_c0_or_non_ascii(c: char) -> bool {
    !(' '..='~').contains(&c)
}

fn is_fragment_encoded(c: char) -> bool {
    is_c0_or_non_ascii(c) || matches!(c, ' ' | '"' | '<' | '>' | '`')
}

fn is_query_encoded(c: char) -> bool {
    // The "special-query" set: http(s) also encode `'`.
    is_c0_or_non_ascii(c) || matches!(c, ' ' | '"' | '#' | '<' | '>' | '\'')
}

fn is_path_encoded(c: char) -> bool {
    is_c0_or_non_ascii(c) || matches!(c, ' ' | '"' | '#' | '<' | '>' | '?' | '`' | '{' | '}')
}

fn is_userinfo_encoded(c: char) -> bool {
    is_path_encoded(c)
        || matches!(
            c,
            '/' | ':' | ';' | '=' | '@' | '[' | '\\' | ']' | '^' | '|'
        )
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
            "http://exämple.com/",
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
