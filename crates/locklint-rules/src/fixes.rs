//! Building fixes for the Redis rules: text edits in the code's own style (typed redis-rs,
//! `redis::cmd` builders, fred), with an applicability that drops when the code is unusual.

use locklint_ir::diagnostic::{Applicability, Edit, Fix, Location};
use locklint_ir::source::{FileRef, Span};
use locklint_ir::{Channel, OpKind, ResultUse};
use locklint_project::TraceOp;

/// The less certain of two applicabilities.
pub fn worst(a: Applicability, b: Applicability) -> Applicability {
    fn rank(a: Applicability) -> u8 {
        match a {
            Applicability::Safe => 0,
            Applicability::Unsafe => 1,
            Applicability::DisplayOnly => 2,
        }
    }
    if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// A fix from edits; `None` when there are none.
pub fn fix(message: String, applicability: Applicability, edits: Vec<Edit>) -> Option<Fix> {
    (!edits.is_empty()).then_some(Fix {
        message,
        applicability,
        edits,
    })
}

/// The width rustfmt keeps code within.
const MAX_WIDTH: usize = 100;

/// Lays out the operation's statement again when the fix would push one of its lines past
/// [`MAX_WIDTH`] columns: the edits inside the statement become one edit of the whole
/// statement, printed by `prettyplease` (the layout rustfmt gives it) at the statement's
/// indentation. An operation in an `if`/`while` condition, a match guard, a block's tail
/// expression or a returned value has that expression laid out the same way. Statements
/// with comments, or that share their line with other code, are left as the edits make them.
pub fn reflow(o: &TraceOp, edits: Vec<Edit>) -> Vec<Edit> {
    // a line many times longer than rustfmt keeps lines is not code it lays out (generated
    // or minified): leave it as the edits make it
    let line = o.file.lines.line_span(&o.file.text, o.op.span.start);
    if line.len() > 10 * MAX_WIDTH {
        return edits;
    }
    let region = match o.op.stmt {
        Some(stmt) => Some((stmt, false)),
        None => expression_of(o).map(|c| (c, true)),
    };
    let Some((stmt, expression)) = region else {
        return edits;
    };
    let within = |e: &Edit| e.location.span.start >= stmt.start && e.location.span.end <= stmt.end;
    if !edits.iter().any(within) {
        return edits;
    }
    let text = &o.file.text;
    let line_start = o.file.line_span(stmt.start).start;
    let line_end = o.file.line_span(stmt.end).end;
    let before = &text[line_start..stmt.start];
    let indent = &before[..before.len() - before.trim_start().len()];
    let old = &text[stmt.start..stmt.end];
    if (!expression && !before.trim().is_empty()) || has_comments(old) {
        return edits;
    }
    let relative: Vec<(Span, String)> = edits
        .iter()
        .filter(|e| within(e))
        .map(|e| {
            let s = e.location.span;
            (
                Span::new(s.start - stmt.start, s.end - stmt.start),
                e.replacement.clone(),
            )
        })
        .collect();
    let Ok(new) = locklint_ir::diagnostic::apply_edits(old, &relative) else {
        return edits;
    };
    let whole = format!("{before}{new}{}", &text[stmt.end..line_end]);
    if whole.lines().all(|l| l.chars().count() <= MAX_WIDTH) {
        return edits;
    }
    let laid_out = if expression {
        layout_expression(&new, indent)
    } else {
        layout_statement(&new, indent)
    };
    let Some(laid_out) = laid_out else {
        return edits;
    };
    let mut out: Vec<Edit> = edits.into_iter().filter(|e| !within(e)).collect();
    out.push(edit(&o.file, stmt, laid_out));
    out.sort_by_key(|e| e.location.span.start);
    out
}

/// The `if`/`while` condition, match guard, tail expression or returned value the operation
/// is in (the innermost one).
fn expression_of(o: &TraceOp) -> Option<Span> {
    let expressions = expressions_of_function(o)?;
    let op = o.op.span;
    // expressions that hold the operation nest: the one starting last is the innermost
    let before = expressions.partition_point(|c| c.start <= op.start);
    expressions[..before]
        .iter()
        .rev()
        .take(64)
        .find(|c| c.end >= op.end)
        .copied()
}

/// The expressions of one function that [`reflow`] lays out: its file (address, length), its
/// span, and the spans.
type FunctionExpressions = (usize, usize, Span, std::rc::Rc<Vec<Span>>);

thread_local! {
    /// The expressions of the function last asked about.
    static EXPRESSIONS: std::cell::RefCell<Option<FunctionExpressions>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether an expression is control flow or a block (laid out as a whole, it would re-print
/// more than the operation's own code).
fn block_like(e: &syn::Expr) -> bool {
    matches!(
        e,
        syn::Expr::If(_)
            | syn::Expr::While(_)
            | syn::Expr::Loop(_)
            | syn::Expr::ForLoop(_)
            | syn::Expr::Match(_)
            | syn::Expr::Block(_)
            | syn::Expr::Unsafe(_)
            | syn::Expr::Closure(_)
            | syn::Expr::Async(_)
            | syn::Expr::TryBlock(_)
            | syn::Expr::Const(_)
    )
}

/// Every `if`/`while` condition, match guard, block tail expression (not itself a block or
/// control flow) and returned value of the operation's function, by start: parsed once for
/// all the operations of a function.
fn expressions_of_function(o: &TraceOp) -> Option<std::rc::Rc<Vec<Span>>> {
    let key = (
        std::sync::Arc::as_ptr(&o.file) as usize,
        o.file.text.len(),
        o.func.whole,
    );
    let cached = EXPRESSIONS.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(p, l, w, _)| (*p, *l, *w) == key)
            .map(|(_, _, _, v)| v.clone())
    });
    if let Some(v) = cached {
        return Some(v);
    }
    struct Expressions<'a> {
        text: &'a str,
        lines: locklint_ir::source::LineIndex,
        base: usize,
        found: Vec<Span>,
    }
    impl Expressions<'_> {
        fn consider(&mut self, e: &syn::Expr) {
            let sp = syn::spanned::Spanned::span(e);
            let at = |l: proc_macro2::LineColumn| {
                self.base + self.lines.offset(self.text, l.line, l.column)
            };
            self.found.push(Span::new(at(sp.start()), at(sp.end())));
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Expressions<'_> {
        fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
            self.consider(&i.cond);
            syn::visit::visit_expr_if(self, i);
        }
        fn visit_expr_while(&mut self, w: &'ast syn::ExprWhile) {
            self.consider(&w.cond);
            syn::visit::visit_expr_while(self, w);
        }
        fn visit_arm(&mut self, a: &'ast syn::Arm) {
            if let Some((_, guard)) = &a.guard {
                self.consider(guard);
            }
            syn::visit::visit_arm(self, a);
        }
        fn visit_block(&mut self, b: &'ast syn::Block) {
            if let Some(syn::Stmt::Expr(tail, None)) = b.stmts.last() {
                if !block_like(tail) {
                    self.consider(tail);
                }
            }
            syn::visit::visit_block(self, b);
        }
        fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
            if let Some(value) = r.expr.as_deref().filter(|e| !block_like(e)) {
                self.consider(value);
            }
            syn::visit::visit_expr_return(self, r);
        }
    }
    let func = o.func.whole;
    let text = o.file.text.get(func.start..func.end)?;
    let found = {
        let item: syn::ItemFn = syn::parse_str(text).ok()?;
        let mut v = Expressions {
            text,
            lines: locklint_ir::source::LineIndex::new(text),
            base: func.start,
            found: Vec::new(),
        };
        syn::visit::Visit::visit_item_fn(&mut v, &item);
        v.found
    };
    let mut found = found;
    found.sort_by_key(|s| s.start);
    let found = std::rc::Rc::new(found);
    EXPRESSIONS.with(|c| *c.borrow_mut() = Some((key.0, key.1, key.2, found.clone())));
    Some(found)
}

