//! Mutations of corpus inputs: byte flips, splices of regions from other inputs, duplication of
//! a region (deep nesting, long chains, long inputs) and runs of delimiters or keywords.

use crate::rng::{Draw, Rng};

/// Apply one to four mutations to `input`, keeping it within `max_len` bytes.
pub fn mutate(
    rng: &mut Rng,
    input: &[u8],
    others: &[Vec<u8>],
    dictionary: &[&str],
    max_len: usize,
) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.range(1, 4) {
        match rng.below(10) {
            0 => flip_bit(rng, &mut out),
            1 => set_byte(rng, &mut out),
            2 => delete_region(rng, &mut out),
            3 | 4 => splice(rng, &mut out, others),
            5 | 6 => duplicate_region(rng, &mut out, max_len),
            _ => insert_run(rng, &mut out, dictionary, max_len),
        }
        out.truncate(max_len);
    }
    out
}

fn flip_bit(rng: &mut Rng, out: &mut [u8]) {
    if out.is_empty() {
        return;
    }
    let i = rng.below(out.len());
    out[i] ^= 1 << rng.below(8);
}

fn set_byte(rng: &mut Rng, out: &mut Vec<u8>) {
    const INTERESTING: &[u8] = b"\0\n\r\t \"'`\\$#;:,.()[]{}<>-=!?|&*/%@~^_0aZ\x7f\xc3\xa9\xff";
    let b = *rng.pick(INTERESTING);
    let i = rng.below(out.len() + 1);
    if rng.one_in(2) && i < out.len() {
        out[i] = b;
    } else {
        out.insert(i, b);
    }
}

/// A random region `start..end` of `len` bytes, at most `max` long.
fn region(rng: &mut Rng, len: usize, max: usize) -> (usize, usize) {
    let start = rng.below(len + 1);
    let end = (start + rng.size(max)).min(len);
    (start, end)
}

fn delete_region(rng: &mut Rng, out: &mut Vec<u8>) {
    let (s, e) = region(rng, out.len(), 64);
    out.drain(s..e);
}

/// Replace or insert a region of another input (tokens and statements move between files).
fn splice(rng: &mut Rng, out: &mut Vec<u8>, others: &[Vec<u8>]) {
    if others.is_empty() {
        return;
    }
    let other = rng.pick(others);
    let (s, e) = region(rng, other.len(), 512);
    let piece = &other[s..e];
    let at = rng.below(out.len() + 1);
    if rng.one_in(2) {
        let end = (at + piece.len()).min(out.len());
        out.splice(at..end, piece.iter().copied());
    } else {
        out.splice(at..at, piece.iter().copied());
    }
}

/// Repeat a region many times in place: nesting when it opens something, long chains and
/// long inputs otherwise.
fn duplicate_region(rng: &mut Rng, out: &mut Vec<u8>, max_len: usize) {
    let (s, e) = region(rng, out.len(), 48);
    if e == s {
        return;
    }
    let piece = out[s..e].to_vec();
    let room = max_len.saturating_sub(out.len()) / piece.len();
    let times = rng.size(room.min(200_000));
    let copies: Vec<u8> = piece
        .iter()
        .copied()
        .cycle()
        .take(piece.len() * times)
        .collect();
    out.splice(e..e, copies);
}

/// Insert a run of one dictionary entry (`(`, `|x| `, `do `, `$$`, a keyword ...).
fn insert_run(rng: &mut Rng, out: &mut Vec<u8>, dictionary: &[&str], max_len: usize) {
    if dictionary.is_empty() {
        return;
    }
    let word = rng.pick(dictionary).as_bytes();
    let room = max_len.saturating_sub(out.len()) / word.len().max(1);
    let times = rng.size(room.min(100_000));
    let at = rng.below(out.len() + 1);
    let run: Vec<u8> = word
        .iter()
        .copied()
        .cycle()
        .take(word.len() * times)
        .collect();
    out.splice(at..at, run);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_within_the_limit_and_change_the_input() {
        let others = vec![b"fn main() { let x = (1 + 2); }".to_vec()];
        let mut rng = Rng::with_seed(42);
        let mut changed = 0;
        for _ in 0..2000 {
            let input = b"SELECT pg_advisory_lock(1);";
            let m = mutate(&mut rng, input, &others, &["(", "do "], 4096);
            assert!(m.len() <= 4096);
            if m != input {
                changed += 1;
            }
        }
        assert!(changed > 1800, "{changed}");
    }

    #[test]
    fn duplication_builds_long_inputs() {
        let mut rng = Rng::with_seed(3);
        let longest = (0..500)
            .map(|_| {
                let mut v = b"((a))".to_vec();
                duplicate_region(&mut rng, &mut v, 100_000);
                v.len()
            })
            .max()
            .unwrap();
        assert!(longest > 10_000, "{longest}");
    }
}
