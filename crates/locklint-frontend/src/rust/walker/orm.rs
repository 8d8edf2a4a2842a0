//! Writes built with an ORM's query builder, read as the statement facts SQL text gives: the
//! kind, the table, the `WHERE` comparisons, the assignments and inserted values, the conflict
//! clause. Each becomes an `Embedded` of origin `Orm` with no text and its statement, run by
//! the chain's executing call (an `Event::Sql` in event order, with its executor).
//!
//! Recognised, in a file that names the ORM:
//! - diesel: `diesel::update(T).set(..)`, `diesel::delete(T)`, `diesel::insert_into(t)
//!   .values(..)` (with `.on_conflict(..).do_nothing()`, `.on_conflict_do_nothing()`,
//!   `.on_conflict(..).do_update().set(..)` and its `.filter(..)`), `replace_into`,
//!   `insert_or_ignore_into`, run by `execute`, `get_result` or `get_results`; `T` is a table
//!   (`locks::table`, `locks` from `dsl`) with `.filter(..)`s and `.find(key)` (the primary key
//!   a `table!` of the file lists, else diesel's default `id`), or a local holding one.
//! - sea-orm: `<entity>::update_many()`, `delete_many()`, `insert(am)`, `update(am)`,
//!   `delete(am)` with `.filter(..)`, `.col_expr(..)`, `.set(am)`, `.on_conflict(OnConflict
//!   ::column(..)..)`, run by `exec`; an `ActiveModel` literal (or a local bound to one) run by
//!   `.update(db)`, `.insert(db)` or `.delete(db)` (its `Unchanged` fields are the `WHERE`).
//!
//! Conditions are `col.eq(x)` (`ne`, `lt`, `le`/`lte`, `gt`, `ge`/`gte`, `eq_any`/`is_in`),
//! `is_null`, joined by `and`/`or` or sea-orm's `Condition::all()/any().add(..)`. A chain with
//! any part not listed here, a changeset or active model not written at the chain, or a table
//! not named by a path gives nothing.

use super::*;
use locklint_ir::sql::{
    Assign, Cmp, CmpOp, Col, Conflict, Filter, Operand, Placeholders, RowLock, Statement,
    StatementKind, StructValue,
};
use locklint_ir::{Library, TextMap};

/// Links of one method chain past which it is not read.
const MAX_LINKS: usize = 64;
/// Parts of one condition or value past which it is not read.
const MAX_PARTS: usize = 256;
/// Locals followed from a use to the chain or literal they hold.
const MAX_HOPS: usize = 4;

/// What a file says about ORMs.
#[derive(Debug, Default)]
pub struct OrmFile {
    pub diesel: bool,
    pub sea_orm: bool,
    /// The tables of the file's sea-orm entities (`#[sea_orm(table_name = "..")]`), by module:
    /// an inline module's name, or for the file's own items the module the file is.
    pub tables: Vec<(String, String)>,
    /// The primary keys of the file's diesel tables (`diesel::table! { jobs (id) { .. } }`).
    pub keys: Vec<(String, Vec<String>)>,
}

/// What `diesel::table!` declares: the table and its primary key (diesel's default `id` when
/// none is listed).
struct TableMacro {
    table: String,
    key: Vec<String>,
}

impl syn::parse::Parse for TableMacro {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        input.call(syn::Attribute::parse_outer)?;
        let mut table: syn::Ident = input.parse()?;
        // `schema.table`
        while input.peek(syn::Token![.]) {
            input.parse::<syn::Token![.]>()?;
            table = input.parse()?;
        }
        let key = if input.peek(syn::token::Paren) {
            let content;
            syn::parenthesized!(content in input);
            let cols = syn::punctuated::Punctuated::<syn::Ident, syn::Token![,]>::parse_terminated(
                &content,
            )?;
            cols.iter().map(|c| c.to_string()).collect()
        } else {
            vec!["id".to_string()]
        };
        let body;
        syn::braced!(body in input);
        body.parse::<proc_macro2::TokenStream>()?;
        input.parse::<proc_macro2::TokenStream>()?;
        Ok(TableMacro {
            table: table.to_string(),
            key,
        })
    }
}

