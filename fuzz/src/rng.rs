//! A small deterministic random number generator (SplitMix64): every input of a run follows
//! from the run's seed and the input's index, so any input can be generated again.

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The generator for input `index` of a run seeded with `seed`.
    pub fn for_input(seed: u64, index: u64) -> Self {
        let mut r = Rng(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A length skewed towards small values, sometimes large: `1..=max`.
    pub fn len(&mut self, max: usize) -> usize {
        let max = max.max(1);
        match self.below(8) {
            0..=4 => self.range(1, max.min(8)),
            5 | 6 => self.range(1, max.min(256)),
            _ => self.range(1, max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::for_input(7, 3).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::for_input(7, 3).next_u64(),
            Rng::for_input(7, 4).next_u64()
        );
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            assert!(r.below(5) < 5);
            let x = r.range(3, 9);
            assert!((3..=9).contains(&x));
            assert!((1..=100).contains(&r.len(100)));
        }
        assert_eq!(r.below(0), 0);
    }
}
