//! The Lua script a script invocation runs, and what it does to the lock's key.
//!
//! An invocation names the script it is reached from (`Op.script`): a `const`/`static` holding
//! the text, a `static LazyLock<Script>` or `once_cell` `Lazy` built from it, a struct field
//! initialised with `Script::new(..)` ([`super::stored`]), or a local. The script is looked up
//! among the scripts of the invocation's file by that name, then, for a constant's name
//! (`RELEASE_LOCK`, or the constant a holder of the file is built from), among those of every
//! file. When the name says nothing (or several
//! scripts), the file's scripts are taken together: the invocation releases with an owner
//! check only when every script of the file that deletes or expires a key checks the owner
//! first.

use super::stored::{FileStores, ScriptText};
use super::*;
use crate::ir::lua::{Script, WriteKind};
use crate::ir::Op;

/// What an invocation does to the key it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScriptRole {
    /// Deletes it (`DEL`, `UNLINK`).
    Release,
    /// Only changes its expiry.
    Renewal,
    /// Neither: it does not end or extend the lock.
    Other,
}

#[derive(Clone, Copy)]
pub(super) struct ScriptFacts<'a> {
    pub(super) role: ScriptRole,
    /// Every delete or expiry change is dominated by a check of the caller's token.
    pub(super) guarded: bool,
    /// The script (its file and writes), when the invocation names one.
    pub(super) script: Option<(&'a FileIr, &'a Script)>,
}

pub(super) struct Scripts<'a> {
    files: &'a [FileIr],
    stores: Vec<FileStores>,
    /// The facts of each invocation, once found.
    known: std::cell::RefCell<HashMap<crate::ir::NodeId, ScriptFacts<'a>>>,
}

impl<'a> Scripts<'a> {
    pub(super) fn new(files: &'a [FileIr]) -> Self {
        Scripts {
            files,
            stores: super::stored::stores(files),
            known: Default::default(),
        }
    }

    pub(super) fn stores(&self, file: usize) -> Option<&FileStores> {
        self.stores.get(file)
    }

    /// The scripts of file `fi` that `name` reaches: held under that name, or holding it.
    fn named_in(&self, fi: usize, name: &str) -> Vec<&'a Script> {
        match self.stores.get(fi).and_then(|s| s.scripts.get(name)) {
            Some(text) => self.of_text(fi, text),
            None => self.of_text(fi, &ScriptText::Named(name.to_string())),
        }
    }

    /// The scripts of file `fi` a holder's text is: a constant's, a literal's, or a `.lua`
    /// file's (anywhere in the project).
    fn of_text(&self, fi: usize, text: &ScriptText) -> Vec<&'a Script> {
        let Some(file) = self.files.get(fi) else {
            return Vec::new();
        };
        let by_name = |n: &str| -> Vec<&'a Script> {
            file.lua
                .scripts
                .iter()
                .filter(|s| s.names.iter().any(|x| x == n))
                .collect()
        };
        match text {
            ScriptText::Named(text) => by_name(text),
            ScriptText::File(path) => self
                .files
                .iter()
                .filter(|f| crate::source::lexical(&f.file.path) == *path)
                .flat_map(|f| &f.lua.scripts)
                .collect(),
            ScriptText::Literal(span) => file
                .lua
                .scripts
                .iter()
                .filter(|s| {
                    file.embedded
                        .get(s.embedded)
                        .is_some_and(|e| e.span.start >= span.start && e.span.start < span.end)
                })
                .collect(),
            ScriptText::Ambiguous => Vec::new(),
        }
    }

    /// The one script an invocation runs, when its name tells.
    fn script_of(&self, op: &Op) -> Option<(&'a FileIr, &'a Script)> {
        let fi = op.id.file;
        let Some(name) = op.script.as_deref() else {
            // a script built in place, `Script::new(include_str!(..)).key(k)`
            let text = self.stores.get(fi)?.invocations.get(&op.span.start)?;
            return match self.of_text(fi, text).as_slice() {
                [s] => Some((self.file_of(s)?, *s)),
                _ => None,
            };
        };
        let mut found: Vec<(usize, &'a Script)> = self
            .named_in(fi, name)
            .into_iter()
            .map(|s| (fi, s))
            .collect();
        // a constant of another file: the holder itself (`use crate::scripts::RELEASE;`), or
        // the text a holder of this file is built from (`Script::new(scripts::RELEASE_LUA)`)
        let elsewhere = match self.stores.get(fi).and_then(|s| s.scripts.get(name)) {
            None => Some(name),
            Some(ScriptText::Named(text)) => Some(text.as_str()),
            Some(_) => None,
        };
        if let Some(wanted) = elsewhere.filter(|n| crate::rules::is_constant_name(n)) {
            if found.is_empty() {
                for (fj, _) in self.files.iter().enumerate().filter(|(fj, _)| *fj != fi) {
                    found.extend(self.named_in(fj, wanted).into_iter().map(|s| (fj, s)));
                }
            }
        }
        match found.as_slice() {
            [(_, s)] => Some((self.file_of(s)?, *s)),
            _ => None,
        }
    }

    /// The file a script is in.
    fn file_of(&self, script: &Script) -> Option<&'a FileIr> {
        self.files
            .iter()
            .find(|f| f.lua.scripts.iter().any(|s| std::ptr::eq(s, script)))
    }

    /// What the script invocation `op`, written in `func`, does to its key.
    pub(super) fn facts(&self, op: &Op, func: &Function) -> ScriptFacts<'a> {
        if let Some(known) = self.known.borrow().get(&op.id) {
            return *known;
        }
        let facts = self.find(op, func);
        self.known.borrow_mut().insert(op.id, facts);
        facts
    }

    fn find(&self, op: &Op, func: &Function) -> ScriptFacts<'a> {
        if let Some((file, s)) = self.script_of(op) {
            let role = if s.writes.iter().any(|(w, _)| w.kind == WriteKind::Release) {
                ScriptRole::Release
            } else if s.writes.is_empty() {
                ScriptRole::Other
            } else {
                ScriptRole::Renewal
            };
            return ScriptFacts {
                role,
                guarded: s.writes.iter().all(|(w, _)| w.guarded),
                script: Some((file, s)),
            };
        }
        // the file's scripts together; a renewal when its function is named for one
        let scripts: Vec<&Script> = self
            .files
            .get(op.id.file)
            .map(|f| {
                f.lua
                    .scripts
                    .iter()
                    .filter(|s| !s.writes.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        ScriptFacts {
            role: if vocabulary::names_renewal(&func.name) {
                ScriptRole::Renewal
            } else {
                ScriptRole::Release
            },
            guarded: !scripts.is_empty()
                && scripts
                    .iter()
                    .all(|s| s.writes.iter().all(|(w, _)| w.guarded)),
            script: None,
        }
    }
}
