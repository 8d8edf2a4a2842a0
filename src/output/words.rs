//! Where the lines of a finding's text may break, for miette's wrapping: the Unicode
//! line-breaking algorithm `textwrap` runs on every line of every finding, remembered per line.
//!
//! Most lines repeat from finding to finding (a rule's help, fix and `see` lines), and finding
//! the break opportunities (icu's segmenter) was a fifth of rendering thousands of findings.
//! The words of a line are the ones `textwrap::WordSeparator::UnicodeBreakProperties` gives;
//! only their boundaries are kept.
//!
//! Lines that differ only in their ASCII letters and digits share them: the Unicode line
//! breaking algorithm sees a character only through its line-break class, every ASCII letter
//! is of one class (alphabetic) and every ASCII digit of another (numeric), and textwrap's own
//! handling (its `-` rule, escape sequences ended by a letter) tells letters and digits apart
//! only as such. A line is remembered with each ASCII letter written `a` and each digit `0`
//! (`lock `lock:job:17` is taken` and `lock `lock:job:42` is taken` are one line), and the
//! boundaries are byte offsets, which that rewriting keeps.

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
    let shape = shape_of(line);
    let ends = ENDS.with(|memory| {
        if let Some(ends) = memory.borrow().get(shape.as_str()) {
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
        memory.insert(shape.into_boxed_str(), Rc::clone(&ends));
        ends
    });
    let mut start = 0;
    Box::new((0..ends.len()).map(move |i| {
        let word = Word::from(&line[start..ends[i]]);
        start = ends[i];
        word
    }))
}

/// `line` with each ASCII letter written `a` and each ASCII digit `0`: a line with the same
/// break opportunities, at the same byte offsets (see the module's documentation).
fn shape_of(line: &str) -> String {
    line.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' => 'a',
            '0'..='9' => '0',
            c => c,
        })
        .collect()
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
    fn lines_of_one_shape_have_textwrap_s_words_each() {
        // letters and digits at every place a break rule looks at: around hyphens, slashes,
        // quotes, brackets, numbers with separators, escape sequences
        let pieces = [
            "a", "Z", "q", "0", "7", "-", "/", ":", ".", ",", "(", ")", "[", "]", "{", "}", "`",
            "\"", "'", " ", "  ", "\t", "%", "$", "+", "#", "!", "?", ";", "_", "\u{1b}[3", "m",
            "—", "鎖", "\u{a0}",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3000 {
            let n = (next() % 24) as usize;
            let line: String = (0..n)
                .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                .collect();
            // the same line with other letters and digits: one shape, remembered once
            let other: String = line
                .chars()
                .map(|c| match c {
                    'a'..='y' | 'A'..='Y' => ((c as u8) + 1) as char,
                    '0'..='8' => ((c as u8) + 1) as char,
                    c => c,
                })
                .collect();
            assert_eq!(shape_of(&line), shape_of(&other));
            for l in [&line, &other] {
                let expected: Vec<Word> = WordSeparator::UnicodeBreakProperties
                    .find_words(l)
                    .collect();
                assert_eq!(
                    words(l).collect::<Vec<_>>(),
                    expected,
                    "{l:?} (from {line:?})"
                );
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
