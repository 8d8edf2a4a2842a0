//! What the parsed files of a project need from files that were not parsed.
//!
//! The engine parses first only the files whose bytes show they can hold lock code
//! (`locklint_frontend::prefilter`). A file left out can still matter through a name: a
//! `const` or struct field a lock key is built from, a key-building function, a struct whose
//! field types pick a method, a call to a function that reaches Redis or runs SQL (the caller
//! gets a trace), a struct an ORM inserts whole (its literals fill the row), or a function of
//! the same name as the target of such a call in another
//! file (it can make the call ambiguous: defined in an `impl` of the receiver's type when the
//! type picked the target). [`wanted`] lists those names with how a file must spell them and
//! in which packages; the engine parses the files that do, and asks again until nothing new
//! is needed. Every name the project layer looks up across files is listed, so the facts and
//! findings are those of parsing every file.

use crate::packages::{PackageSet, Packages};
use crate::resolve::Index;
use foldhash::{HashMap, HashSet};
use locklint_ir::{Event, FileIr, FnId, KeyRef, Part, Receiver};

/// How a name must appear in a file for the file to be needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// As a call (`name(..)`, `.name(..)`, `name::<T>(..)`): the callers of a function.
    Call,
    /// As a struct literal's type (`Name { .. }`, or `Self { .. }` in an `impl` of it): the
    /// initialisers of its fields.
    Literal,
    /// As a function being defined whose parameters may not start with `self` (`fn name(x`):
    /// what a path call (`name(..)`, `Type::name(..)`) reaches, a key builder, or a namesake
    /// that competes for the call.
    Function,
    /// As a method being defined: a function whose parameters may start with `self` (`fn
    /// name(&self`): the namesakes that compete for a method call.
    Method,
    /// As a struct or an enum being defined (`struct name`, `enum name`): its fields' declared
    /// types, or its one-field variants'.
    Struct,
    /// As a `const` or `static` being defined.
    Const,
}

/// Files that spell `name` as `need` says, in a package of `within`, are needed; with `with`,
/// only those that also spell it: for a function or a method, as the type they implement
/// something for (`name` must be a function of an `impl` of it: `impl Type`, `impl<T>
/// Type<T>`, `impl Trait for Type`); for a struct literal, anywhere (the field it must set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    pub need: Need,
    pub with: Option<String>,
    pub within: PackageSet,
}