/// An expression printed by prettyplease as it would be on the right of `let _ =`, its lines
/// after the first indented by `indent`.
fn layout_expression(expr: &str, indent: &str) -> Option<String> {
    const HEAD: &str = "let __condition = ";
    let stmt = layout_statement(&format!("{HEAD}{expr};"), indent)?;
    Some(stmt.strip_prefix(HEAD)?.strip_suffix(';')?.to_string())
}

/// Whether Rust source text holds a comment (which re-printing would drop).
fn has_comments(code: &str) -> bool {
    use ra_ap_rustc_lexer::{tokenize, FrontmatterAllowed, TokenKind as K};
    tokenize(code, FrontmatterAllowed::No)
        .any(|t| matches!(t.kind, K::LineComment { .. } | K::BlockComment { .. }))
}

/// One statement printed by prettyplease, its lines after the first indented by `indent`.
fn layout_statement(stmt: &str, indent: &str) -> Option<String> {
    let file = syn::parse_file(&format!("fn f() {{\n{stmt}\n}}")).ok()?;
    let printed = prettyplease::unparse(&file);
    let body: Vec<&str> = printed.lines().collect();
    let inner = body.get(1..body.len().checked_sub(1)?)?;
    if inner.is_empty() {
        return None;
    }
    let lines: Vec<String> = inner
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let l = l.strip_prefix("    ").unwrap_or(l);
            match (i, l.is_empty()) {
                (0, _) | (_, true) => l.to_string(),
                _ => format!("{indent}{l}"),
            }
        })
        .collect();
    Some(lines.join("\n"))
}

