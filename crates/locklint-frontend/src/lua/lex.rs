//! A small Lua scanner (strings, long brackets and comments skipped) for what has to be known
//! before parsing: how deep the script nests, whether it holds a character the parser cannot
//! take, and where its top-level statements start, so a long script is parsed piece by piece.

use std::ops::ControlFlow;

/// What the scanner reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tok {
    /// A name or keyword: byte range.
    Word(usize, usize),
    /// `(`, `{`, `[` (not a long bracket).
    Open(usize),
    /// `)`, `}`, `]`.
    Close(usize),
    /// A string, long string or number ends here (the end of a value).
    Value(usize),
    /// A character Lua 5.1 has no token for outside strings and comments: `` ` ``, `\`, `$`,
    /// `@`, `!`, `?`.
    Stray(usize),
    /// Any other punctuation.
    Punct(usize),
    /// A comment (`-- ..` to the end of the line, or a long `--[[ .. ]]`): byte range.
    Comment(usize, usize),
}

/// Call `f` with every significant token of `text`, until it breaks.
pub fn scan<B>(text: &str, mut f: impl FnMut(Tok) -> ControlFlow<B>) -> Option<B> {
    let b = text.as_bytes();
    let mut i = 0;
    macro_rules! emit {
        ($t:expr) => {
            if let ControlFlow::Break(x) = f($t) {
                return Some(x);
            }
        };
    }
    while i < b.len() {
        let c = b[i];
        match c {
            b'-' if b.get(i + 1) == Some(&b'-') => {
                let start = i;
                i = match long_bracket(b, i + 2) {
                    Some(level) => skip_long(b, i + 2, level),
                    None => b[i..]
                        .iter()
                        .position(|&x| x == b'\n')
                        .map_or(b.len(), |p| i + p),
                };
                emit!(Tok::Comment(start, i));
                continue;
            }
            b'"' | b'\'' => {
                i += 1;
                while i < b.len() && b[i] != c && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                emit!(Tok::Value(i));
                continue;
            }
            b'[' => {
                if let Some(level) = long_bracket(b, i) {
                    i = skip_long(b, i, level);
                    emit!(Tok::Value(i));
                    continue;
                }
                emit!(Tok::Open(i));
            }
            b'(' | b'{' => emit!(Tok::Open(i)),
            b')' | b'}' | b']' => emit!(Tok::Close(i)),
            b'`' | b'\\' | b'$' | b'@' | b'!' | b'?' => emit!(Tok::Stray(i)),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                emit!(Tok::Word(start, i));
                continue;
            }
            c if c.is_ascii_digit() => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
                emit!(Tok::Value(i));
                continue;
            }
            c if c.is_ascii_whitespace() => {}
            _ => emit!(Tok::Punct(i)),
        }
        i += 1;
    }
    None
}

/// `[[` or `[==[` at `at`: the number of `=`.
fn long_bracket(b: &[u8], at: usize) -> Option<usize> {
    if b.get(at) != Some(&b'[') {
        return None;
    }
    let eq = b[at + 1..].iter().take_while(|&&x| x == b'=').count();
    (b.get(at + 1 + eq) == Some(&b'[')).then_some(eq)
}

/// The offset just past the long string or comment opened at `at` with `level` `=`.
fn skip_long(b: &[u8], at: usize, level: usize) -> usize {
    let from = at + level + 2;
    let mut i = from;
    while let Some(p) = b.get(i..).and_then(|r| r.iter().position(|&x| x == b']')) {
        let close = i + p;
        let eq = b[close + 1..].iter().take_while(|&&x| x == b'=').count();
        if eq == level && b.get(close + 1 + eq) == Some(&b']') {
            return close + eq + 2;
        }
        i = close + 1;
    }
    b.len()
}

/// How a token changes the nesting of brackets and blocks.
fn nesting(text: &str, t: Tok) -> i8 {
    match t {
        Tok::Open(_) => 1,
        Tok::Close(_) => -1,
        Tok::Word(s, e) => match &text[s..e] {
            "if" | "do" | "function" | "repeat" => 1,
            "end" | "until" => -1,
            _ => 0,
        },
        _ => 0,
    }
}

