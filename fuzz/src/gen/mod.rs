//! Structure-aware generators: small random grammars for Rust-ish, SQL-ish, Lua-ish and
//! configuration text, biased towards what locklint looks at (locks, Redis calls, lock tables,
//! advisory locks, scripts) and towards the shapes that stress a parser (deep nesting, long
//! chains, odd literals).

pub mod config;
pub mod lua;
pub mod rust;
pub mod sql;

use crate::rng::{Draw, Rng};

/// Shared state of one generation: the output, the random source, and how deep and how long
/// the text may grow.
pub struct Gen<'r> {
    pub rng: &'r mut Rng,
    pub out: String,
    /// Deepest nesting of expressions and blocks.
    pub max_depth: usize,
    /// Stop adding statements past this length.
    pub max_len: usize,
}

impl<'r> Gen<'r> {
    /// Usually shallow; sometimes very deep (with few branches, so the text stays small).
    pub fn new(rng: &'r mut Rng, max_len: usize) -> Self {
        let max_depth = match rng.below(10) {
            0 => rng.range(50, 5000),
            1 | 2 => rng.range(6, 16),
            _ => rng.range(2, 5),
        };
        Gen {
            rng,
            out: String::new(),
            max_depth,
            max_len,
        }
    }

    pub fn full(&self) -> bool {
        self.out.len() >= self.max_len
    }

    pub fn push(&mut self, s: &str) {
        self.out.push_str(s);
    }

    pub fn pick(&mut self, items: &[&str]) {
        let s = *self.rng.pick(items);
        self.out.push_str(s);
    }

    /// Whether to go one level deeper at `depth`: always possible below the limit, rarer as
    /// the text grows.
    pub fn deeper(&mut self, depth: usize) -> bool {
        depth < self.max_depth && !self.full()
    }

    /// An identifier, sometimes one that means something to locklint.
    pub fn ident(&mut self) {
        const NAMES: &[&str] = &[
            "x",
            "key",
            "lock_key",
            "token",
            "owner",
            "ttl",
            "con",
            "conn",
            "pool",
            "tx",
            "id",
            "job",
            "acquired",
            "ok",
            "v",
            "value",
            "expires_at",
            "fence",
            "lease",
            "guard",
            "r#type",
            "_",
            "self_",
            "ключ",
            "é",
        ];
        self.pick(NAMES);
        if self.rng.one_in(6) {
            let n = self.rng.below(100);
            self.out.push_str(&n.to_string());
        }
    }

    /// A number literal of any shape.
    pub fn number(&mut self) {
        const NUMS: &[&str] = &[
            "0",
            "1",
            "30",
            "30000",
            "-1",
            "1.5",
            "1e9",
            "0x1F",
            "18446744073709551616",
            "1_000",
            "07",
            ".5",
            "1.",
            "9999999999999999999999999",
        ];
        self.pick(NUMS);
    }
}

/// Quote `s` as a Rust string literal, escaped or raw.
pub fn rust_literal(rng: &mut Rng, s: &str) -> String {
    if rng.one_in(2) {
        // one `#` more than the longest run of `#` after a `"` (none without a `"`), found in
        // one pass: trying each count with a search took time quadratic in the quotes
        let b = s.as_bytes();
        let hashes = b
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c == b'"')
            .map(|(i, _)| b[i + 1..].iter().take_while(|&&c| c == b'#').count() + 1)
            .max()
            .unwrap_or(0);
        let h = "#".repeat(hashes);
        format!("r{h}\"{s}\"{h}")
    } else {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' if rng.one_in(3) => out.push_str("\\n"),
                '\n' if rng.one_in(3) => out.push_str("\\\n    "),
                '\t' => out.push_str("\\t"),
                c if !c.is_ascii() && rng.one_in(2) => {
                    out.push_str(&format!("\\u{{{:x}}}", c as u32))
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_round_trip_through_syn() {
        let mut rng = Rng::with_seed(9);
        // a long run of quotes (found by the `embedded` target: making its raw literal took
        // seconds) and quotes followed by runs of `#`
        let quotes = "\"".repeat(50_000);
        for s in [
            "a\"b\\c\n",
            "r#\"x\"#",
            "é\t",
            "\"#",
            "x\"##y\"#\"###",
            quotes.as_str(),
        ] {
            for _ in 0..8 {
                let lit = rust_literal(&mut rng, s);
                let parsed: syn::LitStr =
                    syn::parse_str(&lit).unwrap_or_else(|e| panic!("{lit}: {e}"));
                assert_eq!(
                    parsed.value().replace("\n    ", "").replace('\n', ""),
                    s.replace('\n', ""),
                    "{lit}"
                );
            }
        }
    }
}