impl OrmFile {
    /// `lower`: the file's text in lower case.
    pub fn of(lower: &str, path: &std::path::Path, items: &[syn::Item]) -> Self {
        let diesel = lower.contains("diesel");
        let sea_orm = lower.contains("sea_orm");
        let mut tables = Vec::new();
        let mut keys = Vec::new();
        if sea_orm || diesel {
            let own = file_module(path);
            let mut todo: Vec<(String, &[syn::Item])> = vec![(own, items)];
            while let Some((module, items)) = todo.pop() {
                for item in items {
                    match item {
                        syn::Item::Struct(s) if sea_orm => {
                            if let Some(t) = table_name_attr(&s.attrs) {
                                tables.push((module.clone(), t));
                            }
                        }
                        syn::Item::Macro(m)
                            if diesel
                                && m.mac
                                    .path
                                    .segments
                                    .last()
                                    .is_some_and(|s| s.ident == "table") =>
                        {
                            if let Ok(t) = m.mac.parse_body::<TableMacro>() {
                                keys.push((t.table, t.key));
                            }
                        }
                        syn::Item::Mod(m) => {
                            if let Some((_, inner)) = &m.content {
                                todo.push((m.ident.to_string(), inner));
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        OrmFile {
            diesel,
            sea_orm,
            tables,
            keys,
        }
    }

    /// The primary key of a diesel table: the one a `table!` of the file lists, else diesel's
    /// default `id`.
    fn key_of(&self, table: &str) -> Vec<String> {
        self.keys
            .iter()
            .find(|(t, _)| t == table)
            .map_or_else(|| vec!["id".to_string()], |(_, k)| k.clone())
    }

    /// The table of the sea-orm entity of `module`: its declared name, else the module's
    /// (and the module, for the project to find the table another file declares).
    fn table_of(&self, module: &str) -> (String, Option<String>) {
        match self.tables.iter().find(|(m, _)| m == module) {
            Some((_, t)) => (t.clone(), None),
            None => (module.to_string(), Some(module.to_string())),
        }
    }

    /// The table of an entity named without its module (`Entity`, `ActiveModel`): the one the
    /// file declares, when it declares one.
    fn own_table(&self) -> Option<(String, Option<String>)> {
        match self.tables.as_slice() {
            [(_, t)] => Some((t.clone(), None)),
            _ => None,
        }
    }
}

/// The module a file is: its stem, or its directory's name for `mod.rs`.
fn file_module(path: &std::path::Path) -> String {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if matches!(stem, "mod" | "lib" | "main") {
        path.parent()
            .and_then(|p| p.file_name())
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string()
    } else {
        stem.to_string()
    }
}

/// `table_name = ".."` of a `#[sea_orm(..)]` attribute.
fn table_name_attr(attrs: &[syn::Attribute]) -> Option<String> {
    let mut out = None;
    for a in attrs.iter().filter(|a| a.path().is_ident("sea_orm")) {
        let _ = a.parse_nested_meta(|meta| {
            if meta.input.peek(syn::Token![=]) {
                let v: syn::Expr = meta.value()?.parse()?;
                if meta.path.is_ident("table_name") {
                    out = str_lit(&v);
                }
            } else if meta.input.peek(syn::token::Paren) {
                let _ = meta.parse_nested_meta(|_| Ok(()));
            }
            Ok(())
        });
    }
    out
}

/// `ExpiresAt` → `expires_at`: the column a sea-orm `Column` variant names.
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A method chain as its base and its links, first link first; `None` past [`MAX_LINKS`].
/// A method chain whose base is a call of a path (`diesel::update(..)`,
/// `lock::Entity::update_many()`): that call, its path's segments and the links after it.
#[allow(clippy::type_complexity)]
fn path_call_chain(
    e: &syn::Expr,
) -> Option<(&syn::ExprCall, Vec<String>, Vec<&syn::ExprMethodCall>)> {
    let (base, links) = chain(e)?;
    let syn::Expr::Call(c) = base else {
        return None;
    };
    let syn::Expr::Path(func) = &*c.func else {
        return None;
    };
    Some((c, segments(&func.path), links))
}

fn chain(e: &syn::Expr) -> Option<(&syn::Expr, Vec<&syn::ExprMethodCall>)> {
    let mut links = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            syn::Expr::MethodCall(m) => {
                if links.len() >= MAX_LINKS {
                    return None;
                }
                links.push(m);
                cur = &m.receiver;
            }
            syn::Expr::Paren(p) => cur = &p.expr,
            syn::Expr::Reference(r) => cur = &r.expr,
            syn::Expr::Group(g) => cur = &g.expr,
            _ => break,
        }
    }
    links.reverse();
    Some((cur, links))
}

/// An expression without references, parentheses and groups.
fn strip(e: &syn::Expr) -> &syn::Expr {
    let mut cur = e;
    loop {
        match cur {
            syn::Expr::Paren(p) => cur = &p.expr,
            syn::Expr::Reference(r) => cur = &r.expr,
            syn::Expr::Group(g) => cur = &g.expr,
            _ => return cur,
        }
    }
}

fn segments(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

/// The comparison an ORM method makes.
fn cmp_op(method: &str) -> Option<CmpOp> {
    Some(match method {
        // diesel's `is` / `is_not` are `IS [NOT] DISTINCT FROM`: equalities that match NULL
        "eq" | "eq_any" | "is_in" | "is" | "is_not_distinct_from" => CmpOp::Eq,
        "ne" | "is_not" | "is_distinct_from" => CmpOp::NotEq,
        "lt" => CmpOp::Lt,
        "le" | "lte" => CmpOp::LtEq,
        "gt" => CmpOp::Gt,
        "ge" | "gte" => CmpOp::GtEq,
        _ => return None,
    })
}

/// The statement being read from a chain.
struct Write {
    lib: Library,
    /// The sea-orm entity module the table stands in for (see `Origin::Orm`).
    entity: Option<String>,
    kind: StatementKind,
    table: String,
    assignments: Vec<Assign>,
    values: Vec<Assign>,
    conflict: Conflict,
    upsert_span: Option<Span>,
    /// The condition's span, columns and comparisons, once there is one.
    filter: Option<Filter>,
    /// A struct value inserted whole (`.values(mutex)`).
    values_of: Option<StructValue>,
    /// A read that locks the rows it reads (`.for_update()`).
    row_lock: bool,
}

impl Write {
    fn new(lib: Library, kind: StatementKind, table: String) -> Self {
        Write {
            lib,
            entity: None,
            kind,
            table,
            assignments: Vec::new(),
            values: Vec::new(),
            conflict: Conflict::None,
            upsert_span: None,
            filter: None,
            values_of: None,
            row_lock: false,
        }
    }

    fn add_condition(&mut self, span: Span, columns: Vec<Col>, comparisons: Vec<Cmp>) {
        match &mut self.filter {
            Some(f) => {
                f.span = f.span.join(span);
                f.columns.extend(columns);
                f.comparisons.extend(comparisons);
            }
            None => {
                self.filter = Some(Filter {
                    span,
                    columns,
                    comparisons,
                })
            }
        }
    }

    fn statement(self, span: Span) -> Statement {
        if self.kind == StatementKind::Select {
            return self.read(span);
        }
        Statement {
            embedded: 0,
            start: 0,
            end: 0,
            span,
            in_body: false,
            kind: self.kind,
            names: vec![self.table.clone()],
            table: Some(self.table),
            reads: None,
            assignments: self.assignments,
            values: self.values,
            conflict: self.conflict,
            upsert_span: self.upsert_span,
            filter: self.filter,
            advisory: Vec::new(),
            table_def: None,
            placeholders: Placeholders::default(),
            row_lock: None,
            selected: Vec::new(),
            merge: false,
            read_filter: None,
            body: None,
            routine: None,
            call: None,
            exit_path: false,
            values_of: self.values_of,
        }
    }

    /// A read of one table: what it reads, its condition, and the rows it locks.
    fn read(self, span: Span) -> Statement {
        let row_lock = self.row_lock.then(|| {
            let cmps = self.filter.iter().flat_map(|f| &f.comparisons);
            let mut passed: Vec<String> = Vec::new();
            for (col, time) in cmps.filter_map(Cmp::column_before) {
                let a_time = (time.clock || time.client_clock) && time.columns.is_empty();
                if a_time && !passed.contains(&col.name) {
                    passed.push(col.name.clone());
                }
            }
            let mut columns: Vec<String> = Vec::new();
            for c in self.filter.iter().flat_map(|f| &f.columns) {
                if !columns.contains(&c.name) {
                    columns.push(c.name.clone());
                }
            }
            RowLock {
                tables: vec![self.table.clone()],
                columns,
                joined: Vec::new(),
                passed,
            }
        });
        Statement {
            kind: StatementKind::Select,
            reads: Some(self.table.clone()),
            table: None,
            row_lock,
            read_filter: self.filter,
            ..Write::new(self.lib, StatementKind::Other, self.table).statement(span)
        }
    }
}

/// What one field of an active model does.
enum Field {
    /// `Set(v)`: written.
    Set,
    /// `Unchanged(v)`: the row's key, matched.
    Unchanged,
}

impl FnWalker<'_> {
    /// A write built with an ORM and executed by `m`: record its statement and its run, walk
    /// its parts, and say so; `false` (nothing done) for anything else.
    pub(super) fn orm_write(&mut self, m: &syn::ExprMethodCall, u: &ResultUse) -> bool {
        if m.args.len() != 1 {
            return false;
        }
        let method = m.method.to_string();
        let orm = &self.cx.orm;
        let read = match method.as_str() {
            "execute" | "get_result" | "get_results" if orm.diesel => self
                .diesel_write(&m.receiver)
                .or_else(|| self.diesel_locking_read(&m.receiver)),
            "load" | "first" if orm.diesel => self.diesel_locking_read(&m.receiver),
            "exec" | "exec_with_returning" | "exec_without_returning" if orm.sea_orm => {
                self.sea_orm_chain(&m.receiver)
            }
            "update" | "insert" | "delete" if orm.sea_orm => {
                self.active_model_write(&method, &m.receiver)
            }
            _ => None,
        };
        let Some(write) = read else {
            return false;
        };
        let call = self
            .span_of(&m.method)
            .join(self.span_of(&m.paren_token.span.close()));
        let span = self.span_of(&*m.receiver).join(call);
        let origin = Origin::Orm {
            library: write.lib,
            entity: write.entity.clone(),
        };
        let statement = write.statement(span);
        // the chain's parts run before it is executed
        self.expr(&m.receiver, ResultUse::Used);
        self.embedded.push(Embedded {
            language: Language::Sql,
            text: String::new(),
            map: TextMap::identity(span.start),
            span,
            origin,
            func: Some(self.func_idx),
            exec: None,
            statement: Some(Box::new(statement)),
        });
        let idx = self.embedded_base + self.embedded.len() - 1;
        let executor = self.executor_of(&m.args[0]);
        let conn = conns::conn_var(&m.args[0]);
        self.sql_exec(idx, (executor, conn), &method, call, u.clone(), None);
        self.expr(&m.args[0], ResultUse::Used);
        true
    }

    /// The expression a local holds, followed through locals bound to locals.
    fn held<'e>(&'e self, e: &'e syn::Expr) -> &'e syn::Expr {
        let mut cur = strip(e);
        for _ in 0..MAX_HOPS {
            let syn::Expr::Path(p) = cur else { break };
            let Some(name) = p.path.get_ident() else {
                break;
            };
            match self.lookup(&name.to_string()).and_then(|b| b.expr.as_ref()) {
                Some(x) => cur = strip(x),
                None => break,
            }
        }
        cur
    }

    /// A name the function binds (a local or a parameter), or a constant: a Rust value.
    fn is_rust_value(&self, name: &str) -> bool {
        self.lookup(name).is_some()
            || self.params.iter().any(|p| p == name)
            || self.cx.consts.contains_key(name)
            || name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            || name == "self"
    }

    // ---- diesel ----

    fn diesel_write(&self, recv: &syn::Expr) -> Option<Write> {
        let (c, path, links) = path_call_chain(recv)?;
        let (name, prefix) = path.split_last()?;
        if c.args.len() != 1 || !(prefix.is_empty() || prefix == ["diesel"]) {
            return None;
        }
        let (kind, conflict) = match name.as_str() {
            "update" => (StatementKind::Update, Conflict::None),
            "delete" => (StatementKind::Delete, Conflict::None),
            "insert_into" => (StatementKind::Insert, Conflict::None),
            "replace_into" => (StatementKind::Insert, Conflict::Replace),
            "insert_or_ignore_into" => (StatementKind::Insert, Conflict::Ignore),
            _ => return None,
        };
        let (table, filters) = self.diesel_target(&c.args[0])?;
        if kind == StatementKind::Insert && !filters.is_empty() {
            return None;
        }
        let mut w = Write::new(Library::Diesel, kind, table);
        w.conflict = conflict;
        for f in filters {
            if f.method == "find" {
                self.find_link(&mut w, f)?;
            } else {
                self.filter_link(&mut w, f)?;
            }
        }
        // `on_conflict(..)` starts the upsert; a `set`/`filter` after `do_update` belongs to it
        let mut do_update = false;
        for link in links {
            let name = link.method.to_string();
            let arg = link.args.first();
            match (name.as_str(), arg) {
                ("filter", Some(_)) if kind != StatementKind::Insert || do_update => {
                    self.filter_link(&mut w, link)?
                }
                ("set", Some(a)) if kind == StatementKind::Update || do_update => {
                    let assigns = self.diesel_assignments(a, &w.table)?;
                    w.assignments.extend(assigns);
                }
                ("values", Some(a)) if kind == StatementKind::Insert => {
                    w.values = self.diesel_values(a, &w.table)?;
                    if w.values.is_empty() {
                        w.values_of = self.struct_value(a);
                    }
                }
                ("on_conflict", Some(_)) if kind == StatementKind::Insert => {
                    w.upsert_span = Some(self.span_of(&link.method));
                }
                ("on_conflict_do_nothing" | "do_nothing", None)
                    if kind == StatementKind::Insert =>
                {
                    w.conflict = Conflict::Ignore;
                }
                ("do_update", None) if w.upsert_span.is_some() => {
                    do_update = true;
                    w.conflict = Conflict::DoUpdate;
                }
                ("returning", _) => {}
                _ => return None,
            }
            if let Some(s) = &mut w.upsert_span {
                *s = s.join(self.span_of(&link.paren_token.span.close()));
            }
        }
        Some(w)
    }

    /// A diesel query that locks the rows it reads until its transaction ends: `jobs::table
    /// .filter(..).or_filter(..).limit(n).for_update().skip_locked().load(tx)`. Its conditions
    /// are the read's filter, and the columns they require to lie before a time (the database's
    /// clock or the machine's: `updated_at.lt(Utc::now() - idle)`) are those whose time has
    /// passed. A query that locks nothing is not recorded.
    fn diesel_locking_read(&self, recv: &syn::Expr) -> Option<Write> {
        let (base, links) = chain(self.held(recv))?;
        let syn::Expr::Path(p) = strip(base) else {
            return None;
        };
        let table = self.diesel_table(&p.path)?;
        let mut w = Write::new(Library::Diesel, StatementKind::Select, table);
        let mut locked = false;
        for link in links {
            match (link.method.to_string().as_str(), link.args.len()) {
                ("filter" | "or_filter", 1) => self.filter_link(&mut w, link)?,
                ("find", 1) => self.find_link(&mut w, link)?,
                ("for_update" | "for_no_key_update", 0) => locked = true,
                ("skip_locked" | "no_wait" | "into_boxed" | "distinct", 0)
                | ("limit" | "offset" | "order" | "order_by" | "then_order_by" | "select", 1) => {}
                _ => return None,
            }
        }
        w.row_lock = locked;
        locked.then_some(w)
    }

    /// The table a diesel path names: `locks::table`, `schema::locks::table`, `dsl::locks`,
    /// `locks` (from `dsl`, when the function binds no such name).
    fn diesel_table(&self, p: &syn::Path) -> Option<String> {
        let path = segments(p);
        match path.as_slice() {
            [.., t, last] if last == "table" => Some(t.clone()),
            [.., d, t] if d == "dsl" => Some(t.clone()),
            [t] if !self.is_rust_value(t) => Some(t.clone()),
            _ => None,
        }
    }

    /// The table a diesel write targets and the `.filter(..)` links on it: `locks::table`,
    /// `schema::locks::table`, `locks` (from `dsl`), `dsl::locks`, or a local holding one.
    fn diesel_target<'e>(
        &'e self,
        e: &'e syn::Expr,
    ) -> Option<(String, Vec<&'e syn::ExprMethodCall>)> {
        let (base, links) = chain(self.held(e))?;
        if links
            .iter()
            .any(|l| !(l.method == "filter" || l.method == "find") || l.args.len() != 1)
        {
            return None;
        }
        let syn::Expr::Path(p) = strip(base) else {
            return None;
        };
        Some((self.diesel_table(&p.path)?, links))
    }

    /// `.find(key)`: the primary key's columns equal to the values given (a tuple for a
    /// composite key).
    fn find_link(&self, w: &mut Write, link: &syn::ExprMethodCall) -> Option<()> {
        let key = self.cx.orm.key_of(&w.table);
        let values: Vec<&syn::Expr> = match strip(&link.args[0]) {
            syn::Expr::Tuple(t) => t.elems.iter().collect(),
            x => vec![x],
        };
        if values.len() != key.len() {
            return None;
        }
        let mut columns = Vec::new();
        let mut comparisons = Vec::new();
        for (name, v) in key.into_iter().zip(values) {
            let col = Col {
                qualifier: None,
                name,
                incoming: false,
            };
            columns.push(col.clone());
            comparisons.push(Cmp {
                op: CmpOp::Eq,
                left: Operand {
                    columns: vec![col.clone()],
                    bare: Some(col),
                    span: Some(self.span_of(&link.method)),
                    ..Default::default()
                },
                right: self.operand(v, &w.table),
            });
        }
        let span = self
            .span_of(&link.method)
            .join(self.span_of(&link.paren_token.span.close()));
        w.add_condition(span, columns, comparisons);
        Some(())
    }

    /// `col.eq(v)`, or a tuple of them: the assignments of a diesel `set`.
    fn diesel_assignments(&self, e: &syn::Expr, table: &str) -> Option<Vec<Assign>> {
        match strip(e) {
            syn::Expr::Tuple(t) => t
                .elems
                .iter()
                .take(MAX_PARTS)
                .map(|x| self.diesel_assignment(x, table))
                .collect(),
            syn::Expr::Struct(s) => self.struct_assignments(s, table),
            x => Some(vec![self.diesel_assignment(x, table)?]),
        }
    }

    fn diesel_assignment(&self, e: &syn::Expr, table: &str) -> Option<Assign> {
        let syn::Expr::MethodCall(m) = strip(e) else {
            return None;
        };
        if m.method != "eq" || m.args.len() != 1 {
            return None;
        }
        let col = self.column(&m.receiver, table)?;
        Some(Assign {
            column: col.name,
            value: self.operand(&m.args[0], table),
        })
    }

    /// The values of a diesel `values(..)`: assignments, an `Insertable` struct literal (its
    /// fields are the columns), or nothing known (a value built elsewhere).
    fn diesel_values(&self, e: &syn::Expr, table: &str) -> Option<Vec<Assign>> {
        match self.held(e) {
            x @ (syn::Expr::Tuple(_) | syn::Expr::MethodCall(_) | syn::Expr::Struct(_)) => {
                self.diesel_assignments(x, table)
            }
            _ => Some(Vec::new()),
        }
    }

    /// A parameter inserted whole (`.values(mutex)`, `.values(&lock)`), declared with a struct
    /// type (`mutex: &MutexLock`): its type and where it is.
    fn struct_value(&self, e: &syn::Expr) -> Option<StructValue> {
        let mut x = strip(e);
        while let syn::Expr::Reference(r) = x {
            x = strip(&r.expr);
        }
        let syn::Expr::Path(p) = x else { return None };
        let name = p.path.get_ident()?.to_string();
        if self.lookup(&name).is_some() {
            // a local of the same name hides the parameter
            return None;
        }
        let type_name = self
            .param_receivers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.clone())?;
        Some(StructValue {
            type_name,
            span: self.span_of(e),
        })
    }

    /// Where a Rust value comes from, for a finding to show: the initialiser of the local it
    /// is, when that reads the machine's clock (`let now = Some(Utc::now().naive_utc())`), or
    /// the field of a struct parameter it reads (`lock.expires_at` with `lock: &MutexLock`).
    fn rust_source(&self, e: &syn::Expr) -> (Option<Span>, Option<(String, String)>) {
        match strip(e) {
            // `Some(until)`
            syn::Expr::Call(c)
                if c.args.len() == 1 && path_last(&c.func).is_some_and(|(n, _)| n == "Some") =>
            {
                self.rust_source(&c.args[0])
            }
            syn::Expr::Path(p) => {
                let clock = p
                    .path
                    .get_ident()
                    .and_then(|n| self.lookup(&n.to_string()))
                    .filter(|b| {
                        b.expr
                            .as_deref()
                            .is_some_and(super::super::literal_times::reads_client_clock)
                    })
                    .and_then(|b| b.init);
                (clock, None)
            }
            syn::Expr::Field(f) => {
                let (syn::Expr::Path(p), syn::Member::Named(field)) = (strip(&f.base), &f.member)
                else {
                    return (None, None);
                };
                let Some(name) = p.path.get_ident().map(|n| n.to_string()) else {
                    return (None, None);
                };
                if self.lookup(&name).is_some() {
                    return (None, None);
                }
                let ty = self
                    .param_receivers
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, t)| (t.clone(), field.to_string()));
                (None, ty)
            }
            _ => (None, None),
        }
    }

