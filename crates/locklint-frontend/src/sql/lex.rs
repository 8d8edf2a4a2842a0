//! A small SQL lexer: enough to split a text into statements (respecting quotes, dollar
//! quotes and comments), to find the bodies of PL/pgSQL functions, and to locate clauses and
//! calls by their keywords.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A keyword or identifier (quoted identifiers included).
    Word,
    /// A `'...'` string.
    Str,
    /// A `$tag$...$tag$` string; the body is `body.0..body.1`.
    Dollar {
        body: (usize, usize),
    },
    Number,
    /// A bind parameter: `$1`, `?`, `?2`, `:name`.
    Param,
    /// Any other single character (`(`, `)`, `,`, `;`, `=`, ...) or operator run.
    Punct,
}

/// One token: byte range in the lexed text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn text<'t>(&self, src: &'t str) -> &'t str {
        &src[self.start..self.end]
    }

    /// Whether this is the word `w` (case-insensitive; `w` in lower case).
    pub fn is_word(&self, src: &str, w: &str) -> bool {
        self.kind == TokenKind::Word && self.text(src).eq_ignore_ascii_case(w)
    }

    pub fn is_punct(&self, src: &str, p: &str) -> bool {
        self.kind == TokenKind::Punct && self.text(src) == p
    }
}

fn is_word_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// Tokenize `src`; offsets are relative to `src`. Never fails: an unterminated string or
/// comment runs to the end of the text.
pub fn tokens(src: &str) -> Vec<Token> {
    let mut out = Vec::new();
    lex(src, |t| out.push(t), |_, _| {});
    out
}

/// The comments of `src` (`-- ..` to the end of the line, `/* .. */` nested), as byte ranges.
pub fn comments(src: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    lex(src, |_| {}, |start, end| out.push((start, end)));
    out
}