/// The offset of the first bracket or block (`if`, `do`, `function`, `repeat`) nested deeper
/// than `max`.
pub fn too_deep(text: &str, max: usize) -> Option<usize> {
    let mut depth = 0usize;
    scan(text, |t| {
        match nesting(text, t) {
            1 => {
                depth += 1;
                if depth > max {
                    let at = match t {
                        Tok::Word(s, _) | Tok::Open(s) => s,
                        _ => 0,
                    };
                    return ControlFlow::Break(at);
                }
            }
            -1 => depth = depth.saturating_sub(1),
            _ => {}
        }
        ControlFlow::Continue(())
    })
}

/// Keywords that join or negate operands: a name after a value is not one of them.
const OPERATOR_WORDS: &[&str] = &["and", "or", "not"];

/// Keywords after which a name is not a new statement.
const NOT_VALUE_ENDS: &[&str] = &[
    "and", "or", "not", "return", "local", "function", "in", "do", "then", "else", "elseif", "if",
    "while", "until", "repeat", "for",
];

/// Whether a token ends a value, so that a name after it starts a new statement
/// (`x = a b = c`: two operands are never adjacent within one expression).
fn ends_value(text: &str, t: Tok) -> bool {
    match t {
        Tok::Word(s, e) => !NOT_VALUE_ENDS.contains(&&text[s..e]),
        Tok::Close(_) | Tok::Value(_) => true,
        _ => false,
    }
}

/// Whether `.` at `i` is the field access `a.b` (not `..` or `...`).
fn is_field_dot(b: &[u8], i: usize) -> bool {
    b[i] == b'.' && b.get(i + 1) != Some(&b'.') && (i == 0 || b[i - 1] != b'.')
}

/// The offset of the operator that makes one expression a chain of more than `max` operators
/// (`a ~= b ~= c ..`, `x .. y .. z ..`, `not not ..`) or calls and indexes of a value
/// (`f'a''b'..`, `f()()..`, `t[1][2]..`): the parser nests such a chain one level per link,
/// however flat the text looks. Counted per bracket level; `,` and `;`, the
/// keywords that start or end a statement or block, and a name after a value begin a new
/// expression. Field access (`a.b`) is no operator.
pub fn long_chain(text: &str, max: usize) -> Option<usize> {
    let b = text.as_bytes();
    // operators of the current expression, one count per open bracket
    let mut chains: Vec<usize> = vec![0];
    // the end of the previous operator byte, so `~=`, `..`, `<=` count once
    let mut run_end: Option<usize> = None;
    // the previous token (comments aside) ended a value
    let mut after_value = false;
    // calls and indexes of the current value, one count per open bracket
    let mut suffixes: Vec<usize> = vec![0];
    let count = |chains: &mut Vec<usize>, at: usize| {
        let top = chains.last_mut().expect("the outermost level stays");
        *top += 1;
        (*top > max).then_some(at)
    };
    let link = |suffixes: &mut Vec<usize>, at: usize| {
        let top = suffixes.last_mut().expect("the outermost level stays");
        *top += 1;
        (*top > max).then_some(at)
    };
    scan(text, |t| {
        if matches!(t, Tok::Comment(..)) {
            return ControlFlow::Continue(());
        }
        let was_after_value = std::mem::replace(&mut after_value, ends_value(text, t));
        // what continues a value's links: a call or index right after it, a closing bracket,
        // a field or method name (`a.b`, `a:b`); anything else starts another value
        let continues = match t {
            Tok::Open(_) | Tok::Value(_) => was_after_value,
            Tok::Close(_) => true,
            Tok::Word(..) => !was_after_value,
            Tok::Punct(i) => is_field_dot(b, i) || b[i] == b':',
            _ => false,
        };
        if !continues {
            *suffixes.last_mut().expect("the outermost level stays") = 0;
        }
        match t {
            Tok::Punct(i) if is_field_dot(b, i) => {}
            Tok::Punct(i) => match b[i] {
                b',' | b';' => *chains.last_mut().expect("outermost") = 0,
                b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'#' | b'<' | b'>' | b'=' | b'~'
                | b'.' | b'&' | b'|' => {
                    let new_operator = run_end != Some(i);
                    run_end = Some(i + 1);
                    if new_operator {
                        if let Some(at) = count(&mut chains, i) {
                            return ControlFlow::Break(at);
                        }
                    }
                    return ControlFlow::Continue(());
                }
                _ => {}
            },
            // a call or index right after a value (`f(..)`, `f{..}`, `t[..]`) nests that value
            // one level deeper; the links of one value count together
            Tok::Open(i) => {
                if was_after_value {
                    if let Some(at) = link(&mut suffixes, i) {
                        return ControlFlow::Break(at);
                    }
                }
                chains.push(0);
                suffixes.push(0);
            }
            // a string right after a value is a call (`f'x'`, `f"x"`, `f[[x]]`)
            Tok::Value(end) if was_after_value => {
                if let Some(at) = link(&mut suffixes, end.saturating_sub(1)) {
                    return ControlFlow::Break(at);
                }
                return ControlFlow::Continue(());
            }
            Tok::Close(_) if chains.len() > 1 => {
                chains.pop();
                suffixes.pop();
            }
            Tok::Word(s, e) => match &text[s..e] {
                "and" | "or" | "not" => {
                    if let Some(at) = count(&mut chains, s) {
                        return ControlFlow::Break(at);
                    }
                }
                "local" | "return" | "if" | "then" | "else" | "elseif" | "end" | "do" | "while"
                | "for" | "repeat" | "until" | "function" | "in" | "break" | "goto" => {
                    *chains.last_mut().expect("outermost") = 0
                }
                // a name right after a value: a new statement
                _ if was_after_value => *chains.last_mut().expect("outermost") = 0,
                _ => {}
            },
            _ => {}
        }
        run_end = None;
        ControlFlow::Continue(())
    })
}

