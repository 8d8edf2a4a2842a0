//! The fuzz loop: input `i` of a run is a seed as is (for `i` below the number of seeds), else
//! a generated or mutated input that follows from the run's seed and `i` alone, so any input
//! can be produced again from `(seed, i)`.

use crate::exec::{execute, Failure, Limits};
use crate::mutate::mutate;
use crate::rng::{self, Draw, Rng};
use crate::targets::Target;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What a run draws its inputs from.
pub struct Inputs<'a> {
    pub target: &'static Target,
    pub seeds: &'a [Vec<u8>],
    pub seed: u64,
    pub max_len: usize,
}

impl Inputs<'_> {
    /// Input number `index`.
    pub fn get(&self, index: u64) -> Vec<u8> {
        if let Some(s) = usize::try_from(index).ok().and_then(|i| self.seeds.get(i)) {
            return s.clone();
        }
        let mut rng = rng::for_input(self.seed, index);
        let t = self.target;
        let gen_len = *rng.pick(&[256, 4096, 65536, self.max_len]);
        let generated = |rng: &mut Rng| t.generate.map(|g| g(rng, gen_len.min(self.max_len)));
        let base = if self.seeds.is_empty() || (t.generate.is_some() && rng.one_in(3)) {
            match generated(&mut rng) {
                Some(g) if !rng.one_in(3) => return g,
                Some(g) => g,
                None => Vec::new(),
            }
        } else {
            rng.pick(self.seeds).clone()
        };
        mutate(&mut rng, &base, self.seeds, t.dictionary, self.max_len)
    }
}

/// When to stop.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub until: Instant,
    pub iterations: Option<u64>,
}

/// Told about every input before it runs, and about every failure.
pub trait Observer {
    fn before(&mut self, index: u64, input: &[u8]);
    fn failed(&mut self, index: u64, input: &[u8], failure: &Failure);
}

/// Run inputs `from..` until the budget is spent or an input hangs (its thread cannot be
/// stopped: the caller should end the process). Returns the number of executions.
pub fn fuzz(
    inputs: &Inputs,
    from: u64,
    budget: Budget,
    limits: &Limits,
    observer: &mut dyn Observer,
) -> u64 {
    let mut n = 0;
    let mut index = from;
    while Instant::now() < budget.until && budget.iterations.is_none_or(|max| n < max) {
        let input = inputs.get(index);
        observer.before(index, &input);
        let r = execute(inputs.target, &input, limits);
        n += 1;
        if let Err(f) = r {
            observer.failed(index, &input, &f);
            if matches!(f, Failure::Hang { .. }) {
                break;
            }
        }
        index += 1;
    }
    n
}

/// Save a failing input as `<dir>/<target>/<kind>-<hash>.<ext>`.
pub fn save_artifact(
    dir: &Path,
    target: &Target,
    kind: &str,
    input: &[u8],
) -> std::io::Result<PathBuf> {
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    let d = dir.join(target.name);
    std::fs::create_dir_all(&d)?;
    let path = d.join(format!("{kind}-{hash:016x}.{}", target.ext));
    std::fs::write(&path, input)?;
    Ok(path)
}

/// An input for the terminal: escaped, cut after `max` characters.
pub fn preview(input: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(input);
    let mut out: String = text
        .chars()
        .take(max)
        .flat_map(char::escape_debug)
        .collect();
    let total = text.chars().count();
    if total > max {
        out.push_str(&format!("… ({} more characters)", total - max));
    }
    out
}