pub fn edit(file: &FileRef, span: Span, replacement: impl Into<String>) -> Edit {
    Edit {
        location: Location::new(file.clone(), span),
        replacement: replacement.into(),
    }
}

fn snippet(file: &FileRef, span: Span) -> &str {
    file.text.get(span.start..span.end).unwrap_or("")
}

pub use locklint_project::ttl::Ttl;

/// How a fix writes a TTL.
trait WrittenTtl {
    fn is_literal(&self) -> bool;
    /// The text as a value of the integer type `ty`, cast when it is not a literal.
    fn typed(&self, ty: &str) -> String;
}

impl WrittenTtl for Ttl {
    fn is_literal(&self) -> bool {
        self.text.chars().all(|c| c.is_ascii_digit() || c == '_')
    }

    fn typed(&self, ty: &str) -> String {
        // `x as i64` becomes `x as u64` rather than a double cast
        for int in ["i32", "i64", "u32", "u64", "usize", "isize"] {
            if let Some(base) = self.text.strip_suffix(&format!(" as {int}")) {
                if !base.contains(' ') {
                    return format!("{base} as {ty}");
                }
            }
        }
        if self.is_literal() || self.text.ends_with(&format!("as {ty}")) {
            self.text.clone()
        } else if self
            .text
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | ':' | '(' | ')'))
        {
            format!("{} as {ty}", self.text)
        } else {
            format!("({}) as {ty}", self.text)
        }
    }
}

/// Arguments of a command as source texts (see [`locklint_project::ttl::command_args`]).
fn command_args(file: &FileRef, o: &TraceOp) -> Option<Vec<String>> {
    let args = locklint_project::ttl::command_args(file, o.op)?;
    Some(args.into_iter().map(|(text, _)| text).collect())
}

/// The expiry a separate `EXPIRE`/`PEXPIRE` sets.
pub fn expire_ttl(o: &TraceOp) -> Option<Ttl> {
    let cmd = o.op.command.to_ascii_lowercase();
    if !matches!(cmd.as_str(), "expire" | "pexpire") {
        return None;
    }
    o.ttl()
}

/// Whether the command's reply type changes when SETNX becomes `SET .. NX`: integer `1`/`0`
/// becomes `OK`/nil. What the caller reads it into decides whether that still works.
fn reply_applicability(o: &TraceOp) -> Applicability {
    if let ResultUse::Ignored(_) = o.result {
        return Applicability::Safe;
    }
    let Some(stmt) = o.op.stmt else {
        return Applicability::Unsafe;
    };
    let Ok(syn::Stmt::Local(l)) = syn::parse_str::<syn::Stmt>(snippet(&o.file, stmt)) else {
        return Applicability::Unsafe;
    };
    let syn::Pat::Type(t) = &l.pat else {
        return Applicability::Unsafe;
    };
    let ty = quote::ToTokens::to_token_stream(&t.ty)
        .to_string()
        .replace(' ', "");
    if ty == "bool" || ty == "()" || ty.starts_with("Option<") {
        Applicability::Safe
    } else if matches!(
        ty.as_str(),
        "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize"
    ) {
        Applicability::DisplayOnly
    } else {
        Applicability::Unsafe
    }
}

