//! String literals that start like SQL, read from a Rust file's bytes: where the front-end
//! reads SQL text, a file holding one is parsed.

/// The first words `embed::looks_like_sql` accepts (upper case).
const SQL_STARTS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "CREATE", "ALTER", "DROP", "BEGIN", "COMMIT",
    "ROLLBACK", "LOCK", "SET", "TRUNCATE", "MERGE", "CALL", "DO", "VALUES", "REPLACE", "UPSERT",
];

/// Methods that run SQL text given as their first argument (`embed::method_site`).
pub(super) const SQL_METHOD_IDENTS: &[&str] = &[
    "execute",
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "execute_raw",
    "prepare",
    "prepare_cached",
    "batch_execute",
    "simple_query",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
];

/// Whether `text` holds a string literal whose decoded text may start like a SQL statement
/// where the front-end reads SQL: the initialiser of a `const` or `static` (after `=`), or
/// the first argument of a method that runs SQL (after `(`, in a file that names such a
/// method: `names_sql_method`, one of [`SQL_METHOD_IDENTS`] as a whole identifier). A literal is a `"` after whitespace, `r`, `#`s or `b`; its text starts like SQL
/// after whitespace and escapes (`\n`, `\t`, a line continuation), with a SQL keyword not
/// followed by a letter, or a `--` comment (taken as SQL: what follows is not looked at).
/// Quotes that close a literal or sit in comments are tested too, which only lets more
/// files through.
pub(super) fn has_sql_literal(text: &[u8], names_sql_method: bool) -> bool {
    memchr::memchr_iter(b'"', text).any(|at| {
        if !starts_like_sql(&text[at + 1..]) {
            return false;
        }
        match opened_after(&text[..at]) {
            Some(b'=') => true,
            Some(b'(') => names_sql_method,
            _ => false,
        }
    })
}

/// The byte before a literal's opening (`r`, `#`s and `b` of its prefix and whitespace
/// skipped).
fn opened_after(before: &[u8]) -> Option<u8> {
    let mut t = before;
    while let [rest @ .., b'#'] = t {
        t = rest;
    }
    if let [rest @ .., b'r'] = t {
        t = rest;
    }
    if let [rest @ .., b'b'] = t {
        t = rest;
    }
    t.trim_ascii_end().last().copied()
}

fn starts_like_sql(mut t: &[u8]) -> bool {
    loop {
        match t {
            // whitespace as `str::trim_start` sees it: ASCII's, the vertical tab, and others
            [c, rest @ ..] if c.is_ascii_whitespace() || *c == 0x0b => t = rest,
            [b'\\', b'n' | b't' | b'r' | b'\n' | b'\r', rest @ ..] => t = rest,
            [b'\\', b'x' | b'u', ..] => match escaped(t) {
                Some((c, len)) if c.is_whitespace() => t = &t[len..],
                // neither a letter nor a comment's `-`: no keyword starts here
                Some((c, _)) if !c.is_ascii_alphabetic() && c != '-' => return false,
                // a letter spelled as an escape, or an escape that does not read: cannot tell
                _ => return true,
            },
            [b'-', b'-', ..] => return true,
            [c, ..] if !c.is_ascii() => match first_char(t) {
                Some(c) if c.is_whitespace() => t = &t[c.len_utf8()..],
                Some(_) => return false,
                None => return true,
            },
            _ => break,
        }
    }
    let word_len = t.iter().take_while(|c| c.is_ascii_alphabetic()).count();
    if word_len == 0 || word_len > 8 {
        return false;
    }
    let word = &t[..word_len];
    if word.eq_ignore_ascii_case(b"DO") {
        // `embed::is_do_block`, over the raw text: escapes may stand for the whitespace
        let rest = &t[2..];
        let after = rest.trim_ascii_start();
        return after.len() < rest.len()
            && (after.starts_with(b"$")
                || after.starts_with(b"'")
                || after.starts_with(b"\\")
                || after
                    .get(..8)
                    .is_some_and(|w| w.eq_ignore_ascii_case(b"LANGUAGE")));
    }
    SQL_STARTS
        .iter()
        .any(|k| k.len() == word_len && k.as_bytes().eq_ignore_ascii_case(word))
}

/// The character a `\\x..` or `\\u{..}` escape at the start of `t` stands for, and the escape's
/// length.
fn escaped(t: &[u8]) -> Option<(char, usize)> {
    let hex = |d: &[u8]| u32::from_str_radix(std::str::from_utf8(d).ok()?, 16).ok();
    match t {
        [b'\\', b'x', a, b, ..] => Some((char::from_u32(hex(&[*a, *b])?)?, 4)),
        [b'\\', b'u', b'{', rest @ ..] => {
            let close = rest.iter().take(7).position(|&b| b == b'}')?;
            let digits: Vec<u8> = rest[..close]
                .iter()
                .copied()
                .filter(|&b| b != b'_')
                .collect();
            Some((char::from_u32(hex(&digits)?)?, 4 + close))
        }
        _ => None,
    }
}

/// The first character of `t`, which starts at a character's boundary.
fn first_char(t: &[u8]) -> Option<char> {
    let n = t.len().min(4);
    let valid = match std::str::from_utf8(&t[..n]) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&t[..e.valid_up_to()]).ok()?,
    };
    valid.chars().next()
}
