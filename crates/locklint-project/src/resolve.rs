//! Cross-file resolution: functions by name, consts and struct field initialisers, key
//! helpers, and which functions reach Redis (directly or through helpers).

use crate::packages::Packages;
use foldhash::{HashMap, HashSet};
use locklint_ir::{Call, Event, FileIr, FnId, Function, KeyRef, Part, Receiver};

pub(crate) struct Index<'a> {
    pub(crate) files: &'a [FileIr],
    /// Which file's functions each file can call.
    pub(crate) packages: &'a Packages,
    /// Each const's key, project-wide: `None` where two consts of the name differ.
    pub(crate) consts: HashMap<&'a str, Option<&'a KeyRef>>,
    /// Each struct field's initialiser, project-wide: `None` where two differ.
    pub(crate) fields: HashMap<(&'a str, &'a str), Option<&'a KeyRef>>,
    pub(crate) by_name: HashMap<&'a str, Vec<FnId>>,
    /// Declared types of struct fields, project-wide: `None` where two declarations differ.
    pub(crate) field_types: HashMap<(&'a str, &'a str), Option<&'a str>>,
    pub(crate) touches: HashSet<FnId>,
    /// Per function, the call sites that reach it: (caller, index of the call in its events).
    pub(crate) callers: HashMap<FnId, Vec<(FnId, usize)>>,
    /// The call graph, resolved once: each call (by node) and the function it reaches.
    targets: HashMap<locklint_ir::NodeId, FnId>,
}

/// Record `k` under `name`, or `None` there when another key of another template is.
fn merge_unique<'a, N: std::hash::Hash + Eq>(
    map: &mut HashMap<N, Option<&'a KeyRef>>,
    name: N,
    k: &'a KeyRef,
) {
    match map.get(&name) {
        None => {
            map.insert(name, Some(k));
        }
        Some(Some(prev)) if prev.template() != k.template() => {
            map.insert(name, None);
        }
        _ => {}
    }
}

impl<'a> Index<'a> {
    pub(crate) fn new(files: &'a [FileIr], packages: &'a Packages) -> Self {
        let mut consts = HashMap::default();
        let mut fields = HashMap::default();
        let mut by_name: HashMap<&str, Vec<FnId>> = HashMap::default();
        let mut field_types: HashMap<(&str, &str), Option<&str>> = HashMap::default();
        for (fi, f) in files.iter().enumerate() {
            for (owner, field, ty) in &f.field_types {
                field_types
                    .entry((owner.as_str(), field.as_str()))
                    .and_modify(|t| {
                        if *t != Some(ty.as_str()) {
                            *t = None;
                        }
                    })
                    .or_insert(Some(ty.as_str()));
            }
            for (n, k) in &f.consts {
                merge_unique(&mut consts, n.as_str(), k);
            }
            for (t, field, k) in &f.field_inits {
                merge_unique(&mut fields, (t.as_str(), field.as_str()), k);
            }
            for (fj, func) in f.functions.iter().enumerate() {
                by_name
                    .entry(func.name.as_str())
                    .or_default()
                    .push(FnId { file: fi, func: fj });
            }
        }
        let mut idx = Index {
            files,
            packages,
            consts,
            fields,
            by_name,
            field_types,
            touches: HashSet::default(),
            callers: HashMap::default(),
            targets: HashMap::default(),
        };
        idx.compute_touches();
        idx
    }

    /// The function a call reaches, from the call graph resolved when the index was built.
    pub(crate) fn target(&self, call: &Call) -> Option<FnId> {
        self.targets.get(&call.id).copied()
    }

    /// Whether the project defines a function or method of this name.
    pub(crate) fn defines(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    pub(crate) fn func(&self, at: FnId) -> &'a Function {
        &self.files[at.file].functions[at.func]
    }

    /// Functions that reach Redis, directly or through the functions they call: a walk up
    /// the call graph from those with their own operations.
    pub(crate) fn compute_touches(&mut self) {
        use rayon::prelude::*;
        let mut callers: HashMap<FnId, Vec<(FnId, usize)>> = HashMap::default();
        let mut todo = Vec::new();
        // every call resolved (independently, on every core): per file, its functions with
        // their own operations, and each call's node, target, caller and place
        type Resolved = (Vec<FnId>, Vec<(locklint_ir::NodeId, FnId, FnId, usize)>);
        let resolved: Vec<Resolved> = self
            .files
            .par_iter()
            .enumerate()
            .map(|(fi, f)| {
                let (mut own, mut calls) = (Vec::new(), Vec::new());
                for (fj, func) in f.functions.iter().enumerate() {
                    let id = FnId { file: fi, func: fj };
                    if func.events.iter().any(|e| matches!(e, Event::Op(_))) {
                        own.push(id);
                    }
                    for (at, e) in func.events.iter().enumerate() {
                        if let Event::Call(c) = e {
                            if let Some(t) = self.resolve(c, id) {
                                calls.push((c.id, t, id, at));
                            }
                        }
                    }
                }
                (own, calls)
            })
            .collect();
        for (own, calls) in resolved {
            todo.extend(own);
            for (node, t, caller, at) in calls {
                self.targets.insert(node, t);
                callers.entry(t).or_default().push((caller, at));
            }
        }
        while let Some(f) = todo.pop() {
            if !self.touches.insert(f) {
                continue;
            }
            if let Some(cs) = callers.get(&f) {
                todo.extend(
                    cs.iter()
                        .map(|(c, _)| *c)
                        .filter(|c| !self.touches.contains(c)),
                );
            }
        }
        self.callers = callers;
    }