    /// The fields of a struct literal as assignments (diesel's `Insertable`/`AsChangeset`).
    fn struct_assignments(&self, s: &syn::ExprStruct, table: &str) -> Option<Vec<Assign>> {
        if s.rest.is_some() {
            return None;
        }
        s.fields
            .iter()
            .take(MAX_PARTS)
            .map(|f| match &f.member {
                syn::Member::Named(n) => Some(Assign {
                    column: n.to_string(),
                    value: self.operand(&f.expr, table),
                }),
                syn::Member::Unnamed(_) => None,
            })
            .collect()
    }

    // ---- sea-orm ----

    /// The table of a sea-orm entity path's module part: `lock::Entity` → `lock`'s table,
    /// `Entity` → the file's entity, `JobLock` (a prelude's alias) → `job_lock`'s.
    fn entity_table(&self, prefix: &[String], own: &str) -> Option<(String, Option<String>)> {
        match prefix {
            [.., m, e] if e == own => Some(self.cx.orm.table_of(m)),
            [e] if e == own => self.cx.orm.own_table(),
            [.., alias]
                if alias != own
                    && alias.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    && !matches!(alias.as_str(), "Self" | "Column" | "ActiveModel" | "Model") =>
            {
                Some(self.cx.orm.table_of(&snake(alias)))
            }
            _ => None,
        }
    }