/// The whitespace that separates the links of a method chain ending at `end`, to keep a
/// multi-line chain multi-line.
fn chain_separator(file: &FileRef, span: Span) -> String {
    let text = snippet(file, span);
    let Some(dot) = text.rfind(".arg(") else {
        return String::new();
    };
    let before = &text[..dot];
    let ws_start = before.trim_end().len();
    let ws = &before[ws_start..];
    if ws.contains('\n') {
        ws.to_string()
    } else {
        String::new()
    }
}

/// Edits that make an acquire without expiry carry `ttl`, in the acquire's style, with how
/// safe they are as far as the acquire itself goes.
pub fn acquire_with_expiry(o: &TraceOp, ttl: &Ttl) -> Option<(Vec<Edit>, Applicability)> {
    if !matches!(
        o.op.kind,
        OpKind::Write {
            nx: true,
            expiry: None,
            ..
        }
    ) {
        return None;
    }
    let file = &o.file;
    let text = snippet(file, o.op.span);
    let mut applicability = if o.op.in_macro {
        Applicability::DisplayOnly
    } else {
        Applicability::Safe
    };
    let word = ttl.unit.word();
    if matches!(o.op.command.as_str(), "set_nx" | "set_options") && !super::client::is_redis_rs(o) {
        return None;
    }
    let edits = match o.op.command.as_str() {
        "set_nx" => {
            // rename the method and add the options argument, leaving the arguments (and any
            // comment between them) as they are
            if !text.starts_with("set_nx") || !text.ends_with(')') {
                return None;
            }
            applicability = worst(applicability, reply_applicability(o));
            let options = format!(
                "redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::{word}({}))",
                ttl.typed("u64")
            );
            let close = o.op.span.end - 1;
            let args = text[..text.len() - 1].trim_end();
            let start = o.op.span.start;
            vec![
                edit(
                    file,
                    Span::new(start, start + "set_nx".len()),
                    "set_options",
                ),
                if args.ends_with(',') {
                    let at = start + args.len();
                    edit(file, Span::new(at, at), format!(" {options},"))
                } else {
                    edit(file, Span::new(close, close), format!(", {options}"))
                },
            ]
        }
        "set_options" => {
            // the options argument: after the value, up to the closing parenthesis
            let (_, vspan) = o.op.value.as_ref()?;
            let rest_span = Span::new(vspan.end, o.op.span.end.checked_sub(1)?);
            let rest = snippet(file, rest_span);
            let opts = rest.trim_start().strip_prefix(',')?.trim();
            if opts.is_empty() || opts.contains(',') {
                return None;
            }
            let at = rest_span.start + rest.find(opts)? + opts.len();
            vec![edit(
                file,
                Span::new(at, at),
                format!(
                    ".with_expiration(redis::SetExpiry::{word}({}))",
                    ttl.typed("u64")
                ),
            )]
        }
        // fred: set(key, value, expiration, options, get)
        "set" => {
            let (_, vspan) = o.op.value.as_ref()?;
            let rest = snippet(file, Span::new(vspan.end, o.op.span.end));
            let after_comma = rest.trim_start().strip_prefix(',')?;
            let lead = rest.len() - after_comma.len();
            let trimmed = after_comma.trim_start();
            let start = vspan.end + lead + (after_comma.len() - trimmed.len());
            if !trimmed.starts_with("None") {
                return None;
            }
            let next = trimmed["None".len()..].trim_start();
            if !next.starts_with(',') {
                return None;
            }
            vec![edit(
                file,
                Span::new(start, start + "None".len()),
                format!(
                    "Some(fred::types::Expiration::{word}({}))",
                    ttl.typed("i64")
                ),
            )]
        }
        "SET ... NX" | "SETNX" => {
            if !text.ends_with(')') {
                return None;
            }
            let sep = chain_separator(file, o.op.span);
            let mut edits = Vec::new();
            let mut tail = String::new();
            if o.op.command == "SETNX" {
                let lower = text.to_ascii_lowercase();
                let at = lower.find("\"setnx\"")?;
                let s = o.op.span.start + at;
                edits.push(edit(file, Span::new(s, s + "\"setnx\"".len()), "\"SET\""));
                tail.push_str(&format!("{sep}.arg(\"NX\")"));
                applicability = worst(applicability, reply_applicability(o));
            }
            tail.push_str(&format!("{sep}.arg(\"{word}\"){sep}.arg({})", ttl.text));
            edits.push(edit(file, Span::new(o.op.span.end, o.op.span.end), tail));
            edits
        }
        _ => return None,
    };
    if let Channel::Pipeline { .. } = o.op.channel {
        applicability = Applicability::DisplayOnly;
    }
    Some((reflow(o, edits), applicability))
}

