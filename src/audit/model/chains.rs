//! One Redis operation as each function along its chain of calls sees it. A trace is rooted
//! at every function that reaches Redis, so the operation reached through `root → a → b`
//! also appears in the traces rooted at `a` (through `b`) and at `b` (itself): each holds the
//! key as that function writes it, and the call that passes it on.

use super::*;
use crate::ir::{Event, KeyRef, NodeId, Part};

/// The chain of calls of an occurrence: each call's file and span.
type Chain = Vec<(String, Span)>;

fn chain(o: &TraceOp) -> Chain {
    o.via.iter().map(|(f, s)| (f.display.clone(), *s)).collect()
}

pub(super) struct Chains<'p, 'a> {
    by_chain: HashMap<(NodeId, Chain), (&'p Trace<'a>, &'p TraceOp<'a>)>,
}

impl<'p, 'a> Chains<'p, 'a> {
    pub(super) fn new(project: &'p Project<'a>) -> Self {
        let mut by_chain = HashMap::new();
        for t in &project.traces {
            for o in &t.ops {
                by_chain.entry((o.op.id, chain(o))).or_insert((t, o));
            }
        }
        Chains { by_chain }
    }

    /// The occurrences of `o` from its own function outwards, as far as each caller has a
    /// trace: first the function that holds the operation, last the root of `o`'s trace.
    pub(super) fn levels(
        &self,
        o: &TraceOp,
    ) -> impl Iterator<Item = (&'p Trace<'a>, &'p TraceOp<'a>)> + '_ {
        let calls = chain(o);
        let id = o.op.id;
        (0..=calls.len())
            .rev()
            .filter_map(move |j| self.by_chain.get(&(id, calls[j..].to_vec())).copied())
    }

    /// The key that names the lock: the template built where the key is chosen. Going out
    /// from the operation, the first function whose key has literal text (a caller's literal
    /// argument for that template's hole is an instance of it, not another lock); a key that
    /// is only a parameter all the way is the root's.
    pub(super) fn naming_key(&self, o: &TraceOp) -> KeyRef {
        self.levels(o)
            .map(|(_, x)| &*x.key)
            .find(|k| k.has_literal())
            .unwrap_or(&*o.key)
            .clone()
    }

    /// The integer a caller passes for the parameter `name` of the function that holds `o`,
    /// followed out through the callers' own parameters.
    pub(super) fn argument(&self, o: &TraceOp, name: &str) -> Option<u64> {
        let mut index = o.func.params.iter().position(|p| p == name)?;
        for (t, x) in self.levels(o).skip(1) {
            // `x` is reached from `t.root` through its first call
            let span = x.via.first()?.1;
            let arg: &KeyRef = t.root.events.iter().find_map(|e| match e {
                Event::Call(c) if c.span == span => c.args.get(index),
                _ => None,
            })?;
            if let Some(v) = arg.constant_text() {
                return v.parse().ok();
            }
            match (arg.parts.as_slice(), &arg.param) {
                ([Part::Hole(_)], Some((i, _))) => index = *i,
                _ => return None,
            }
        }
        None
    }
}