    /// The function a call reaches, when it can be told unambiguously among the functions of
    /// that name the caller's package can see.
    pub(crate) fn resolve(&self, call: &Call, from: FnId) -> Option<FnId> {
        let cands = self.by_name.get(call.name.as_str())?;
        let caller = self.func(from);
        let fits = |&&id: &&FnId| {
            if !self.packages.visible(from.file, id.file) {
                return false;
            }
            let f = self.func(id);
            if call.method {
                if !f.has_self {
                    return false;
                }
                if call.on_self {
                    return f.impl_type == caller.impl_type;
                }
                f.params.len() == call.args.len()
            } else {
                // `Type::f(..)` is one of that type's associated functions
                let in_type = match call.receiver.as_deref() {
                    Some(Receiver::Type(ty)) => f.impl_type.as_deref() == Some(ty.as_str()),
                    _ => true,
                };
                in_type && !f.has_self && f.params.len() == call.args.len()
            }
        };
        let matching: Vec<&FnId> = cands.iter().filter(fits).collect();
        match matching.as_slice() {
            [one] => Some(**one),
            [] => None,
            many => {
                // the receiver's declared type picks among methods of the same name
                if let Some(ty) = self.receiver_type(call) {
                    let typed: Vec<_> = many
                        .iter()
                        .filter(|id| self.func(***id).impl_type.as_deref() == Some(ty))
                        .collect();
                    if let [one] = typed.as_slice() {
                        return Some(***one);
                    }
                }
                // prefer a definition in the caller's own file
                let local: Vec<_> = many.iter().filter(|id| id.file == from.file).collect();
                (local.len() == 1).then(|| **local[0])
            }
        }
    }

    /// The declared type of a method call's receiver: its own, or its field's declaration.
    pub(crate) fn receiver_type<'c>(&'c self, call: &'c Call) -> Option<&'c str> {
        match call.receiver.as_deref()? {
            Receiver::Type(ty) => Some(ty),
            Receiver::Field { owner, field } => self
                .field_types
                .get(&(owner.as_str(), field.as_str()))
                .copied()
                .flatten(),
        }
    }

    /// Resolve consts, struct fields and key-building helpers in a template.
    pub(crate) fn resolve_key(&self, key: &KeyRef, depth: usize) -> KeyRef {
        if depth > 8 {
            return key.clone();
        }
        let single_hole = key.parts.len() == 1 && matches!(key.parts[0], Part::Hole(_));
        let mut out = KeyRef {
            parts: Vec::new(),
            ..key.clone()
        };
        if single_hole {
            if let Some(field) = &key.field {
                if let Some(Some(k)) = self.fields.get(&(field.0.as_str(), field.1.as_str())) {
                    let mut r = self.resolve_key(k, depth + 1);
                    r.add_names(key.names.iter().cloned());
                    r.field = key.field.clone();
                    return r;
                }
            }
            if let Some((name, arity)) = key.call.as_deref() {
                if let Some(k) = self.returned_key(name, *arity, key.call_in.as_deref()) {
                    let mut r = self.resolve_key(&k, depth + 1);
                    r.add_names(key.names.iter().cloned());
                    return r;
                }
            }
        }
        for p in &key.parts {
            match p {
                Part::Const(name) => match self.consts.get(name.as_str()) {
                    Some(Some(k)) => {
                        let r = self.resolve_key(k, depth + 1);
                        for rp in r.parts {
                            out.push(rp);
                        }
                    }
                    _ => out.push(Part::Hole(Some(name.clone()))),
                },
                other => out.push(other.clone()),
            }
        }
        out
    }

    /// The key the functions of this name and arity return (of this type's, when the call
    /// names one; methods aside: a key builder is called by its path), when they all return
    /// the same one.
    pub(crate) fn returned_key(
        &self,
        name: &str,
        arity: usize,
        in_type: Option<&str>,
    ) -> Option<KeyRef> {
        let cands = self.by_name.get(name)?;
        let mut found: Option<KeyRef> = None;
        for &c in cands {
            let f = self.func(c);
            // a path call reaches no method
            if f.has_self
                || f.params.len() != arity
                || in_type.is_some_and(|t| f.impl_type.as_deref() != Some(t))
            {
                continue;
            }
            let k = f.returns_key.as_ref()?;
            if found.as_ref().is_some_and(|p| p.template() != k.template()) {
                return None;
            }
            found = Some(k.clone());
        }
        found
    }
}