/// The span that deleting a statement removes: its whole lines when nothing else is on them.
pub fn statement_removal(file: &FileRef, stmt: Span) -> Span {
    let text = &file.text;
    let line_start = file.line_span(stmt.start).start;
    let line_end = (file.line_span(stmt.end).end + 1).min(text.len());
    let before_blank = text[line_start..stmt.start].trim().is_empty();
    let after_blank = text[stmt.end..line_end].trim().is_empty();
    if before_blank && after_blank {
        Span::new(line_start, line_end)
    } else {
        stmt
    }
}

/// Widen a removal that empties `if flag { .. }` (a plain condition, no `else`) to the whole
/// `if`, so no empty block is left behind.
pub fn widen_to_empty_if(file: &FileRef, removal: Span) -> Span {
    let text = &file.text;
    let before = &text[..removal.start];
    let after = &text[removal.end..];
    let Some(open) = before.trim_end().strip_suffix('{') else {
        return removal;
    };
    let Some(close_rest) = after.trim_start().strip_prefix('}') else {
        return removal;
    };
    let line_start = open.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let head = open[line_start..].trim();
    let Some(cond) = head.strip_prefix("if ") else {
        return removal;
    };
    let cond = cond.trim().trim_start_matches('!');
    let plain = !cond.is_empty()
        && cond
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    let rest_line = close_rest.split('\n').next().unwrap_or("");
    if !plain || !rest_line.trim().is_empty() {
        return removal;
    }
    let end = text.len() - close_rest.len() + rest_line.len();
    let end = if text[end..].starts_with('\n') {
        end + 1
    } else {
        end
    };
    Span::new(line_start, end)
}

/// The span that removes a command from a method chain: `.expire(..)` and the whitespace
/// before it, and a directly following `.ignore()`.
pub fn chain_link_removal(file: &FileRef, span: Span) -> Option<Span> {
    let text = &file.text;
    let before = text[..span.start].trim_end();
    let dot = before.strip_suffix('.')?;
    let start = dot.trim_end().len();
    let mut end = span.end;
    let after = &text[end..];
    let trimmed = after.trim_start();
    if let Some(rest) = trimmed.strip_prefix(".ignore()") {
        end += after.len() - rest.len();
    }
    Some(Span::new(start, end))
}

/// Identifiers a TTL expression reads that are bound by a `let` between `from` and `to`:
/// moving the expression before them would not compile.
pub fn bound_between(file: &FileRef, ttl: &Ttl, from: usize, to: usize) -> bool {
    if from >= to {
        return false;
    }
    let between = &file.text[from..to];
    ttl.text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars().next().is_some_and(|c| c.is_ascii_lowercase()) && *w != "self" && *w != "as"
        })
        .any(|w| {
            between.contains(&format!("let {w} "))
                || between.contains(&format!("let {w}:"))
                || between.contains(&format!("let mut {w}"))
                || between.contains(&format!("let {w}="))
        })
}

/// The constant value of an acquire replaced by a random token.
pub fn random_token(o: &TraceOp) -> Option<Fix> {
    let (_, vspan) = o.op.value.as_ref()?;
    fix(
        "write a random token instead of the constant (keep it to release and renew the lock)"
            .to_string(),
        Applicability::DisplayOnly,
        vec![edit(&o.file, *vspan, "uuid::Uuid::new_v4().to_string()")],
    )
}

/// A Lua script the fix refers to by a module-level constant.
struct ScriptConst {
    name: &'static str,
    doc: &'static str,
    lua: &'static str,
}