/// The offset of the first character outside strings and comments that Lua 5.1 has no token
/// for (see [`Tok::Stray`]): the script cannot parse, and the parser need not be run. A first
/// line starting with `#` (`#!lua name=locks` of a Redis Functions library) is skipped, as
/// Lua skips it.
pub fn stray_character(text: &str) -> Option<usize> {
    let skip = if text.starts_with('#') {
        text.find('\n').unwrap_or(text.len())
    } else {
        0
    };
    scan(&text[skip..], |t| match t {
        Tok::Stray(at) => ControlFlow::Break(skip + at),
        _ => ControlFlow::Continue(()),
    })
}

/// Split a script into pieces of whole top-level statements, each at least `size` bytes
/// (but the last): a new piece starts at a top-level `local`, `if`, `for`, `while`, `repeat`,
/// `return`, a `function` statement, or a name after a value or `;` (a call or an
/// assignment: `redis.call(..)` after `redis.call(..)`). Texts without such places stay whole.
/// `Err(offset)`: the top-level statement starting at `offset` is longer than `max_statement`
/// bytes.
pub fn pieces(text: &str, size: usize, max_statement: usize) -> Result<Vec<(usize, usize)>, usize> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0usize;
    // where the current top-level statement starts
    let mut statement = 0usize;
    let mut depth = 0usize;
    // whether the previous token (comments aside) ends a value or a statement
    let mut after_value = false;
    // between a top-level `while` or `for` and its `do`
    let mut loop_head = false;
    let too_long = scan(text, |t| {
        if matches!(t, Tok::Comment(..)) {
            return ControlFlow::Continue(());
        }
        if let Tok::Word(s, e) = t {
            let w = &text[s..e];
            let starts_statement = match w {
                "local" | "if" | "for" | "while" | "repeat" | "return" => true,
                "do" => !loop_head,
                "function" => after_value,
                w if NOT_VALUE_ENDS.contains(&w) || OPERATOR_WORDS.contains(&w) => false,
                "end" | "break" => false,
                // `function` and names: a statement when they follow a value
                _ => after_value,
            };
            if depth == 0 {
                match w {
                    "while" | "for" => loop_head = true,
                    "do" => loop_head = false,
                    _ => {}
                }
            }
            if depth == 0 && starts_statement {
                if s - statement > max_statement {
                    return ControlFlow::Break(statement);
                }
                statement = s;
                if s - start >= size {
                    out.push((start, s));
                    start = s;
                }
            }
        }
        match nesting(text, t) {
            1 => depth += 1,
            -1 => depth = depth.saturating_sub(1),
            _ => {}
        }
        after_value = ends_value(text, t) || matches!(t, Tok::Punct(i) if b[i] == b';');
        ControlFlow::Continue(())
    });
    if let Some(at) = too_long {
        return Err(at);
    }
    if text.len() - statement > max_statement {
        return Err(statement);
    }
    out.push((start, text.len()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_found() {
        let deep = format!("return {}1{}", "(".repeat(300), ")".repeat(300));
        assert_eq!(too_deep(&deep, 256), Some(7 + 256));
        assert_eq!(too_deep("return redis.call('del', KEYS[1])", 256), None);
        let blocks = format!("{}return 1{}", "do ".repeat(300), " end".repeat(300));
        assert_eq!(too_deep(&blocks, 256), Some(3 * 256));
        // words and brackets in strings and comments do not count
        let quiet = format!(
            "-- {}\n--[==[ {} ]==]\nlocal s = '{}' .. [[{}]]\nreturn s",
            "if ".repeat(300),
            "(".repeat(300),
            "do \\' ".repeat(300),
            "function ".repeat(300)
        );
        assert_eq!(too_deep(&quiet, 256), None);
        let sane = "if a then\n  for i = 1, 3 do\n    local f = function() return {x = (1)} end\n  end\nelseif b then\n  repeat x() until y\nend";
        assert_eq!(too_deep(sane, 256), None);
        let lopsided = format!("{}\n{}", "if a then x() end\n".repeat(1000), "(".repeat(10));
        assert_eq!(too_deep(&lopsided, 256), None);
    }

    #[test]
    fn long_chains_of_calls_and_indexes_are_found() {
        let strings = format!("return redis.call('get'{})", "'t'".repeat(1001));
        assert!(long_chain(&strings, 1000).is_some());
        let calls = format!("return f{}", "()".repeat(1001));
        assert!(long_chain(&calls, 1000).is_some());
        let indexes = format!("return t{}", "[1]".repeat(1001));
        assert!(long_chain(&indexes, 1000).is_some());
        // calls on separate statements, and a call with many arguments, are no chain
        let statements = "redis.call('get', KEYS[1])\n".repeat(2000);
        assert_eq!(long_chain(&statements, 1000), None);
        let arguments = format!(
            "return redis.call('del', KEYS[1], {{{}}})",
            "1, ".repeat(5000)
        );
        assert_eq!(long_chain(&arguments, 1000), None);
    }

    #[test]
    fn long_operator_chains_are_found() {
        let chain = |op: &str, n: usize| format!("return a{}", format!(" {op} a").repeat(n));
        assert_eq!(long_chain(&chain("~=", 100), 1000), None);
        assert!(long_chain(&chain("~=", 1001), 1000).is_some());
        assert!(long_chain(&chain("..", 1001), 1000).is_some());
        assert!(long_chain(&chain("and", 1001), 1000).is_some());
        // parenthesised operands do not break the chain; separate expressions do
        let parens = format!("return (a){}", " ~= (a)".repeat(1001));
        assert!(long_chain(&parens, 1000).is_some());
        let statements = "local x = a .. b .. c\n".repeat(2000);
        assert_eq!(long_chain(&statements, 1000), None);
        let list = format!("return {{{}}}", "a + 1, ".repeat(2000));
        assert_eq!(long_chain(&list, 1000), None);
        // field access is no operator; a name after a value starts a new statement
        let calls = "redis.call('get', KEYS[1]) + 1\n".repeat(2000);
        assert_eq!(long_chain(&calls, 1000), None);
        let fields = format!("return a{}", ".b".repeat(2000));
        assert_eq!(long_chain(&fields, 1000), None);
        // operators in strings and comments do not count
        let quiet = format!("-- {}\nreturn '{}'", "~= ".repeat(2000), ".. ".repeat(2000));
        assert_eq!(long_chain(&quiet, 1000), None);
    }

    #[test]
    fn stray_characters_outside_strings_and_comments() {
        assert_eq!(stray_character("return `x`"), Some(7));
        assert_eq!(
            stray_character("local s = '`' .. \"`\" .. [[`]] -- `\n--[[ ` ]]"),
            None
        );
        assert_eq!(stray_character("local s = [==[ ]] ` ]==] .. `"), Some(28));
        // a backslash, `$`, `@`, `!`, `?` outside strings; escapes and `~=`, `#`, `%` are Lua
        assert_eq!(stray_character("local v = 1 \\u{e9}"), Some(12));
        for (script, at) in [
            ("x = $y", 4),
            ("@a()", 0),
            ("if !x then end", 3),
            ("x = a ? 1", 6),
        ] {
            assert_eq!(stray_character(script), Some(at), "{script}");
        }
        assert_eq!(
            stray_character("local s = 'a\\'b\\n$@!?' .. \"\\\"\" if #s ~= 2 % 3 then end"),
            None
        );
        // a first line starting with `#` is not Lua
        assert_eq!(stray_character("#!lua name=locks\nlocal a = 1"), None);
        assert_eq!(stray_character("#!lua name=locks\nlocal a = !1"), Some(27));
    }

    #[test]
    fn pieces_start_at_top_level_statements() {
        let script = "local a = 1\nif a then local b = 2 end\nfunction f() local c = 3 end\nx = function() return 1 end\nlocal d = f()\nreturn d";
        let p = pieces(script, 1, usize::MAX).unwrap();
        let starts: Vec<&str> = p.iter().map(|&(s, e)| script[s..e].trim()).collect();
        assert_eq!(
            starts,
            [
                "local a = 1",
                "if a then local b = 2 end",
                "function f() local c = 3 end",
                "x = function() return 1 end",
                "local d = f()",
                "return d"
            ]
        );
        // the pieces cover the text exactly
        assert_eq!(p.first().unwrap().0, 0);
        assert_eq!(p.last().unwrap().1, script.len());
        assert!(p.windows(2).all(|w| w[0].1 == w[1].0));
        // calls and assignments after a value or `;` start statements; `.`, `:`, an operator,
        // a string or table argument and an open bracket continue one
        let calls = "redis.call('get', KEYS[1]) -- x\nredis.call('del', KEYS[1]); n = a\n.b\n:c 'x' {1} + d\n(f)()";
        let p = pieces(calls, 1, usize::MAX).unwrap();
        let starts: Vec<&str> = p.iter().map(|&(s, e)| calls[s..e].trim()).collect();
        assert_eq!(
            starts,
            [
                "redis.call('get', KEYS[1]) -- x",
                "redis.call('del', KEYS[1]);",
                "n = a\n.b\n:c 'x' {1} + d\n(f)()"
            ]
        );
        // a top-level statement longer than the limit is found at its start
        let long = format!(
            "x = 1\nwhile x do x = 2 end\ndo\n{}end\ny = 2\n",
            "  f()\n".repeat(100)
        );
        assert_eq!(pieces(&long, 1, 400), Err(27));
        assert!(pieces(&long, 1, 1000).is_ok());
        let tail = format!("x = 1\nreturn {}", "1 + ".repeat(200));
        assert_eq!(pieces(&tail, 1, 400), Err(6));
        // a long string or comment holding keywords is not split
        let s = "local s = [[\nlocal x\n]] -- local y\nlocal z = 1";
        assert_eq!(pieces(s, 1, usize::MAX).unwrap().len(), 2);
        assert_eq!(
            pieces(script, 1000, usize::MAX).unwrap(),
            vec![(0, script.len())]
        );
    }
}
