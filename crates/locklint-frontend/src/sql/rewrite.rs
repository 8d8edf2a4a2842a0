//! Forms the parser does not know, rewritten into ones it does before a second attempt:
//! PostgreSQL's weaker row locks, PL/pgSQL's `RETURNING .. INTO` and MySQL's `DO expr`. Each
//! blanks words in place, so every offset of the statement stays. The words are read with the SQL lexer
//! (`lex`): a keyword inside a string literal, a quoted name or a comment is no word.

use super::lex::{self, TokenKind};

/// A word of SQL text: an unquoted name or keyword, lower case, at its byte offset. A `;`
/// outside literals and comments is the word `";"` (a statement's end).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    at: usize,
    text: String,
}

impl Word {
    fn end(&self) -> usize {
        self.at + self.text.len()
    }
}

/// The words of `sql`, in order. Text in an unterminated literal or comment holds none.
fn words(sql: &str) -> Vec<Word> {
    lex::tokens(sql)
        .into_iter()
        .filter_map(|t| {
            let text = t.text(sql);
            let word = match t.kind {
                TokenKind::Word if !text.starts_with('"') => text.to_ascii_lowercase(),
                TokenKind::Punct if text == ";" => ";".to_string(),
                _ => return None,
            };
            Some(Word {
                at: t.start,
                text: word,
            })
        })
        .collect()
}

fn blank(sql: &str, ranges: &[(usize, usize)]) -> Option<String> {
    if ranges.is_empty() {
        return None;
    }
    let mut out = sql.as_bytes().to_vec();
    for &(from, to) in ranges {
        out[from..to].fill(b' ');
    }
    String::from_utf8(out).ok()
}

/// The statement with a PL/pgSQL `RETURNING .. INTO target [, ..]` (`DELETE FROM jobs WHERE id
/// = job_id RETURNING * INTO v_row`), which the parser does not know, read without its `INTO`
/// part: from the `INTO` after `RETURNING` to the statement's end (the last clause of such a
/// statement) is blanked. `None` when there is none.
pub(super) fn returning_into(sql: &str) -> Option<String> {
    let words = words(sql);
    let returning = words.iter().position(|w| w.text == "returning")?;
    let into = returning
        + 1
        + words[returning + 1..]
            .iter()
            .position(|w| w.text == "into")?;
    let end = words[into..]
        .iter()
        .find(|w| w.text == ";")
        .map_or(sql.len(), |w| w.at);
    blank(sql, &[(words[into].at, end)])
}

/// The statement with PostgreSQL's weaker row locks (`FOR NO KEY UPDATE`, `FOR KEY SHARE`),
/// which the parser does not know, read as the locks it knows (`FOR UPDATE`, `FOR SHARE`):
/// the words in between are blanked. `None` when there is none.
pub(super) fn weaker_row_locks(sql: &str) -> Option<String> {
    let words = words(sql);
    let mut ranges = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w.text != "for" {
            continue;
        }
        let next: Vec<&str> = words[i + 1..]
            .iter()
            .take(3)
            .map(|w| w.text.as_str())
            .collect();
        match next.as_slice() {
            ["no", "key", "update", ..] => ranges.push((words[i + 1].at, words[i + 2].end())),
            ["key", "share", ..] => ranges.push((words[i + 1].at, words[i + 1].end())),
            _ => {}
        }
    }
    blank(sql, &ranges)
}

/// The expressions of a MySQL `DO expr [, expr]..` statement (`DO RELEASE_LOCK(?)`: an
/// expression evaluated for its effect, as `SELECT` would but without a result), which the
/// parser does not know: the text with the `DO` blanked, to be read as a list of expressions.
/// `None` for any other statement, PostgreSQL's `DO` blocks (`DO $$ .. $$`, `DO LANGUAGE ..`)
/// included.
pub(super) fn mysql_do(sql: &str) -> Option<String> {
    let tokens = lex::tokens(sql);
    let first = tokens.first()?;
    is_mysql_do(sql, &tokens)
        .then(|| blank(sql, &[(first.start, first.start + 2)]))
        .flatten()
}

