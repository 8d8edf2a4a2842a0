//! Rust string literals decoded with a map back to the source, so that a finding inside
//! embedded SQL or Lua points at the exact line and column of the file.

use locklint_ir::TextMap;

/// Decode the source text of a string literal (`"..."`, `r#"..."#`, `b"..."`) that starts at
/// byte `base` of the file. Returns the value and the map from value offsets to file offsets.
pub fn decode(src: &str, base: usize) -> Option<(String, TextMap)> {
    let (raw, rest) = match src.strip_prefix('b') {
        Some(r) => (r.starts_with('r'), r),
        None => (src.starts_with('r'), src),
    };
    let prefix_len = src.len() - rest.len();
    if raw {
        let after_r = &rest[1..];
        let hashes = after_r.bytes().take_while(|&b| b == b'#').count();
        let open = prefix_len + 1 + hashes + 1;
        let close = hashes + 1;
        if src.len() < open + close {
            return None;
        }
        let body = &src[open..src.len() - close];
        let mut map = TextMap::default();
        map.push(0, base + open);
        return Some((body.to_string(), map));
    }
    let body_start = prefix_len + 1;
    if !rest.starts_with('"') || !src.ends_with('"') || src.len() < body_start + 1 {
        return None;
    }
    let body = &src[body_start..src.len() - 1];
    let mut out = String::with_capacity(body.len());
    let mut map = TextMap::default();
    let mut chars = body.char_indices().peekable();
    let mut verbatim = false;
    while let Some((i, c)) = chars.next() {
        let at = base + body_start + i;
        if c != '\\' {
            if !verbatim {
                map.push(out.len(), at);
                verbatim = true;
            }
            out.push(c);
            continue;
        }
        verbatim = false;
        map.push(out.len(), at);
        let Some((_, e)) = chars.next() else { break };
        match e {
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            '0' => out.push('\0'),
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            'x' => {
                let hex: String = (0..2)
                    .filter_map(|_| chars.next().map(|(_, h)| h))
                    .collect();
                if let Some(ch) = u8::from_str_radix(&hex, 16).ok().map(char::from) {
                    out.push(ch);
                }
            }
            'u' => {
                let mut hex = String::new();
                for (_, h) in chars.by_ref() {
                    if h == '}' {
                        break;
                    }
                    if h != '{' && h != '_' {
                        hex.push(h);
                    }
                }
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            '\n' | '\r' => {
                // line continuation: skip the newline and the next line's leading whitespace
                while let Some((_, w)) = chars.peek() {
                    if w.is_whitespace() {
                        chars.next();
                    } else {
                        break;
                    }
                }
            }
            other => out.push(other),
        }
    }
    Some((out, map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(src: &str, needle: &str) {
        let (text, map) = decode(src, 100).unwrap();
        let at = text.find(needle).unwrap();
        let source_at = map.to_source(at) - 100;
        assert!(
            src[source_at..].starts_with(needle),
            "{src:?} {needle:?} -> {source_at}"
        );
    }

    #[test]
    fn plain_and_raw_strings_map_back() {
        check(r#""UPDATE t SET x = 1 WHERE id = 7""#, "WHERE");
        check(r###"r#"SELECT "quoted" FROM t"#"###, "FROM");
        check(r#"b"DEL key""#, "key");
    }

    #[test]
    fn escapes_and_line_continuations_keep_positions_exact() {
        let src = "\"UPDATE t \\\n        SET a = 1\\n WHERE id = $1\"";
        let (text, map) = decode(src, 0).unwrap();
        assert_eq!(text, "UPDATE t SET a = 1\n WHERE id = $1");
        let w = text.find("WHERE").unwrap();
        assert!(src[map.to_source(w)..].starts_with("WHERE"));
        let s = text.find("SET").unwrap();
        assert!(src[map.to_source(s)..].starts_with("SET"));
        let (t, m) = decode(r#""a\u{e9}b\x41c""#, 0).unwrap();
        assert_eq!(t, "aébAc");
        assert_eq!(
            m.to_source(t.find('c').unwrap()),
            r#""a\u{e9}b\x41c""#.find('c').unwrap()
        );
    }
}
