//! Where the lines of a finding's text may break, for miette's wrapping: the Unicode
//! line-breaking algorithm `textwrap` runs on every line of every finding, remembered per line.
//!
//! Most lines repeat from finding to finding (a rule's help, fix and `see` lines), and finding
//! the break opportunities (icu's segmenter) was a fifth of rendering thousands of findings.
//! The words of a line are the ones `textwrap::WordSeparator::UnicodeBreakProperties` gives;
//! only their boundaries are kept.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use textwrap::core::Word;
use textwrap::WordSeparator;

/// Lines remembered per thread before the memory starts again.
const REMEMBERED: usize = 4096;

/// The separator miette is given: the Unicode break opportunities, remembered per line.
pub fn separator() -> WordSeparator {
    WordSeparator::Custom(words)
}

/// The words of `line`, as `WordSeparator::UnicodeBreakProperties` finds them.
fn words(line: &str) -> Box<dyn Iterator<Item = Word<'_>> + '_> {
    thread_local! {
        static ENDS: RefCell<HashMap<Box<str>, Rc<[usize]>>> = RefCell::new(HashMap::new());
    }
    let ends = ENDS.with(|memory| {
        if let Some(ends) = memory.borrow().get(line) {
            return Rc::clone(ends);
        }
        let ends: Rc<[usize]> = WordSeparator::UnicodeBreakProperties
            .find_words(line)
            .map(|w| end_in(line, &w))
            .collect();
        let mut memory = memory.borrow_mut();
        if memory.len() >= REMEMBERED {
            memory.clear();
        }
        memory.insert(line.into(), Rc::clone(&ends));
        ends
    });
    let mut start = 0;
    Box::new((0..ends.len()).map(move |i| {
        let word = Word::from(&line[start..ends[i]]);
        start = ends[i];
        word
    }))
}

/// Where a word of `line` (with its whitespace) ends in it.
fn end_in(line: &str, word: &Word<'_>) -> usize {
    word.whitespace.as_ptr() as usize + word.whitespace.len() - line.as_ptr() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_are_textwrap_s_first_and_remembered() {
        let lines = [
            "set the expiry in the same command: `SET lock:job:0 <unique token> NX PX <ttl>` (redis-rs",
            "  help: store a unique token per holder (for example `uuid::Uuid::new_v4().to_string()`)",
            "a-b c/d e—f „g“ 鎖 ロック key\u{a0}value  trailing  ",
            "\u{1b}[31mred\u{1b}[0m and plain, with-hyphens and a\ttab",
            "",
            "   ",
        ];
        for _ in 0..2 {
            for line in lines {
                let expected: Vec<Word> = WordSeparator::UnicodeBreakProperties
                    .find_words(line)
                    .collect();
                assert!(!expected.is_empty() || line.is_empty(), "{line:?}");
                assert_eq!(words(line).collect::<Vec<_>>(), expected, "{line:?}");
            }
        }
    }

    #[test]
    fn wrapping_with_the_separator_is_textwrap_s() {
        let text = "lock `lock:job:0` is taken with the constant value `\"1\"`; every holder writes the same value, so a holder cannot tell its own lock from another's";
        for width in [20, 40, 80] {
            let unicode =
                textwrap::Options::new(width).word_separator(WordSeparator::UnicodeBreakProperties);
            let remembered = textwrap::Options::new(width).word_separator(separator());
            assert_eq!(
                textwrap::wrap(text, remembered),
                textwrap::wrap(text, unicode)
            );
        }
    }
}
