//! Randomness for the harness: `fastrand`'s seeded generator. Every input of a run follows from
//! the run's seed and the input's index ([`for_input`]), so any input can be generated again.
//! [`Draw`] adds the few draws the generators and mutations share.

pub use fastrand::Rng;

/// The generator for input `index` of a run seeded with `seed`: seeded from the pair alone.
pub fn for_input(seed: u64, index: u64) -> Rng {
    // both numbers go through the generator before they are combined, so neighbouring seeds
    // and indices get unrelated streams
    Rng::with_seed(Rng::with_seed(seed).u64(..) ^ Rng::with_seed(!index).u64(..))
}

/// Draws built on the generator.
pub trait Draw {
    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize;
    /// A number in `lo..=hi` (`lo` when `hi < lo`).
    fn range(&mut self, lo: usize, hi: usize) -> usize;
    /// True with probability `1/n`.
    fn one_in(&mut self, n: usize) -> bool;
    /// One of `items`, which must not be empty.
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T;
    /// A length skewed towards small values, sometimes large: `1..=max`.
    fn size(&mut self, max: usize) -> usize;
}

impl Draw for Rng {
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.usize(..n)
        }
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        self.usize(lo..=hi.max(lo))
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn size(&mut self, max: usize) -> usize {
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
        let a: Vec<u64> = (0..4).map(|_| for_input(7, 3).u64(..)).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(for_input(7, 3).u64(..), for_input(7, 4).u64(..));
        assert_ne!(for_input(7, 3).u64(..), for_input(8, 3).u64(..));
        // input i does not depend on the inputs drawn before it
        let mut first = for_input(7, 0);
        let _ = first.u64(..);
        assert_eq!(for_input(7, 1).u64(..), for_input(7, 1).u64(..));
        let mut r = Rng::with_seed(1);
        for _ in 0..1000 {
            assert!(r.below(5) < 5);
            let x = r.range(3, 9);
            assert!((3..=9).contains(&x));
            assert!((1..=100).contains(&r.size(100)));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range(4, 2), 4);
    }
}