    /// `<entity>::update_many().filter(..).col_expr(..)`, `delete_many()`, `insert(am)` ...,
    /// executed by `exec`.
    fn sea_orm_chain(&self, recv: &syn::Expr) -> Option<Write> {
        let (c, path, links) = path_call_chain(recv)?;
        let (name, prefix) = path.split_last()?;
        let (table, entity) = self.entity_table(prefix, "Entity")?;
        let (kind, model) = match (name.as_str(), c.args.len()) {
            ("update_many", 0) => (StatementKind::Update, None),
            ("delete_many", 0) => (StatementKind::Delete, None),
            ("insert", 1) => (StatementKind::Insert, Some(&c.args[0])),
            ("update", 1) => (StatementKind::Update, Some(&c.args[0])),
            ("delete", 1) => (StatementKind::Delete, Some(&c.args[0])),
            _ => return None,
        };
        let mut w = Write::new(Library::SeaOrm, kind, table);
        w.entity = entity;
        if let Some(am) = model {
            let (_, lit) = self.active_model(am)?;
            self.model_fields(&mut w, lit)?;
        }
        for link in links {
            let name = link.method.to_string();
            match (name.as_str(), link.args.len()) {
                ("filter", 1) if kind != StatementKind::Insert => self.filter_link(&mut w, link)?,
                ("col_expr", 2) if kind == StatementKind::Update => {
                    let col = self.column(&link.args[0], &w.table)?;
                    let value = self.operand(&link.args[1], &w.table);
                    w.assignments.push(Assign {
                        column: col.name,
                        value,
                    });
                }
                ("set", 1) if kind == StatementKind::Update => {
                    let (_, lit) = self.active_model(&link.args[0])?;
                    self.model_fields(&mut w, lit)?;
                }
                ("on_conflict", 1) if kind == StatementKind::Insert => {
                    self.on_conflict(&mut w, &link.args[0])?;
                    w.upsert_span = Some(
                        self.span_of(&link.method)
                            .join(self.span_of(&link.paren_token.span.close())),
                    );
                }
                ("on_conflict_do_nothing" | "do_nothing", 0) if kind == StatementKind::Insert => {
                    w.conflict = Conflict::Ignore;
                }
                _ => return None,
            }
        }
        Some(w)
    }

    /// `OnConflict::column(..).do_nothing()`, `.update_column(..)`, `.update_columns([..])`,
    /// `.value(col, v)`, `.action_and_where(cond)`.
    fn on_conflict(&self, w: &mut Write, e: &syn::Expr) -> Option<()> {
        let (base, links) = chain(self.held(e))?;
        let syn::Expr::Call(c) = base else {
            return None;
        };
        let (name, full) = path_last(&c.func)?;
        if !full.ends_with(&format!("OnConflict::{name}"))
            || !matches!(name.as_str(), "column" | "columns")
        {
            return None;
        }
        for link in links {
            let name = link.method.to_string();
            match (name.as_str(), link.args.len()) {
                ("do_nothing", 0) => w.conflict = Conflict::Ignore,
                ("update_column" | "update_columns", 1) => {
                    w.conflict = Conflict::DoUpdate;
                    let cols = match strip(&link.args[0]) {
                        syn::Expr::Array(a) => a.elems.iter().take(MAX_PARTS).collect(),
                        x => vec![x],
                    };
                    for col in cols {
                        let col = self.column(col, &w.table)?;
                        w.assignments.push(Assign {
                            value: Operand {
                                columns: vec![Col {
                                    incoming: true,
                                    ..col.clone()
                                }],
                                bare: Some(Col {
                                    incoming: true,
                                    ..col.clone()
                                }),
                                span: Some(self.span_of(&link.args[0])),
                                ..Default::default()
                            },
                            column: col.name,
                        });
                    }
                }
                ("value", 2) => {
                    w.conflict = Conflict::DoUpdate;
                    let col = self.column(&link.args[0], &w.table)?;
                    let value = self.operand(&link.args[1], &w.table);
                    w.assignments.push(Assign {
                        column: col.name,
                        value,
                    });
                }
                ("action_and_where", 1) => self.filter_link(w, link)?,
                ("to_owned" | "clone", 0) => {}
                _ => return None,
            }
        }
        Some(())
    }