/// The expression that names `script` at `o`, and the edit that defines it when the file does
/// not yet: the constant is added after the file's leading `use` lines, or reused when the
/// file already has it. Every fix adds it at the same place, so two fixes of one file never
/// both add it (their edits clash; the second one is applied in the next pass and reuses it).
/// Falls back to the literal inside inline modules or when the name is taken.
fn script_expr(o: &TraceOp, script: &ScriptConst) -> (String, Option<Edit>) {
    let literal = format!("{:?}", script.lua);
    let definition = format!("const {}: &str = {literal};", script.name);
    // reuse a module-level definition (at the start of a line; one indented may sit in an
    // inline module, out of this function's scope)
    let names = locklint_frontend::rust::names::of_file(&o.file);
    let top_level = names.defines_at_top_level(&o.file.text, script.name, &definition);
    if top_level && o.func.item_slot.is_some() {
        return (script.name.to_string(), None);
    }
    let taken = names.is_declared(script.name);
    let Some(at) = o.func.item_slot.filter(|_| !taken) else {
        return (literal, None);
    };
    let item = format!("/// {}\n{definition}", script.doc);
    let insertion = if at == 0 {
        format!("{item}\n\n")
    } else {
        format!("\n\n{item}")
    };
    let edit = Edit {
        location: Location {
            file: o.file.clone(),
            span: Span::new(at, at),
        },
        replacement: insertion,
    };
    (script.name.to_string(), Some(edit))
}

fn release_script() -> ScriptConst {
    ScriptConst {
        name: "COMPARE_AND_DELETE",
        doc: "Deletes KEYS[1] only while it holds this holder's token (ARGV[1]).",
        lua: crate::scripts::COMPARE_AND_DELETE,
    }
}

fn renew_script(command: &'static str) -> ScriptConst {
    let (name, doc, lua) = match command {
        "expire" => (
            "COMPARE_AND_EXPIRE",
            "Sets KEYS[1]'s TTL to ARGV[2] s only while it holds this holder's token (ARGV[1]).",
            crate::scripts::COMPARE_AND_EXPIRE,
        ),
        _ => (
            "COMPARE_AND_PEXPIRE",
            "Sets KEYS[1]'s TTL to ARGV[2] ms only while it holds this holder's token (ARGV[1]).",
            crate::scripts::COMPARE_AND_PEXPIRE,
        ),
    };
    ScriptConst { name, doc, lua }
}

/// A variable or field that holds the holder's token, as an argument expression
/// (`&token`, `&self.token`), when one is in scope before the operation.
/// Names of variables and fields that hold the holder's token.
const TOKEN_NAMES: &[&str] = &[
    "token",
    "lock_token",
    "owner_token",
    "lease_token",
    "holder_token",
    "owner",
    "holder",
    "lock_value",
];

/// Whether a variable or field name says it holds the holder's token.
pub fn is_token_name(name: &str) -> bool {
    TOKEN_NAMES.contains(&name) || name.ends_with("_token")
}

pub fn token_in_scope(o: &TraceOp) -> Option<String> {
    let f = o.func;
    for name in TOKEN_NAMES {
        if f.params.iter().any(|p| p == name) {
            return Some(name.to_string());
        }
        let text = &o.file.text;
        let used = f
            .uses_of(name)
            .iter()
            .find(|(_, at)| *at < o.op.span.start && *at > f.span.start);
        if f.has_self
            && locklint_frontend::rust::names::of_file(&o.file).reads_self_field(name)
            && used.is_none()
        {
            return Some(format!("&self.{name}"));
        }
        if let Some((_, at)) = used {
            let field = text[..*at].trim_end().ends_with("self.");
            return Some(if field {
                format!("&self.{name}")
            } else {
                format!("&{name}")
            });
        }
    }
    None
}

fn is_fred(o: &TraceOp) -> bool {
    locklint_frontend::rust::names::of_file(&o.file).mentions_fred()
}