/// The names the analysed `files` need from the others (see the module documentation); files
/// that were not parsed have an empty intermediate form and contribute nothing here.
pub fn wanted(files: &[FileIr], packages: &Packages) -> Vec<Wanted> {
    let idx = Index::new(files, packages);
    let mut out: HashMap<(String, Need, Option<String>), PackageSet> = HashMap::default();
    let mut add_with = |name: &str, need: Need, with: Option<&str>, within: PackageSet| {
        out.entry((name.to_string(), need, with.map(str::to_string)))
            .and_modify(|w| *w = w.union(&within))
            .or_insert(within);
    };
    let runs_sql = |id: FnId| {
        idx.func(id)
            .events
            .iter()
            .any(|e| matches!(e, Event::Sql { .. }))
    };
    // the keys the rules read: those of the functions that reach Redis or run SQL
    let mut keys: Vec<&KeyRef> = Vec::new();
    for (fi, f) in files.iter().enumerate() {
        let package = packages.package(fi);
        for (fj, func) in f.functions.iter().enumerate() {
            let id = FnId { file: fi, func: fj };
            // a function of the same name as a call's target in another file, visible from
            // the caller, can make the call ambiguous (one in the caller's own file is
            // preferred; one of another type when the receiver's type picked the target)
            for e in &func.events {
                let Event::Call(c) = e else { continue };
                let Some(t) = idx.target(c) else { continue };
                if t.file == fi || !(idx.touches.contains(&t) || runs_sql(t)) {
                    continue;
                }
                let target = idx.func(t);
                let typed = if c.on_self {
                    func.impl_type.as_deref()
                } else {
                    idx.receiver_type(c)
                        .filter(|ty| target.impl_type.as_deref() == Some(*ty))
                };
                // a method call reaches only methods (`Index::resolve`)
                let need = if c.method {
                    Need::Method
                } else {
                    Need::Function
                };
                add_with(&c.name, need, typed, packages.seen_from(package));
            }
            if !idx.touches.contains(&id) && !runs_sql(id) {
                continue;
            }
            // its callers get its operations (or its statements' parameters)
            add_with(&func.name, Need::Call, None, packages.callers_of(package));
            for e in &func.events {
                match e {
                    Event::Op(op) => keys.push(&op.key),
                    Event::Call(c) => {
                        // an argument is a key where the call hands it to a function that
                        // reaches Redis or runs SQL (one not parsed yet is, once the rounds
                        // reach it, and its callers' arguments are asked for then)
                        if idx
                            .target(c)
                            .is_some_and(|t| idx.touches.contains(&t) || runs_sql(t))
                        {
                            keys.extend(&c.args);
                        }
                        // the struct whose field's declared type picks the method (the enum
                        // whose variant's, for a receiver bound by the variant's pattern)
                        if let Some(Receiver::Field { owner, .. }) = c.receiver.as_deref() {
                            add_with(owner, Need::Struct, None, PackageSet::All);
                        }
                    }
                    Event::Sql { embedded, .. } => {
                        if let Some(exec) = f.embedded.get(*embedded).and_then(|e| e.exec.as_ref())
                        {
                            keys.extend(&exec.bind_keys);
                        }
                    }
                    Event::ConnEnd(_) => {}
                }
            }
        }
    }
    // the struct an ORM inserts whole: its literals, wherever they are, fill the row
    // (`crate::orm::client_clock_fields`)
    for st in files.iter().flat_map(|f| &f.sql.statements) {
        if let Some(v) = &st.values_of {
            add_with(&v.type_name, Need::Literal, None, PackageSet::All);
        }
    }
    // and what those keys are resolved through, transitively: consts, struct fields and key
    // builders wherever they are defined
    let mut consts: HashMap<&str, Vec<&KeyRef>> = HashMap::default();
    let mut fields: HashMap<(&str, &str), Vec<&KeyRef>> = HashMap::default();
    let mut builders: HashMap<&str, Vec<&KeyRef>> = HashMap::default();
    for f in files {
        for (n, k) in &f.consts {
            consts.entry(n.as_str()).or_default().push(k);
        }
        for (t, field, k) in &f.field_inits {
            fields
                .entry((t.as_str(), field.as_str()))
                .or_default()
                .push(k);
        }
        for func in f.functions.iter().filter(|func| !func.has_self) {
            if let Some(k) = &func.returns_key {
                builders.entry(func.name.as_str()).or_default().push(k);
            }
        }
    }
    let mut seen: HashSet<(u8, &str, &str)> = HashSet::default();
    while let Some(k) = keys.pop() {
        for p in &k.parts {
            if let Part::Const(name) = p {
                if seen.insert((0, name, "")) {
                    add_with(name, Need::Const, None, PackageSet::All);
                    keys.extend(consts.get(name.as_str()).into_iter().flatten());
                }
            }
        }
        if let Some((owner, field)) = k.field.as_deref() {
            if seen.insert((1, owner, field)) {
                add_with(owner, Need::Literal, Some(field), PackageSet::All);
                keys.extend(
                    fields
                        .get(&(owner.as_str(), field.as_str()))
                        .into_iter()
                        .flatten(),
                );
            }
        }
        if let Some((name, _)) = k.call.as_deref() {
            let in_type = k.call_in.as_deref().unwrap_or("");
            if seen.insert((2, name, in_type)) {
                add_with(name, Need::Function, k.call_in.as_deref(), PackageSet::All);
                keys.extend(builders.get(name.as_str()).into_iter().flatten());
            }
        }
    }
    let mut v: Vec<Wanted> = out
        .into_iter()
        .map(|((name, need, with), within)| Wanted {
            name,
            need,
            with,
            within,
        })
        .collect();
    v.sort_by(|a, b| (&a.name, a.need as u8, &a.with).cmp(&(&b.name, b.need as u8, &b.with)));
    v
}