    /// An `ActiveModel` struct literal written at `e` or held by a local: its table and the
    /// literal.
    fn active_model<'e>(
        &'e self,
        e: &'e syn::Expr,
    ) -> Option<((String, Option<String>), &'e syn::ExprStruct)> {
        let mut cur = self.held(e);
        // `am.clone()`, `am.into_active_model()` of a literal
        for _ in 0..MAX_HOPS {
            match cur {
                syn::Expr::MethodCall(m)
                    if m.args.is_empty()
                        && matches!(
                            m.method.to_string().as_str(),
                            "clone" | "into_active_model"
                        ) =>
                {
                    cur = self.held(&m.receiver)
                }
                _ => break,
            }
        }
        let syn::Expr::Struct(s) = cur else {
            return None;
        };
        let path = segments(&s.path);
        let (last, prefix) = path.split_last()?;
        if last != "ActiveModel" {
            return None;
        }
        let table = match prefix {
            [.., m] => self.cx.orm.table_of(m),
            [] => self.cx.orm.own_table()?,
        };
        Some((table, s))
    }

    /// An active model's `.update(db)`, `.insert(db)` or `.delete(db)`.
    fn active_model_write(&self, method: &str, recv: &syn::Expr) -> Option<Write> {
        let ((table, entity), lit) = self.active_model(recv)?;
        let kind = match method {
            "update" => StatementKind::Update,
            "insert" => StatementKind::Insert,
            _ => StatementKind::Delete,
        };
        let mut w = Write::new(Library::SeaOrm, kind, table);
        w.entity = entity;
        self.model_fields(&mut w, lit)?;
        Some(w)
    }

    /// The fields of an active model literal: `Set` fields are written (inserted values of
    /// an insert), `Unchanged` ones are the row's key, matched by an update or delete (a delete
    /// matches every field it is given).
    fn model_fields(&self, w: &mut Write, lit: &syn::ExprStruct) -> Option<()> {
        let mut cols = Vec::new();
        let mut cmps = Vec::new();
        for f in lit.fields.iter().take(MAX_PARTS) {
            let syn::Member::Named(n) = &f.member else {
                return None;
            };
            let column = n.to_string();
            let (field, value) = match active_value(&f.expr) {
                Some(x) => x,
                None if is_not_set(&f.expr) => continue,
                None => return None,
            };
            let value = self.operand(value, &w.table);
            let matched = match (field, w.kind) {
                (Field::Unchanged, StatementKind::Insert) => continue,
                (Field::Unchanged, _) | (Field::Set, StatementKind::Delete) => true,
                (Field::Set, _) => false,
            };
            if matched {
                let col = Col {
                    qualifier: None,
                    name: column,
                    incoming: false,
                };
                cols.push(col.clone());
                cmps.push(Cmp {
                    op: CmpOp::Eq,
                    left: Operand {
                        columns: vec![col.clone()],
                        bare: Some(col),
                        span: Some(self.span_of(&f.member)),
                        ..Default::default()
                    },
                    right: value,
                });
            } else if w.kind == StatementKind::Insert {
                w.values.push(Assign { column, value });
            } else {
                w.assignments.push(Assign { column, value });
            }
        }
        if !cmps.is_empty() {
            w.add_condition(self.span_of(lit), cols, cmps);
        }
        Some(())
    }

    // ---- shared ----

    /// A `.filter(cond)` (or `action_and_where(cond)`) link: its condition, ANDed to the rest.
    fn filter_link(&self, w: &mut Write, link: &syn::ExprMethodCall) -> Option<()> {
        let (columns, comparisons) = self.condition(link.args.first()?, &w.table)?;
        let span = self
            .span_of(&link.method)
            .join(self.span_of(&link.paren_token.span.close()));
        w.add_condition(span, columns, comparisons);
        Some(())
    }

    /// The columns and comparisons of a condition; `None` when any part of it is not known.
    fn condition(&self, e: &syn::Expr, table: &str) -> Option<(Vec<Col>, Vec<Cmp>)> {
        let mut columns = Vec::new();
        let mut comparisons = Vec::new();
        let mut todo = vec![self.held(e)];
        let mut parts = 0;
        while let Some(x) = todo.pop() {
            parts += 1;
            if parts > MAX_PARTS {
                return None;
            }
            match strip(x) {
                syn::Expr::MethodCall(m) => {
                    let name = m.method.to_string();
                    match (name.as_str(), m.args.len()) {
                        ("and" | "or" | "add", 1) => {
                            todo.push(&m.receiver);
                            todo.push(&m.args[0]);
                        }
                        ("is_null" | "is_not_null", 0) => {
                            columns.push(self.column(&m.receiver, table)?)
                        }
                        (op, 1) => {
                            let op = cmp_op(op)?;
                            let col = self.column(&m.receiver, table)?;
                            let right = self.operand(&m.args[0], table);
                            columns.push(col.clone());
                            columns.extend(right.columns.iter().cloned());
                            comparisons.push(Cmp {
                                op,
                                left: Operand {
                                    columns: vec![col.clone()],
                                    bare: Some(col),
                                    span: Some(self.span_of(&*m.receiver)),
                                    ..Default::default()
                                },
                                right,
                            });
                        }
                        _ => return None,
                    }
                }
                // sea-orm's `Condition::all()` / `Condition::any()` that `add`s build on
                syn::Expr::Call(c) if c.args.is_empty() => {
                    let (name, full) = path_last(&c.func)?;
                    if !(full.ends_with(&format!("Condition::{name}"))
                        && matches!(name.as_str(), "all" | "any"))
                    {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        Some((columns, comparisons))
    }

    /// A column: diesel's `locks::owner`, `dsl::owner`, `owner` (a name the function does not
    /// bind, from a `dsl` glob import), `.nullable()` of one, `excluded(col)`; sea-orm's
    /// `Column::Owner`, `lock::Column::Owner`, `Expr::col(Column::Owner)`.
    fn column(&self, e: &syn::Expr, table: &str) -> Option<Col> {
        let mut cur = strip(e);
        let mut incoming = false;
        for _ in 0..MAX_HOPS {
            match cur {
                syn::Expr::MethodCall(m)
                    if m.args.is_empty()
                        && matches!(
                            m.method.to_string().as_str(),
                            "nullable" | "assume_not_null" | "into_simple_expr" | "into_expr"
                        ) =>
                {
                    cur = strip(&m.receiver)
                }
                syn::Expr::Call(c) if c.args.len() == 1 => {
                    let (name, _) = path_last(&c.func)?;
                    match name.as_str() {
                        "excluded" => incoming = true,
                        "col" => {}
                        _ => return None,
                    }
                    cur = strip(&c.args[0]);
                }
                _ => break,
            }
        }
        let syn::Expr::Path(p) = cur else {
            return None;
        };
        if is_db_clock_path(&p.path) {
            return None;
        }
        let path = segments(&p.path);
        let lower = |s: &str| s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
        let (name, qualifier) = match path.as_slice() {
            [.., c, v] if c == "Column" => (snake(v), None),
            [.., t, d, c] if d == "dsl" && lower(c) => (c.clone(), Some(t.clone())),
            [d, c] if d == "dsl" && lower(c) => (c.clone(), None),
            [.., t, c] if lower(t) && lower(c) && t != "self" && t != "super" => {
                (c.clone(), Some(t.clone()))
            }
            [c] if lower(c) && !self.is_rust_value(c) => (c.clone(), None),
            _ => return None,
        };
        // a column of the written table is its own; another table's keeps its name
        let qualifier = qualifier.filter(|q| q != table);
        Some(Col {
            qualifier,
            name,
            incoming,
        })
    }

    /// A value given to the database: columns and the database clock in it are SQL; any
    /// other part is a Rust value, bound as a parameter.
    fn operand(&self, e: &syn::Expr, table: &str) -> Operand {
        let whole = strip(e);
        let mut v = Operand {
            span: Some(self.span_of(e)),
            ..Default::default()
        };
        let mut rust_value = false;
        let mut todo = vec![whole];
        let mut parts = 0;
        while let Some(x) = todo.pop() {
            parts += 1;
            if parts > MAX_PARTS {
                rust_value = true;
                break;
            }
            let x = strip(x);
            if let Some(c) = self.column(x, table) {
                v.columns.push(c);
                continue;
            }
            match x {
                syn::Expr::Binary(b) => {
                    todo.push(&b.left);
                    todo.push(&b.right);
                }
                syn::Expr::Lit(_) => {}
                // arithmetic in the query: `Expr::col(Column::Fence).add(1)`
                syn::Expr::MethodCall(m)
                    if m.args.len() == 1
                        && matches!(
                            m.method.to_string().as_str(),
                            "add" | "sub" | "mul" | "div"
                        ) =>
                {
                    todo.push(&m.receiver);
                    todo.push(&m.args[0]);
                }
                // diesel's interval DSL: `30.seconds()`
                syn::Expr::MethodCall(m)
                    if m.args.is_empty() && matches!(strip(&m.receiver), syn::Expr::Lit(_)) => {}
                // SQL `NULL`: `None`, `Option::<String>::None`; a named constant
                // (`NaiveDateTime::UNIX_EPOCH`), an enum variant (`JobState::Running`)
                syn::Expr::Path(p)
                    if enum_variant(&p.path).is_some()
                        || p.path.segments.last().is_some_and(|s| {
                            let n = s.ident.to_string();
                            n == "None" || is_constant_name(&n)
                        }) => {}
                // a constant taken out of its `Option`/`Result`: `from_timestamp_opt(0, 0).unwrap()`
                syn::Expr::MethodCall(m)
                    if m.args.len() <= 1
                        && matches!(m.method.to_string().as_str(), "unwrap" | "expect") =>
                {
                    todo.push(&m.receiver)
                }
                // `diesel::dsl::now` whatever the locals; a bare `now` unless a local holds it
                syn::Expr::Path(p)
                    if is_db_clock_path(&p.path)
                        && (p.path.segments.len() > 1 || !self.is_rust_value("now")) =>
                {
                    v.clock = true
                }
                // sea-orm: `Expr::current_timestamp()`, `Expr::value(x)`, `Expr::val(x)`
                syn::Expr::Call(c) => match path_last(&c.func) {
                    Some((n, full)) if full.ends_with(&format!("Expr::{n}")) => {
                        match (n.as_str(), c.args.len()) {
                            ("current_timestamp", 0) => v.clock = true,
                            ("value" | "val", 1) => todo.push(&c.args[0]),
                            _ => v.call = true,
                        }
                    }
                    // a value made of constants (`Some(false)`, `NaiveDateTime::from_timestamp(0,
                    // 0)`): no client value; a call without arguments (`Utc::now()`) is one
                    _ if !c.args.is_empty() && matches!(strip(&c.func), syn::Expr::Path(_)) => {
                        todo.extend(c.args.iter())
                    }
                    _ => rust_value = true,
                },
                _ => rust_value = true,
            }
        }
        v.param = rust_value;
        if rust_value {
            (v.clock_read, v.from_field) = self.rust_source(whole);
        }
        v.bare = self.column(whole, table);
        v.bare_param = rust_value && v.columns.is_empty() && !v.clock && !v.call;
        v.named_literal = constant_name(whole);
        v.client_clock = rust_value
            && (v.clock_read.is_some() || super::super::literal_times::reads_client_clock(whole));
        v
    }
}

/// A name written like a constant: upper case letters, digits and `_`, with a letter.
fn is_constant_name(n: &str) -> bool {
    n.chars().any(|c| c.is_ascii_uppercase())
        && n.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The variant an enum path names (`JobState::Running`): a type and a variant, both
/// capitalised words (not `SCREAMING` constants, not `None`).
/// What a constant names, in lower case: a non-empty string literal's text, or an enum
/// variant (`JobState::Running` names `running`).
pub(super) fn constant_name(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) if !s.value().is_empty() => Some(s.value().to_lowercase()),
        syn::Expr::Path(p) => enum_variant(&p.path).map(|n| n.to_lowercase()),
        _ => None,
    }
}

fn enum_variant(p: &syn::Path) -> Option<String> {
    let capitalised = |s: &syn::PathSegment| {
        let n = s.ident.to_string();
        (n.starts_with(|c: char| c.is_ascii_uppercase())
            && n.contains(|c: char| c.is_ascii_lowercase()))
        .then_some(n)
    };
    let mut rev = p.segments.iter().rev();
    let (variant, ty) = (rev.next()?, rev.next()?);
    capitalised(ty)?;
    capitalised(variant).filter(|n| n != "None")
}

/// diesel's `now` (`diesel::dsl::now`, `dsl::now`, `now` from a glob import).
fn is_db_clock_path(p: &syn::Path) -> bool {
    let path = segments(p);
    matches!(path.last().map(String::as_str), Some("now"))
        && (path.len() == 1 || path.iter().any(|s| s == "dsl" || s == "diesel"))
}

/// `Set(v)`, `ActiveValue::Set(v)`, `ActiveValue::set(v)`, `Unchanged(v)`: what the field
/// does and its value.
fn active_value(e: &syn::Expr) -> Option<(Field, &syn::Expr)> {
    let syn::Expr::Call(c) = strip(e) else {
        return None;
    };
    let (name, _) = path_last(&c.func)?;
    let field = match name.as_str() {
        "Set" | "set" => Field::Set,
        "Unchanged" | "unchanged" => Field::Unchanged,
        _ => return None,
    };
    (c.args.len() == 1).then(|| (field, &c.args[0]))
}

/// `NotSet`, `ActiveValue::NotSet`, `Default::default()`: a field left alone.
fn is_not_set(e: &syn::Expr) -> bool {
    match strip(e) {
        syn::Expr::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "NotSet"),
        syn::Expr::Call(c) => {
            c.args.is_empty()
                && path_last(&c.func).is_some_and(|(n, _)| n == "default" || n == "not_set")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use locklint_ir::source::SourceFile;
    use locklint_ir::sql::{CmpOp, Conflict, Statement, StatementKind};
    use locklint_ir::{Event, Executor, FileIr, Library, Origin};

    /// The front-ends on a file, on a stack as large as the engine's (syn's parse of a long
    /// chain recurses).
    fn analyze(path: &str, text: &str) -> FileIr {
        let file = SourceFile::new(path.into(), text.to_string());
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || crate::analyze(0, file))
            .unwrap()
            .join()
            .unwrap()
    }

    /// The one statement of a file, with its run.
    fn only(ir: &FileIr) -> &Statement {
        assert_eq!(ir.sql.statements.len(), 1, "{:#?}", ir.sql.statements);
        &ir.sql.statements[0]
    }

    fn compared(st: &Statement) -> Vec<(String, CmpOp)> {
        st.filter
            .iter()
            .flat_map(|f| &f.comparisons)
            .filter_map(|c| Some((c.left.bare.as_ref()?.name.clone(), c.op)))
            .collect()
    }

    fn written(st: &Statement) -> Vec<&str> {
        st.written().collect()
    }

    const DIESEL: &str = "use diesel::prelude::*;\n";
    const SEA_ORM: &str = "use sea_orm::{entity::prelude::*, ActiveValue::{Set, Unchanged}};\n";

    #[test]
    fn a_diesel_update_is_a_statement_with_its_filter_and_assignments() {
        let ir = analyze(
            "runs.rs",
            &format!(
                "{DIESEL}async fn f(conn: &mut AsyncPgConnection, p: &str, token: i64) {{
                    diesel::update(invoice_runs::table.filter(invoice_runs::period.eq(p)))
                        .set((invoice_runs::status.eq(\"closed\"), invoice_runs::fence.eq(token)))
                        .filter(invoice_runs::fence.lt(token))
                        .execute(conn).await.unwrap();
                }}"
            ),
        );
        let st = only(&ir);
        assert_eq!(st.kind, StatementKind::Update);
        assert_eq!(st.table.as_deref(), Some("invoice_runs"));
        assert_eq!(written(st), ["status", "fence"]);
        assert_eq!(
            compared(st),
            [
                ("period".to_string(), CmpOp::Eq),
                ("fence".to_string(), CmpOp::Lt)
            ]
        );
        let fence = &st.filter.as_ref().unwrap().comparisons[1];
        assert!(fence.right.bare_param, "a Rust value is a bound parameter");
        let status = &st.assignments[0].value;
        assert!(status.named_literal.is_some() && status.is_constant());
        let ir_none = analyze(
            "x.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str) {{
                    diesel::update(locks::table.filter(locks::name.eq(n)))
                        .set((locks::owner.eq(None::<String>), locks::until.eq(Option::<i64>::None)))
                        .execute(conn).unwrap();
                }}"
            ),
        );
        for a in &only(&ir_none).assignments {
            assert!(
                a.value.is_constant() && a.value.named_literal.is_none(),
                "NULL"
            );
        }
        // the statement has no text, and runs where `execute` is called, on a connection
        let emb = &ir.embedded[st.embedded];
        assert_eq!(
            emb.origin,
            Origin::Orm {
                library: Library::Diesel,
                entity: None
            }
        );
        assert!(emb.text.is_empty() && emb.statement.is_none());
        let exec = emb.exec.as_ref().unwrap();
        assert_eq!(exec.executor, Executor::Connection);
        assert_eq!(exec.method, "execute");
        assert_eq!(exec.conn.as_deref(), Some("conn"));
        assert!(ir.functions[0]
            .events
            .iter()
            .any(|e| matches!(e, Event::Sql { embedded, .. } if *embedded == st.embedded)));
        let shown = &ir.file.text[st.span.start..st.span.end];
        assert!(shown.starts_with("diesel::update(") && shown.ends_with("execute(conn)"));
    }

    #[test]
    fn diesel_dsl_names_and_upserts() {
        let ir = analyze(
            "locks.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str, me: &str) {{
                    use schema::job_locks::dsl::*;
                    diesel::insert_into(job_locks)
                        .values((name.eq(n), owner.eq(me), expires_at.eq(now + 30.seconds())))
                        .on_conflict(name)
                        .do_update()
                        .set((owner.eq(excluded(owner)), expires_at.eq(excluded(expires_at))))
                        .filter(expires_at.lt(now))
                        .execute(conn).unwrap();
                }}"
            ),
        );
        let st = only(&ir);
        assert_eq!(st.kind, StatementKind::Insert);
        assert_eq!(st.table.as_deref(), Some("job_locks"));
        assert_eq!(st.conflict, Conflict::DoUpdate);
        assert!(st.upsert_span.is_some());
        let v: Vec<_> = st.values.iter().map(|a| a.column.as_str()).collect();
        assert_eq!(v, ["name", "owner", "expires_at"]);
        assert!(st.values[1].value.bare_param, "`me` is the function's");
        assert!(st.values[2].value.clock && !st.values[2].value.param);
        assert!(st.assignments[0].value.bare.as_ref().unwrap().incoming);
        assert_eq!(compared(st), [("expires_at".to_string(), CmpOp::Lt)]);
        let right = &st.filter.as_ref().unwrap().comparisons[0].right;
        assert!(right.clock && !right.param);
        // a local `now` is the client's time; `diesel::dsl::now` stays the database's
        let ir = analyze(
            "locks.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str) {{
                    let now = chrono::Utc::now();
                    diesel::update(job_locks::table.filter(job_locks::name.eq(n)))
                        .set((job_locks::taken_at.eq(diesel::dsl::now), job_locks::expires_at.eq(now)))
                        .execute(conn).unwrap();
                }}"
            ),
        );
        let [db, client] = &only(&ir).assignments[..] else {
            panic!()
        };
        assert!(db.value.clock && !db.value.param);
        assert!(client.value.bare_param && !client.value.clock);
    }

    #[test]
    fn a_struct_parameter_inserted_whole_names_its_type() {
        let ir = analyze(
            "store.rs",
            &format!(
                "{DIESEL}fn create(conn: &mut PgConnection, lock: &JobLock) {{
                    diesel::insert_into(job_locks::table).values(lock).execute(conn).unwrap();
                }}
                fn copy(conn: &mut PgConnection, lock: &JobLock) {{
                    let lock = renamed(lock);
                    diesel::insert_into(job_locks::table).values(&lock).execute(conn).unwrap();
                }}"
            ),
        );
        let of: Vec<_> = ir
            .sql
            .statements
            .iter()
            .map(|s| s.values_of.as_ref().map(|v| v.type_name.as_str()))
            .collect();
        // a local of the same name is no longer the parameter
        assert_eq!(of, [Some("JobLock"), None]);
        let v = ir.sql.statements[0].values_of.as_ref().unwrap();
        assert_eq!(&ir.file.text[v.span.start..v.span.end], "lock");
    }

    #[test]
    fn a_rust_value_says_where_its_clock_was_read() {
        let ir = analyze(
            "locks.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str, lock: &JobLock) {{
                    let now = Some(chrono::Utc::now().naive_utc());
                    let ttl = lock.ttl;
                    diesel::update(job_locks::table.filter(job_locks::name.eq(n).and(job_locks::expires_at.lt(now))))
                        .set((job_locks::expires_at.eq(lock.expires_at), job_locks::ttl.eq(ttl)))
                        .execute(conn).unwrap();
                }}"
            ),
        );
        let st = only(&ir);
        let cmps = &st.filter.as_ref().unwrap().comparisons;
        let lt = cmps
            .iter()
            .find(|c| c.op == CmpOp::Lt)
            .expect("the expiry comparison");
        let read = lt.right.clock_read.expect("`now` was read from the clock");
        assert!(ir.file.text[read.start..read.end].starts_with("Some(chrono::Utc::now()"));
        let [expires, ttl] = &st.assignments[..] else {
            panic!()
        };
        assert_eq!(
            expires.value.from_field,
            Some(("JobLock".to_string(), "expires_at".to_string()))
        );
        assert!(expires.value.clock_read.is_none());
        // a local that does not read the clock says nothing
        assert!(ttl.value.clock_read.is_none() && ttl.value.from_field.is_none());
    }

    #[test]
    fn a_diesel_locking_read_records_its_rows_and_the_times_that_passed() {
        let ir = analyze(
            "x.rs",
            &format!(
                "{DIESEL}fn f(pool: &Pool, n: i64) {{
                    retry! {{ async
                        in_transaction!(pool, |tx| {{
                            let picked: Vec<Task> = tasks::table
                                .filter(tasks::status.eq(TaskStatus::Queued).and(tasks::run_at.le(n)))
                                .or_filter(tasks::status.eq(TaskStatus::Running).and(tasks::heartbeat_at.lt(Utc::now() - STALE)))
                                .limit(n)
                                .for_update()
                                .skip_locked()
                                .load(tx)?;
                            Ok(picked)
                        }})?
                    }}
                }}
                fn g(conn: &mut PgConnection) {{
                    let all: Vec<Task> = tasks::table.filter(tasks::status.eq(TaskStatus::Running)).load(conn).unwrap();
                }}"
            ),
        );
        // the read inside the macro's body is the only statement: a read that locks nothing is not one
        let st = only(&ir);
        assert_eq!(st.kind, StatementKind::Select);
        assert_eq!(
            (st.table.as_deref(), st.reads.as_deref()),
            (None, Some("tasks"))
        );
        let rl = st.row_lock.as_ref().expect("rows locked");
        assert_eq!(rl.tables, ["tasks"]);
        // the machine's clock is a time that passed; a bound value is not known to be one
        assert_eq!(rl.passed, ["heartbeat_at"]);
        let states: Vec<Option<&str>> = st
            .read_filter
            .iter()
            .flat_map(|f| &f.comparisons)
            .filter(|c| c.left.bare.as_ref().is_some_and(|c| c.name == "status"))
            .map(|c| c.right.named_literal.as_deref())
            .collect();
        assert_eq!(states, [Some("queued"), Some("running")]);
    }

    #[test]
    fn diesel_do_nothing_delete_and_a_local_target() {
        let ir = analyze(
            "x.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str) {{
                    diesel::insert_into(payouts::table)
                        .values(&NewPayout {{ period: n, amount: 3 }})
                        .on_conflict((payouts::period, payouts::account))
                        .do_nothing()
                        .execute(conn).unwrap();
                    let mine = job_locks::table.filter(job_locks::name.eq(n));
                    diesel::delete(mine).execute(conn).unwrap();
                    diesel::replace_into(job_locks::table)
                        .values(job_locks::name.eq(n))
                        .execute(conn).unwrap();
                }}"
            ),
        );
        let [ins, del, replace] = ir.sql.statements.as_slice() else {
            panic!("{:#?}", ir.sql.statements)
        };
        assert_eq!(
            (replace.kind, replace.conflict),
            (StatementKind::Insert, Conflict::Replace)
        );
        assert_eq!(replace.values[0].column, "name");
        assert_eq!(ins.conflict, Conflict::Ignore);
        assert_eq!(ins.values.len(), 2);
        assert_eq!(del.kind, StatementKind::Delete);
        assert_eq!(del.table.as_deref(), Some("job_locks"));
        assert_eq!(compared(del), [("name".to_string(), CmpOp::Eq)]);
    }

    #[test]
    fn diesel_find_matches_the_primary_key() {
        let ir = analyze(
            "x.rs",
            &format!(
                "{DIESEL}
                diesel::table! {{
                    #[sql_name = \"job_locks\"]
                    job_locks (name) {{ name -> Text, owner -> Text, }}
                }}
                table! {{ app.shard_locks (shard, name) {{ shard -> Int4, name -> Text, }} }}
                fn f(conn: &mut PgConnection, n: &str, s: i32) {{
                    diesel::delete(job_locks::table.find(n)).execute(conn).unwrap();
                    diesel::update(jobs::table.find(7)).set(jobs::state.eq(\"done\")).execute(conn).unwrap();
                    diesel::delete(shard_locks::table.find((s, n))).execute(conn).unwrap();
                }}"
            ),
        );
        let [lock, job, shard] = ir.sql.statements.as_slice() else {
            panic!("{:#?}", ir.sql.statements)
        };
        assert_eq!(
            compared(lock),
            [("name".to_string(), CmpOp::Eq)],
            "the listed key"
        );
        assert!(
            lock.filter.as_ref().unwrap().comparisons[0]
                .right
                .bare_param
        );
        assert_eq!(
            compared(job),
            [("id".to_string(), CmpOp::Eq)],
            "diesel's default key"
        );
        assert!(job.filter.as_ref().unwrap().comparisons[0]
            .right
            .is_constant());
        assert_eq!(
            compared(shard),
            [
                ("shard".to_string(), CmpOp::Eq),
                ("name".to_string(), CmpOp::Eq)
            ]
        );
    }

    #[test]
    fn sea_orm_builders_and_active_models() {
        let ir = analyze(
            "leases.rs",
            &format!(
                "{SEA_ORM}
                pub mod job_lock {{
                    #[derive(DeriveEntityModel)]
                    #[sea_orm(table_name = \"job_locks\", schema_name = \"app\")]
                    pub struct Model {{ #[sea_orm(primary_key)] pub name: String, pub owner: String }}
                }}
                async fn f(db: &DatabaseConnection, n: &str, me: &str) {{
                    job_lock::Entity::update_many()
                        .col_expr(job_lock::Column::ExpiresAt, Expr::current_timestamp().add(30))
                        .filter(Condition::all().add(job_lock::Column::Name.eq(n)).add(job_lock::Column::Owner.eq(me)))
                        .exec(db).await.unwrap();
                    let am = job_lock::ActiveModel {{ name: Unchanged(n.to_owned()), owner: Set(String::new()), ..Default::default() }};
                    am.update(db).await.unwrap();
                    Lease::delete_many().filter(lease::Column::Holder.is_null()).exec(db).await.unwrap();
                }}"
            ),
        );
        let [renew, release, sweep] = ir.sql.statements.as_slice() else {
            panic!("{:#?}", ir.sql.statements)
        };
        assert_eq!(
            renew.table.as_deref(),
            Some("job_locks"),
            "the declared table"
        );
        assert_eq!(written(renew), ["expires_at"]);
        assert!(renew.assignments[0].value.clock);
        assert_eq!(
            compared(renew),
            [
                ("owner".to_string(), CmpOp::Eq),
                ("name".to_string(), CmpOp::Eq)
            ]
        );
        assert_eq!(release.kind, StatementKind::Update);
        assert_eq!(written(release), ["owner"]);
        assert_eq!(compared(release), [("name".to_string(), CmpOp::Eq)]);
        assert_eq!(
            ir.embedded[release.embedded].exec.as_ref().unwrap().method,
            "update"
        );
        assert_eq!(
            sweep.table.as_deref(),
            Some("lease"),
            "a prelude alias names its module"
        );
        assert_eq!(sweep.filter.as_ref().unwrap().columns[0].name, "holder");
        let origin = |st: &Statement| ir.embedded[st.embedded].origin.clone();
        let sea_orm = |entity: Option<&str>| Origin::Orm {
            library: Library::SeaOrm,
            entity: entity.map(str::to_string),
        };
        assert_eq!(origin(renew), sea_orm(None), "declared here");
        assert_eq!(origin(release), sea_orm(None));
        assert_eq!(
            origin(sweep),
            sea_orm(Some("lease")),
            "for the project to resolve"
        );
        assert_eq!(
            ir.orm_tables,
            [("job_lock".to_string(), "job_locks".to_string())]
        );
    }

    #[test]
    fn sea_orm_inserts_with_conflicts() {
        let ir = analyze(
            "job_lock.rs",
            &format!(
                "{SEA_ORM}
                #[sea_orm(table_name = \"job_locks\")]
                pub struct Model {{ pub name: String }}
                async fn f(db: &DatabaseConnection, n: &str, me: &str) {{
                    let am = ActiveModel {{ name: Set(n.to_owned()), owner: Set(me.to_owned()) }};
                    Entity::insert(am.clone())
                        .on_conflict(OnConflict::column(Column::Name).update_columns([Column::Owner]).action_and_where(Expr::col(Column::ExpiresAt).lt(Expr::current_timestamp())).to_owned())
                        .exec(db).await.unwrap();
                    Entity::insert(am).on_conflict(OnConflict::column(Column::Name).do_nothing().to_owned()).exec(db).await.unwrap();
                }}"
            ),
        );
        let [take, add] = ir.sql.statements.as_slice() else {
            panic!("{:#?}", ir.sql.statements)
        };
        assert_eq!(take.table.as_deref(), Some("job_locks"));
        assert_eq!(take.conflict, Conflict::DoUpdate);
        assert_eq!(take.values.len(), 2);
        assert_eq!(take.assignments[0].column, "owner");
        assert!(take.assignments[0].value.bare.as_ref().unwrap().incoming);
        assert_eq!(compared(take), [("expires_at".to_string(), CmpOp::Lt)]);
        assert_eq!(add.conflict, Conflict::Ignore);
    }

    #[test]
    fn reads_and_unknown_shapes_give_nothing() {
        for body in [
            // reads
            "job_locks::table.filter(job_locks::name.eq(n)).load::<Lock>(conn).unwrap();",
            "job_lock::Entity::find().filter(job_lock::Column::Name.eq(n)).all(db).await.unwrap();",
            // a changeset built elsewhere, a condition it does not know, a found row
            "diesel::update(job_locks::table).set(&changes).execute(conn).unwrap();",
            "diesel::update(job_locks::table.filter(job_locks::name.like(n))).set(job_locks::owner.eq(n)).execute(conn).unwrap();",
            "diesel::update(job_locks::table.find((n, n))).set(job_locks::owner.eq(n)).execute(conn).unwrap();",
            "diesel::delete(&row).execute(conn).unwrap();",
            // an active model whose type is not written
            "row.update(db).await.unwrap();",
            // not diesel's
            "other::update(job_locks::table).set(job_locks::owner.eq(n)).execute(conn).unwrap();",
        ] {
            let ir = analyze(
                "x.rs",
                &format!(
                    "{DIESEL}{SEA_ORM}async fn f(conn: &mut PgConnection, db: &DatabaseConnection, n: &str, changes: Changes, row: Lock) {{ {body} }}"
                ),
            );
            assert!(ir.sql.statements.is_empty(), "{body}: {:#?}", ir.sql.statements);
        }
        // a file that names no ORM
        let ir = analyze(
            "x.rs",
            "fn f(conn: &mut C, n: &str) { update(locks.filter(name.eq(n))).set(owner.eq(n)).execute(conn); }",
        );
        assert!(ir.sql.statements.is_empty());
    }

    #[test]
    fn a_long_chain_is_read_without_recursion() {
        let filters = ".filter(job_locks::name.eq(n))".repeat(60);
        let ir = analyze(
            "x.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str) {{ diesel::delete(job_locks::table{filters}).execute(conn).unwrap(); }}"
            ),
        );
        assert_eq!(only(&ir).filter.as_ref().unwrap().comparisons.len(), 60);
        let filters = ".filter(job_locks::name.eq(n))".repeat(100);
        let ir = analyze(
            "x.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str) {{ diesel::delete(job_locks::table{filters}).execute(conn).unwrap(); }}"
            ),
        );
        assert!(ir.sql.statements.is_empty(), "past the bound: not read");
        let ands = ".and(job_locks::name.eq(n))".repeat(300);
        let ir = analyze(
            "x.rs",
            &format!(
                "{DIESEL}fn f(conn: &mut PgConnection, n: &str) {{ diesel::delete(job_locks::table.filter(job_locks::name.eq(n){ands})).execute(conn).unwrap(); }}"
            ),
        );
        assert!(ir.sql.statements.is_empty(), "a condition past the bound");
    }
}