/// Replace a plain `DEL` / `UNLINK` of a lock with an atomic compare-and-delete: `DELEX key
/// IFEQ token` on Redis 8.4+, a Lua script before. Unsafe when a token is in scope (the
/// guess may be wrong), shown only otherwise.
pub fn guarded_release(o: &TraceOp, settings: &locklint_project::FixSettings) -> Option<Fix> {
    let cmd = o.op.command.as_str();
    if !matches!(cmd, "del" | "unlink" | "DEL" | "UNLINK") || is_fred(o) {
        return None;
    }
    let (token, mut applicability) = match token_in_scope(o) {
        Some(t) => (t, Applicability::Unsafe),
        None => ("&token".to_string(), Applicability::DisplayOnly),
    };
    if o.op.in_macro || matches!(o.op.channel, Channel::Pipeline { .. }) {
        applicability = Applicability::DisplayOnly;
    }
    let file = &o.file;
    let key = snippet(file, o.op.key_span);
    let delex = settings.has_delex();
    let mut span = o.op.span;
    let mut edits = Vec::new();
    let mut script = || {
        let (expr, define) = script_expr(o, &release_script());
        edits.extend(define);
        expr
    };
    let (replacement, message) = if cmd.chars().all(|c| c.is_ascii_lowercase()) {
        if command_args(file, o)?.len() != 1 || !super::client::is_redis_rs(o) {
            return None;
        }
        if delex {
            (
                format!("del_ex({key}, redis::ValueComparison::ifeq({token}))"),
                "delete only while the lock holds this holder's token (`DELEX key IFEQ token`)",
            )
        } else {
            let (at, call) = invocation(o)?;
            span = at;
            (
                format!(
                    "redis::Script::new({}).key({key}).arg({token}){call}",
                    script()
                ),
                "delete only while the lock holds this holder's token (a compare-and-delete script)",
            )
        }
    } else {
        if command_args(file, o)?.len() != 1 {
            return None;
        }
        let text = snippet(file, o.op.span);
        let base = text.find(['"'])?;
        let lead = &text[..base];
        if delex {
            (
                format!("{lead}\"DELEX\").arg({key}).arg(\"IFEQ\").arg({token})"),
                "delete only while the lock holds this holder's token (`DELEX key IFEQ token`)",
            )
        } else {
            (
                format!(
                    "{lead}\"EVAL\").arg({}).arg(1).arg({key}).arg({token})",
                    script()
                ),
                "delete only while the lock holds this holder's token (a compare-and-delete script)",
            )
        }
    };
    let message = if applicability == Applicability::Unsafe {
        format!("{message}; check that `{token}` is this holder's token")
    } else {
        format!("{message}; pass the token this holder wrote when it acquired the lock")
    };
    edits.push(edit(file, span, replacement));
    if span != o.op.span {
        drop_trait_import(o, span, &mut edits);
    }
    fix(message, applicability, reflow(o, edits))
}

/// Remove the command trait import a script fix leaves unused (see
/// [`super::leftovers::unused_trait_import`]). A script constant inserted at the end of that
/// `use` line takes the line's place.
fn drop_trait_import(o: &TraceOp, replaced: Span, edits: &mut Vec<Edit>) {
    let Some(removal) = super::leftovers::unused_trait_import(o, replaced) else {
        return;
    };
    let r = removal.location.span;
    let inside = |e: &Edit| {
        e.location.span.start >= r.start
            && e.location.span.start <= r.end
            && e.location.span.end <= r.end
    };
    if let Some(define) = edits.iter_mut().find(|e| inside(e)) {
        if define.location.span.start != define.location.span.end || r.is_empty() {
            return;
        }
        let mut merged = define.replacement.trim_start_matches('\n').to_string();
        merged.push('\n');
        if !removal_leaves_blank(o, r) {
            merged.push('\n');
        }
        *define = edit(&o.file, r, merged);
        return;
    }
    edits.push(removal);
}

/// Whether the text after a removed `use` line starts with a blank line.
fn removal_leaves_blank(o: &TraceOp, r: Span) -> bool {
    o.file
        .text
        .get(r.end..)
        .is_some_and(|t| t.starts_with('\n'))
}

/// How a typed redis-rs command becomes a script invocation: the span from its receiver to
/// the end of the call, and the tail that runs the script on the receiver,
/// `.invoke_async(&mut con)` before an `.await`, else `.invoke(&mut con)`. redis-rs's
/// `invoke`/`invoke_async` send `EVALSHA` and load the script when the server answers
/// `NOSCRIPT` (its `invoke_script` command sends `EVALSHA` alone). A receiver that is a
/// `&mut` parameter is passed as it is (reborrowed); another is borrowed. The reply type
/// comes from the call's turbofish, or is `()` when the statement discards the reply.
fn invocation(o: &TraceOp) -> Option<(Span, String)> {
    let file = &o.file;
    let receiver = o.op.receiver?;
    let recv = snippet(file, receiver).trim();
    if recv.is_empty() || recv.starts_with('&') || recv.starts_with('*') {
        return None;
    }
    let after = file.text.get(o.op.span.end..)?.trim_start();
    let method = if after.starts_with(".await") {
        "invoke_async"
    } else {
        "invoke"
    };
    let call = snippet(file, o.op.span);
    let reply = reply_type(call).or_else(|| {
        let stmt = o.op.stmt?;
        let stmt_text = snippet(file, stmt);
        // `con.del(&key)?;` / `con.del(&key).await?;`: the reply is dropped
        (stmt.start == receiver.start && !stmt_text.contains('=')).then(|| "()".to_string())
    });
    let turbofish = reply.map(|t| format!("::<{t}>")).unwrap_or_default();
    let plain = recv.chars().all(|c| c.is_alphanumeric() || c == '_');
    let con = if plain && super::client::is_mut_ref_param(o, recv) {
        recv.to_string()
    } else {
        format!("&mut {recv}")
    };
    Some((
        Span::new(receiver.start, o.op.span.end),
        format!(".{method}{turbofish}({con})"),
    ))
}

