//! Which package each file of the project belongs to, and which packages each can call into:
//! a function of package `P` is callable from package `Q` only when `Q` is `P` or depends on
//! `P`, directly or through other packages (a re-export makes a dependency's dependency
//! callable). Call resolution picks among the functions a caller's package can see, so that a
//! same-named function of an unrelated crate neither makes a call ambiguous nor is taken for
//! its target. A file of no package (no manifest above it, or one that does not parse) sees
//! every function and is seen from every package.
//!
//! The packages and their dependencies are read from the manifests by the caller (the
//! engine); this is the resulting graph, as plain data.

/// Packages of a project's files and what each package sees.
#[derive(Debug, Clone, Default)]
pub struct Packages {
    /// Per file (by its index in the project), its package.
    of_file: Vec<Option<u32>>,
    /// Per package, the packages it sees (itself and its dependencies, transitively), as bits.
    sees: Vec<Bits>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn get(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    fn union(&mut self, other: &Bits) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let n = *a | *b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }
}

/// A set of packages, as [`Packages::callers_of`] and [`Packages::reachable_from_callers_of`]
/// answer: every package (and files of none), or some.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageSet {
    All,
    Some(Vec<bool>),
}

impl PackageSet {
    /// Whether the set holds `package` (files of no package are in every set).
    pub fn contains(&self, package: Option<u32>) -> bool {
        match (self, package) {
            (PackageSet::All, _) | (_, None) => true,
            (PackageSet::Some(v), Some(p)) => v.get(p as usize).copied().unwrap_or(true),
        }
    }

    /// Every package of either set.
    pub fn union(&self, other: &PackageSet) -> PackageSet {
        match (self, other) {
            (PackageSet::Some(x), PackageSet::Some(y)) => {
                PackageSet::Some(x.iter().zip(y).map(|(p, q)| *p || *q).collect())
            }
            _ => PackageSet::All,
        }
    }
}

impl Packages {
    /// No package information: every function is visible from everywhere.
    pub const fn none() -> Packages {
        Packages {
            of_file: Vec::new(),
            sees: Vec::new(),
        }
    }

    /// The graph of `count` packages: `of_file` gives each file's package (an index below
    /// `count`), `depends[p]` the packages `p` depends on directly.
    pub fn new(of_file: Vec<Option<u32>>, depends: &[Vec<u32>]) -> Packages {
        let count = depends.len();
        let mut sees: Vec<Bits> = (0..count)
            .map(|p| {
                let mut b = Bits::new(count);
                b.set(p);
                for &d in &depends[p] {
                    if (d as usize) < count {
                        b.set(d as usize);
                    }
                }
                b
            })
            .collect();
        // transitive closure: repeat until nothing changes (dependency graphs are shallow)
        loop {
            let mut changed = false;
            for p in 0..count {
                let direct: Vec<u32> = depends[p].clone();
                for d in direct {
                    let d = d as usize;
                    if d < count && d != p {
                        let other = sees[d].clone();
                        changed |= sees[p].union(&other);
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let of_file = of_file
            .into_iter()
            .map(|p| p.filter(|&p| (p as usize) < count))
            .collect();
        Packages { of_file, sees }
    }

    /// The package of the file at `file`, if any.
    pub fn package(&self, file: usize) -> Option<u32> {
        self.of_file.get(file).copied().flatten()
    }

    /// Whether code in file `from` can call a function defined in file `to`.
    pub fn visible(&self, from: usize, to: usize) -> bool {
        match (self.package(from), self.package(to)) {
            (Some(f), Some(t)) => self.sees[f as usize].get(t as usize),
            _ => true,
        }
    }

    /// The packages whose code can call into `package` (itself included).
    pub fn callers_of(&self, package: Option<u32>) -> PackageSet {
        let Some(p) = package else {
            return PackageSet::All;
        };
        PackageSet::Some(self.sees.iter().map(|s| s.get(p as usize)).collect())
    }

    /// The packages whose functions code of `package` can call (itself included).
    pub fn seen_from(&self, package: Option<u32>) -> PackageSet {
        let Some(p) = package else {
            return PackageSet::All;
        };
        let sees = &self.sees[p as usize];
        PackageSet::Some((0..self.sees.len()).map(|q| sees.get(q)).collect())
    }

    /// The packages visible from some package that can call into `package`: where a function
    /// of the same name as one of `package`'s may compete with it for a caller.
    pub fn reachable_from_callers_of(&self, package: Option<u32>) -> PackageSet {
        let PackageSet::Some(callers) = self.callers_of(package) else {
            return PackageSet::All;
        };
        let mut seen = Bits::new(self.sees.len());
        for (c, is) in callers.iter().enumerate() {
            if *is {
                seen.union(&self.sees[c]);
            }
        }
        PackageSet::Some((0..self.sees.len()).map(|p| seen.get(p)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// app → iface → redis; tool stands alone; file 4 has no package.
    fn graph() -> Packages {
        Packages::new(
            vec![Some(0), Some(1), Some(2), Some(3), None],
            &[vec![1], vec![2], vec![], vec![]],
        )
    }

    #[test]
    fn a_package_sees_itself_and_its_dependencies_transitively() {
        let p = graph();
        assert!(p.visible(0, 1) && p.visible(0, 2) && p.visible(0, 0));
        assert!(!p.visible(1, 0), "a dependency does not see its dependents");
        assert!(!p.visible(3, 2) && !p.visible(2, 3));
        assert!(
            p.visible(4, 2) && p.visible(3, 4),
            "no package: sees and is seen"
        );
        assert!(Packages::none().visible(0, 7));
    }

    #[test]
    fn callers_and_competitors() {
        let p = graph();
        let callers = p.callers_of(Some(2));
        assert!(
            callers.contains(Some(0)) && callers.contains(Some(1)) && callers.contains(Some(2))
        );
        assert!(!callers.contains(Some(3)));
        assert!(callers.contains(None));
        let competing = p.reachable_from_callers_of(Some(1));
        assert!(competing.contains(Some(2)) && competing.contains(Some(0)));
        assert!(!competing.contains(Some(3)));
        assert_eq!(p.callers_of(None), PackageSet::All);
        let seen = p.seen_from(Some(0));
        assert!(seen.contains(Some(2)) && !seen.contains(Some(3)));
    }
}