/// Tokenize `src`, calling `on_token` with every token and `on_comment` with the range of
/// every comment skipped.
fn lex(src: &str, mut on_token: impl FnMut(Token), mut on_comment: impl FnMut(usize, usize)) {
    let b = src.as_bytes();
    let n = b.len();
    let mut i = 0;
    let char_at = |i: usize| src[i..].chars().next().unwrap_or('\0');
    while i < n {
        let c = char_at(i);
        let start = i;
        if c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        // comments
        if b[i] == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < n && b[i] != b'\n' {
                i += 1;
            }
            on_comment(start, i);
            continue;
        }
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0usize;
            while i < n {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            on_comment(start, i.min(n));
            continue;
        }
        // E'..' strings take backslash escapes
        let escape_string =
            (c == 'e' || c == 'E') && b.get(i + 1) == Some(&b'\'') && !prev_is_word(src, i);
        if b[i] == b'\'' || escape_string {
            if escape_string {
                i += 1;
            }
            i += 1;
            while i < n {
                if escape_string && b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if b[i] == b'\'' {
                    if b.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
            on_token(tok(TokenKind::Str, start, i.min(n)));
            i = i.min(n);
            continue;
        }
        if b[i] == b'"' || b[i] == b'`' {
            let q = b[i];
            i += 1;
            while i < n {
                if b[i] == q {
                    if b.get(i + 1) == Some(&q) {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
            on_token(tok(TokenKind::Word, start, i.min(n)));
            i = i.min(n);
            continue;
        }
        if b[i] == b'$' {
            // $1 parameter
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 {
                i += 1 + digits;
                on_token(tok(TokenKind::Param, start, i));
                continue;
            }
            // $tag$ ... $tag$
            let tag_len = src[i + 1..]
                .chars()
                .take_while(|&c| is_word_char(c) && c != '$')
                .map(char::len_utf8)
                .sum::<usize>();
            if b.get(i + 1 + tag_len) == Some(&b'$') {
                let tag = &src[i..i + tag_len + 2];
                let body_start = i + tag.len();
                let (body_end, end) = match src[body_start..].find(tag) {
                    Some(p) => (body_start + p, body_start + p + tag.len()),
                    None => (n, n),
                };
                on_token(tok(
                    TokenKind::Dollar {
                        body: (body_start, body_end),
                    },
                    start,
                    end,
                ));
                i = end;
                continue;
            }
            i += 1;
            on_token(tok(TokenKind::Punct, start, i));
            continue;
        }
        if b[i] == b'?' {
            i += 1;
            while i < n && b[i].is_ascii_digit() {
                i += 1;
            }
            on_token(tok(TokenKind::Param, start, i));
            continue;
        }
        if b[i] == b':' {
            if b.get(i + 1) == Some(&b':') {
                i += 2;
                on_token(tok(TokenKind::Punct, start, i));
                continue;
            }
            let next = src[i + 1..].chars().next().unwrap_or('\0');
            if is_word_start(next) {
                i += 1;
                while i < n && is_word_char(char_at(i)) {
                    i += char_at(i).len_utf8();
                }
                on_token(tok(TokenKind::Param, start, i));
                continue;
            }
            i += 1;
            on_token(tok(TokenKind::Punct, start, i));
            continue;
        }
        if is_word_start(c) {
            while i < n && is_word_char(char_at(i)) {
                i += char_at(i).len_utf8();
            }
            on_token(tok(TokenKind::Word, start, i));
            continue;
        }
        if c.is_ascii_digit() {
            while i < n && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            on_token(tok(TokenKind::Number, start, i));
            continue;
        }
        // two-character operators
        let two = src.get(i..i + 2).unwrap_or("");
        if matches!(two, "<=" | ">=" | "<>" | "!=" | "||") {
            i += 2;
        } else {
            i += c.len_utf8();
        }
        on_token(tok(TokenKind::Punct, start, i));
    }
}

fn prev_is_word(src: &str, i: usize) -> bool {
    src[..i].chars().next_back().is_some_and(is_word_char)
}

fn tok(kind: TokenKind, start: usize, end: usize) -> Token {
    Token { kind, start, end }
}

/// One statement of a text: byte range (from its first token to the end of its last token,
/// without the `;`) and its tokens.
#[derive(Debug, Clone)]
pub struct Piece {
    pub start: usize,
    pub end: usize,
    pub tokens: Vec<Token>,
}

/// Split a text into statements at top-level `;`. Comments between statements are dropped;
/// empty statements are skipped.
pub fn split(src: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    each_statement(src, |p| out.push(p));
    out
}

/// Call `f` with each statement of `src` in turn (as [`split`] finds them), as soon as it is
/// lexed: only one statement's tokens are held at a time.
pub fn each_statement(src: &str, mut f: impl FnMut(Piece)) {
    let mut cur: Vec<Token> = Vec::new();
    let mut flush = |cur: &mut Vec<Token>| {
        if let (Some(first), Some(last)) = (cur.first(), cur.last()) {
            let (start, end) = (first.start, last.end);
            f(Piece {
                start,
                end,
                tokens: std::mem::take(cur),
            });
        }
    };
    lex(
        src,
        |t| {
            if t.is_punct(src, ";") {
                flush(&mut cur);
            } else {
                cur.push(t);
            }
        },
        |_, _| {},
    );
    flush(&mut cur);
}

/// For each token, the index of the `)` that closes it when it is a `(` with a match; one pass
/// with a stack, so finding every call's closing parenthesis stays linear.
pub fn closing_parens(src: &str, toks: &[Token]) -> Vec<Option<usize>> {
    let mut out = vec![None; toks.len()];
    let mut open = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.is_punct(src, "(") {
            open.push(i);
        } else if t.is_punct(src, ")") {
            if let Some(o) = open.pop() {
                out[o] = Some(i);
            }
        }
    }
    out
}

/// Index of the token closing the parenthesis opened at `open`.
pub fn matching_paren(src: &str, toks: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, t) in toks.iter().enumerate().skip(open) {
        if t.is_punct(src, "(") {
            depth += 1;
        } else if t.is_punct(src, ")") {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// The parenthesis depth before each token.
pub fn depths(src: &str, toks: &[Token]) -> Vec<usize> {
    let mut d = 0usize;
    toks.iter()
        .map(|t| {
            if t.is_punct(src, ")") {
                d = d.saturating_sub(1);
            }
            let here = d;
            if t.is_punct(src, "(") {
                d += 1;
            }
            here
        })
        .collect()
}

/// The unquoted, lower-case form of a word token (`"Owner"` → `owner`).
pub fn ident(text: &str) -> String {
    let t = text.trim_matches(|c| c == '"' || c == '`');
    t.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<&str> {
        split(src).iter().map(|p| &src[p.start..p.end]).collect()
    }

    #[test]
    fn splits_at_top_level_semicolons() {
        assert_eq!(
            texts("SELECT 1; SELECT 2;\n\n-- trailing\n"),
            vec!["SELECT 1", "SELECT 2"]
        );
    }

    #[test]
    fn quotes_and_comments_hide_semicolons() {
        let src = "SELECT 'a;b', \"c;d\", `e;f` -- x;y\n FROM t /* ; /* nested ; */ ; */ WHERE a = E'\\';' ; UPDATE t SET a = 1";
        let t = texts(src);
        assert_eq!(t.len(), 2, "{t:?}");
        assert!(t[0].ends_with("E'\\';'"));
        assert_eq!(t[1], "UPDATE t SET a = 1");
        assert_eq!(texts("SELECT 'it''s; fine'; SELECT 2").len(), 2);
    }

    #[test]
    fn dollar_quotes_hide_semicolons() {
        let src = "CREATE FUNCTION f() RETURNS void AS $body$ BEGIN PERFORM 1; END; $body$ LANGUAGE plpgsql; SELECT $1, $$a;b$$";
        let p = split(src);
        assert_eq!(p.len(), 2);
        let dollar = p[0]
            .tokens
            .iter()
            .find_map(|t| match t.kind {
                TokenKind::Dollar { body } => Some(body),
                _ => None,
            })
            .unwrap();
        assert_eq!(&src[dollar.0..dollar.1], " BEGIN PERFORM 1; END; ");
        assert_eq!(p[1].tokens[1].kind, TokenKind::Param);
    }

    #[test]
    fn parameters_and_casts() {
        let src = "x = ?3 AND y = :name AND z = $2::bigint AND w = ?";
        let kinds: Vec<_> = tokens(src)
            .into_iter()
            .filter(|t| t.kind == TokenKind::Param)
            .map(|t| t.text(src).to_string())
            .collect();
        assert_eq!(kinds, vec!["?3", ":name", "$2", "?"]);
    }

    #[test]
    fn closing_parentheses_in_one_pass() {
        let src = "f(a, g(b), (c)) ) ( h(";
        let toks = tokens(src);
        let close = closing_parens(src, &toks);
        let text = |i: Option<usize>| i.map(|i| toks[i].start);
        assert_eq!(text(close[1]), Some(14));
        assert_eq!(text(close[5]), Some(8));
        assert_eq!(text(close[9]), Some(13));
        // a stray `)` closes nothing; unclosed `(` have no match
        assert_eq!(close.iter().flatten().count(), 3);
        for (i, t) in toks.iter().enumerate() {
            if t.is_punct(src, "(") && close[i].is_some() {
                assert_eq!(close[i], matching_paren(src, &toks, i));
            }
        }
    }

    #[test]
    fn unterminated_text_does_not_panic() {
        assert_eq!(split("SELECT 'abc").len(), 1);
        assert_eq!(split("SELECT $x$ abc").len(), 1);
        assert_eq!(split("SELECT /* abc").len(), 1);
        assert!(split("  -- only a comment").is_empty());
    }
}