/// The reply type a typed command names in its turbofish (`del::<_, i64>(..)` → `i64`);
/// `None` without one, or when it is left to inference.
fn reply_type(call: &str) -> Option<String> {
    let name_end = call.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    let rest = call[name_end..]
        .trim_start()
        .strip_prefix("::")?
        .trim_start();
    let inner = rest.strip_prefix('<')?;
    let mut depth = 0usize;
    let mut last_comma = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => {
                let last = inner[last_comma..i].trim();
                return (!last.is_empty() && last != "_").then(|| last.to_string());
            }
            '>' => depth -= 1,
            ',' if depth == 0 => last_comma = i + 1,
            _ => {}
        }
    }
    None
}

/// Replace a plain `EXPIRE` / `PEXPIRE` renewal of a lock with an atomic compare-and-expire
/// script. Unsafe when a token is in scope, shown only otherwise.
pub fn guarded_renew(o: &TraceOp) -> Option<Fix> {
    let cmd = o.op.command.as_str();
    let lua_cmd = match cmd {
        "expire" | "EXPIRE" => "expire",
        "pexpire" | "PEXPIRE" => "pexpire",
        _ => return None,
    };
    if is_fred(o) {
        return None;
    }
    let (token, mut applicability) = match token_in_scope(o) {
        Some(t) => (t, Applicability::Unsafe),
        None => ("&token".to_string(), Applicability::DisplayOnly),
    };
    if o.op.in_macro || matches!(o.op.channel, Channel::Pipeline { .. }) {
        applicability = Applicability::DisplayOnly;
    }
    let file = &o.file;
    let args = command_args(file, o)?;
    if args.len() != 2 {
        return None;
    }
    let key = snippet(file, o.op.key_span);
    let ttl = args[1].trim();
    let (lua, define) = script_expr(o, &renew_script(lua_cmd));
    let mut span = o.op.span;
    let replacement = if cmd.chars().all(|c| c.is_ascii_lowercase()) {
        if !super::client::is_redis_rs(o) {
            return None;
        }
        let (at, call) = invocation(o)?;
        span = at;
        format!("redis::Script::new({lua}).key({key}).arg({token}).arg({ttl}){call}")
    } else {
        let text = snippet(file, o.op.span);
        let base = text.find(['"'])?;
        let lead = &text[..base];
        format!("{lead}\"EVAL\").arg({lua}).arg(1).arg({key}).arg({token}).arg({ttl})")
    };
    let message = if applicability == Applicability::Unsafe {
        format!("renew only while the lock holds this holder's token (a compare-and-{lua_cmd} script); check that `{token}` is this holder's token")
    } else {
        format!("renew only while the lock holds this holder's token (a compare-and-{lua_cmd} script); pass the token this holder wrote when it acquired the lock")
    };
    let mut edits: Vec<Edit> = define.into_iter().collect();
    edits.push(edit(file, span, replacement));
    if span != o.op.span {
        drop_trait_import(o, span, &mut edits);
    }
    fix(message, applicability, reflow(o, edits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_texts_are_cast_when_not_literals() {
        let t = |s: &str| Ttl {
            text: s.to_string(),
            span: Span::default(),
            unit: locklint_project::ttl::Unit::Seconds,
            value: None,
        };
        assert_eq!(t("60").typed("u64"), "60");
        assert_eq!(t("TTL_SECS").typed("u64"), "TTL_SECS as u64");
        assert_eq!(t("a + 1").typed("u64"), "(a + 1) as u64");
        assert_eq!(t("x as u64").typed("u64"), "x as u64");
        assert_eq!(
            t("d.as_millis() as i64").typed("u64"),
            "d.as_millis() as u64"
        );
    }
}