/// Whether the statement of `tokens` (of `sql`) is MySQL's `DO expr`: `DO` followed by a name
/// or a number, not by a quoted body or `LANGUAGE` (PostgreSQL's anonymous code block).
pub(super) fn is_mysql_do(sql: &str, tokens: &[lex::Token]) -> bool {
    let (Some(first), Some(second)) = (tokens.first(), tokens.get(1)) else {
        return false;
    };
    first.kind == TokenKind::Word
        && first.text(sql).eq_ignore_ascii_case("do")
        && matches!(second.kind, TokenKind::Word | TokenKind::Number)
        && !second.text(sql).eq_ignore_ascii_case("language")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mysql_do_statement_is_its_expressions_and_a_postgres_do_block_is_not() {
        assert_eq!(
            mysql_do("DO RELEASE_LOCK(?)").as_deref(),
            Some("   RELEASE_LOCK(?)")
        );
        assert_eq!(
            mysql_do("  do release_lock('a'), 1").as_deref(),
            Some("     release_lock('a'), 1")
        );
        assert_eq!(mysql_do("DO $$ BEGIN PERFORM 1; END $$"), None);
        assert_eq!(mysql_do("DO 'BEGIN NULL; END'"), None);
        assert_eq!(mysql_do("DO LANGUAGE plpgsql $$ BEGIN END $$"), None);
        assert_eq!(mysql_do("SELECT RELEASE_LOCK(?)"), None);
        assert_eq!(mysql_do("DOMAIN x"), None);
    }

    #[test]
    fn weaker_row_locks_are_blanked_in_place_outside_literals_and_comments() {
        let sql = "SELECT id FROM jobs FOR NO KEY UPDATE SKIP LOCKED";
        let out = weaker_row_locks(sql).expect("rewritten");
        assert_eq!(out, "SELECT id FROM jobs FOR        UPDATE SKIP LOCKED");
        let sql = "SELECT id FROM jobs WHERE id = $1 FOR KEY SHARE";
        assert_eq!(
            weaker_row_locks(sql).as_deref(),
            Some("SELECT id FROM jobs WHERE id = $1 FOR     SHARE")
        );
        // in a literal, in a line comment, in a block comment: not the lock clause
        let literal = "UPDATE jobs SET note = 'for no key update' WHERE id = $1";
        assert_eq!(weaker_row_locks(literal), None);
        let comment = "SELECT id FROM jobs -- for key share\nWHERE id = $1";
        assert_eq!(weaker_row_locks(comment), None);
        let block = "SELECT id /* for no key update */ FROM jobs FOR KEY SHARE";
        assert_eq!(
            weaker_row_locks(block).as_deref(),
            Some("SELECT id /* for no key update */ FROM jobs FOR     SHARE")
        );
        // offsets stay exact after multibyte text, and a long line is read in one pass
        let sql = "SELECT 'é—ü for key share' AS x FROM jobs\n  WHERE n = 'ß' FOR NO KEY UPDATE";
        let out = weaker_row_locks(sql).expect("rewritten");
        assert_eq!(out.len(), sql.len());
        assert!(out.starts_with("SELECT 'é—ü for key share'"), "{out}");
        assert!(out.ends_with("FOR        UPDATE"), "{out}");
        let long = format!(
            "SELECT '{}' {}1 FOR NO KEY UPDATE",
            "for key share ".repeat(1_000),
            "a + ".repeat(100_000)
        );
        let out = weaker_row_locks(&long).expect("rewritten");
        assert!(out.contains("for key share for key share"));
        assert!(out.ends_with("FOR        UPDATE"));
    }

    #[test]
    fn returning_into_is_blanked_to_the_statement_end_outside_literals_and_comments() {
        let sql = "DELETE FROM jobs WHERE id = v_id RETURNING * INTO v_row";
        let kept = "DELETE FROM jobs WHERE id = v_id RETURNING * ";
        let blanked = format!("{kept}{}", " ".repeat(sql.len() - kept.len()));
        assert_eq!(returning_into(sql), Some(blanked));
        let sql = "DELETE FROM jobs WHERE id = v_id RETURNING lane INTO v_lane; SELECT 1";
        let blanked = format!(
            "DELETE FROM jobs WHERE id = v_id RETURNING lane {}; SELECT 1",
            " ".repeat("INTO v_lane".len())
        );
        assert_eq!(returning_into(sql), Some(blanked));
        // `returning` only in a literal: the `INTO` of a `SELECT .. INTO` stays
        let literal = "SELECT 'returning' INTO v_note FROM notes WHERE id = 1";
        assert_eq!(returning_into(literal), None);
        // `into` only in a comment after `RETURNING`
        let comment = "UPDATE jobs SET state = 'done' WHERE id = $1 RETURNING id -- into v_id\n";
        assert_eq!(returning_into(comment), None);
        // a `;` inside a literal after `INTO` is not the statement's end
        let semi = "UPDATE t SET a = 1 RETURNING a INTO v; SELECT ';'";
        assert_eq!(
            returning_into(semi).as_deref(),
            Some("UPDATE t SET a = 1 RETURNING a       ; SELECT ';'")
        );
    }

    #[test]
    fn an_unterminated_literal_rewrites_nothing() {
        assert_eq!(weaker_row_locks("SELECT 'x FOR NO KEY UPDATE"), None);
        assert_eq!(
            returning_into("UPDATE t SET a = 'x RETURNING a INTO v"),
            None
        );
    }
}
