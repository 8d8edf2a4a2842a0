//! `lock-table-client-clock`: a lock's expiry is written or compared from a time the client
//! supplies instead of the database clock.

use super::sql_matching::{condition_span, drop_parameter, related, sql_diagnostic, sql_edit_fix};
use super::{Rule, RuleInfo};
use locklint_ir::diagnostic::{Applicability, Diagnostic, Fix, Location, Related, Severity};
use locklint_ir::source::Span;
use locklint_ir::sql::{Operand, Statement};
use locklint_ir::FileIr;
use locklint_project::sql::lock_table_writes;
use locklint_project::{FixSettings, Project};

pub struct LockTableClientClock;

static INFO: RuleInfo = RuleInfo {
    name: "lock-table-client-clock",
    summary:
        "a lock-table expiry is written or compared from a client-supplied time instead of now()",
    severity: Severity::Warning,
    fixable: true,
    doc: include_str!("../../../rules/lock-table-client-clock.md"),
};

const HELP: &str = "compute and compare expiries on the database clock: write `now() + $n * interval '1 millisecond'` with a duration parameter and compare with `now()`";

/// A value from the client's clock: a parameter not combined with the database clock.
fn client_time(v: &Operand) -> bool {
    v.param && !v.clock
}

impl Rule for LockTableClientClock {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        for (st, lt) in lock_table_writes(file, &project.schema) {
            if let Some(d) = struct_insert(file, project, st, &lt.table, lt.expiry.as_deref()) {
                out.push(d);
            }
            let Some(expiry) = lt.expiry.as_deref() else {
                continue;
            };
            let span_of =
                |v: &Operand, st: &Statement| v.span.unwrap_or_else(|| condition_span(st));
            for a in st.values.iter().chain(&st.assignments) {
                if a.column == expiry && client_time(&a.value) {
                    let fix = database_clock(file, st, &a.value, Some(&project.facts.fix));
                    out.push(with_source(file, project, &a.value, with_fix(sql_diagnostic(
                        &INFO,
                        file,
                        span_of(&a.value, st),
                        "time from the client",
                        format!("the expiry `{expiry}` of lock table `{}` is written from a client-supplied time; with clock drift between clients a lock can look expired while its holder still runs", lt.table),
                        HELP.to_string(),
                    ), fix)));
                }
            }
            let Some(f) = &st.filter else { continue };
            // one finding per time the statement compares with (`$4` in four `CASE WHEN
            // expires_at <= $4` arms), the other comparisons beside it
            let mut reported: Vec<(String, usize)> = Vec::new();
            for c in &f.comparisons {
                let is_expiry = |v: &Operand| {
                    v.bare
                        .as_ref()
                        .is_some_and(|col| col.name == expiry && st.is_target(col))
                };
                let other = if is_expiry(&c.left) {
                    &c.right
                } else if is_expiry(&c.right) {
                    &c.left
                } else {
                    continue;
                };
                if client_time(other) {
                    let text = other
                        .span
                        .map(|sp| file.file.snippet(sp).trim().to_string())
                        .unwrap_or_default();
                    if let Some(&(_, at)) =
                        reported.iter().find(|(t, _)| !t.is_empty() && *t == text)
                    {
                        out[at].related.push(related(
                            file,
                            span_of(other, st),
                            "compared with the same time here too",
                        ));
                        continue;
                    }
                    reported.push((text, out.len()));
                    let fix = database_clock(file, st, other, None);
                    out.push(with_source(file, project, other, with_fix(sql_diagnostic(
                        &INFO,
                        file,
                        span_of(other, st),
                        "time from the client",
                        format!("the expiry `{expiry}` of lock table `{}` is compared with a client-supplied time; a client whose clock runs ahead takes over locks that have not expired yet", lt.table),
                        HELP.to_string(),
                    ), fix)));
                }
            }
        }
    }
}

/// An ORM insert of a whole struct (`diesel::insert_into(mutexes::table).values(mutex)`) whose
/// expiry field every constructor of the struct in the project fills from the client's clock
/// (`expires_at: Some(Utc::now().naive_utc().add(..))`): reported on the inserted value, with
/// the constructor as a related location. Where the project shows no expiry column for the
/// table, a field of the struct named like one (`lease_until`) is its expiry. No fix: the
/// value is built elsewhere.
fn struct_insert(
    file: &FileIr,
    project: &Project,
    st: &Statement,
    table: &str,
    expiry: Option<&str>,
) -> Option<Diagnostic> {
    let value = st.values_of.as_ref()?;
    let fields = &project.schema.client_clock_fields;
    let ((_, expiry), &(at, span)) = fields.iter().find(|((ty, field), _)| {
        *ty == value.type_name
            && match expiry {
                Some(e) => field == e,
                None => project.schema.names.is_expiry(field),
            }
    })?;
    let built = project.files.get(at)?;
    let ty = &value.type_name;
    let mut d = sql_diagnostic(
        &INFO,
        file,
        value.span,
        "time from the client",
        format!("the expiry `{expiry}` of lock table `{table}` is written from a client-supplied time: this `{ty}` is built with `{expiry}` from the client's clock; with clock drift between clients a lock can look expired while its holder still runs"),
        format!("compute the expiry on the database clock: build `{ty}` without `{expiry}` and write it from the database's clock in the statement (diesel's `now + 30.seconds()`, `now() + interval '30 seconds'` in SQL)"),
    );
    d.related.push(Related {
        location: Location::new(built.file.clone(), span),
        label: format!("`{expiry}` of `{ty}` is taken from the client's clock here"),
    });
    Some(d)
}

/// Where the client's time a Rust value holds was taken, as a related location: the local's
/// initialiser that reads the clock (`let now = Utc::now().naive_utc()`), or the constructor
/// that fills the struct field it reads (`lock.expires_at`, every `MutexLock { expires_at:
/// Some(Utc::now()..) }` of the project). The finding stays where the value enters the
/// statement, which is what changes.
fn with_source(file: &FileIr, project: &Project, v: &Operand, mut d: Diagnostic) -> Diagnostic {
    let source = match (&v.clock_read, &v.from_field) {
        (Some(span), _) => Some((
            file.file.clone(),
            *span,
            "the client's clock is read here".to_string(),
        )),
        (None, Some((ty, field))) => project
            .schema
            .client_clock_fields
            .get(&(ty.clone(), field.clone()))
            .and_then(|&(at, span)| {
                let built = project.files.get(at)?;
                Some((
                    built.file.clone(),
                    span,
                    format!("`{field}` of `{ty}` is taken from the client's clock here"),
                ))
            }),
        _ => None,
    };
    if let Some((f, span, label)) = source {
        d.related.push(Related {
            location: Location::new(f, span),
            label,
        });
    }
    d
}

fn with_fix(mut d: Diagnostic, fix: Option<Fix>) -> Diagnostic {
    d.fix = fix;
    d
}

/// An interval literal for a TTL in milliseconds, in whole seconds where it is one.
fn interval(ms: u64, mysql: bool) -> String {
    match (ms % 1000 == 0, mysql) {
        (true, false) => format!("interval '{} seconds'", ms / 1000),
        (false, false) => format!("interval '{ms} milliseconds'"),
        (true, true) => format!("INTERVAL {} SECOND", ms / 1000),
        (false, true) => format!("INTERVAL {} MICROSECOND", ms * 1000),
    }
}

/// Read the time from the database instead of the client: `now()` (PostgreSQL) or
/// `UTC_TIMESTAMP(6)` (MySQL).
///
/// A written expiry (`written` carries the fix settings) keeps the caller's duration: when
/// sqlx binds the client's clock plus a chrono duration (`.bind(Utc::now() +
/// Duration::seconds(secs))`), the value becomes `now() + $n * interval '1 second'` and the bind
/// `secs` (unsafe). Otherwise the duration is not known and the fix, with `--default-ttl`, is
/// only shown.
///
/// A compared time becomes the clock, and the client's parameter goes: its bind removed, later
/// `$n` renumbered, and a clock read that only fed it removed with it (unsafe). Shown only
/// when that cannot be done on PostgreSQL, or would leave a binding unused.
fn database_clock(
    file: &FileIr,
    st: &Statement,
    v: &Operand,
    written: Option<&FixSettings>,
) -> Option<Fix> {
    let span = v.span?;
    let emb = file.embedded.get(st.embedded)?;
    let sql = emb
        .text
        .get(st.start..st.end)
        .unwrap_or("")
        .to_ascii_lowercase();
    let mysql = sql.contains("utc_timestamp") || (sql.contains('?') && !sql.contains('$'));
    let clock = if mysql { "UTC_TIMESTAMP(6)" } else { "now()" };
    // the parameter this value reads: its `$n` lies inside the value
    let params = file.sql.params(st.embedded);
    let from = params.partition_point(|p| emb.map.to_source(p.start) < span.start);
    let param = params[from..]
        .iter()
        .take_while(|p| emb.map.to_source(p.start) < span.end)
        .find(|p| emb.map.span(p.start, p.end).end <= span.end)
        .map(|p| p.n)
        .filter(|_| !mysql);
    let func = emb
        .func
        .and_then(|f| file.functions.get(f))
        .map(|f| f.whole);
    if let Some(settings) = written {
        if let Some(fix) = param
            .zip(func)
            .and_then(|(n, func)| keep_duration(file, st, span, n, func))
        {
            return Some(fix);
        }
        let text = format!("({clock} + {})", interval(settings.default_ttl_ms, mysql));
        return sql_edit_fix(
            file,
            st,
            span,
            &text,
            format!("use the database clock (`{text}`, the TTL from `--default-ttl`) and drop the client's time parameter; keep the lock's own duration"),
            Applicability::DisplayOnly,
        );
    }
    let dropped = param.and_then(|n| {
        let mut edits = drop_parameter(file, st, n)?;
        let at = sql_edit_fix(file, st, span, clock, String::new(), Applicability::Unsafe)?;
        edits.extend(at.edits);
        edits.extend(super::leftovers::complete(&file.file, func?, &edits)?);
        Some((n, edits))
    });
    let (applicability, message) = match &dropped {
        Some((n, _)) => (
            Applicability::Unsafe,
            format!(
                "use the database clock (`{clock}`) and drop the client's time parameter `${n}`"
            ),
        ),
        None => (
            Applicability::DisplayOnly,
            format!("use the database clock (`{clock}`) and drop the client's time parameter"),
        ),
    };
    let mut fix = sql_edit_fix(file, st, span, clock, message, applicability)?;
    if let (Applicability::Unsafe, Some((_, mut edits))) = (fix.applicability, dropped) {
        edits.sort_by_key(|e| e.location.span.start);
        fix.edits = edits;
    }
    Some(fix)
}

/// `now() + $n * interval '1 <unit>'` and the duration bound in place of the client's time,
/// when sqlx binds `$n` (read once) to the client's clock plus a chrono duration.
fn keep_duration(file: &FileIr, st: &Statement, span: Span, n: usize, func: Span) -> Option<Fix> {
    let emb = file.embedded.get(st.embedded)?;
    let bind = *emb.exec.as_ref()?.binds.as_ref()?.get(n - 1)?;
    if file
        .sql
        .params(st.embedded)
        .iter()
        .filter(|p| p.n == n)
        .count()
        != 1
    {
        return None;
    }
    let bind_text = file.file.text.get(bind.start..bind.end)?;
    let lead = bind_text.len() - bind_text.trim_start().len();
    let arg_text = bind_text
        .trim_start()
        .strip_prefix(".bind(")?
        .strip_suffix(')')?;
    let arg_at = bind.start + lead + ".bind(".len();
    let (unit, duration) = clock_plus_duration(arg_text)?;
    let value = format!("(now() + ${n} * interval '1 {unit}')");
    let sql = sql_edit_fix(file, st, span, &value, String::new(), Applicability::Unsafe)?;
    if sql.applicability != Applicability::Unsafe {
        return None;
    }
    let mut edits = sql.edits;
    // the whole argument gives way to the duration's amount
    edits.push(super::fixes::edit(
        &file.file,
        Span::new(arg_at, arg_at + arg_text.len()),
        arg_text.get(duration.start..duration.end)?,
    ));
    edits.extend(super::leftovers::complete(&file.file, func, &edits)?);
    edits.sort_by_key(|e| e.location.span.start);
    Some(Fix {
        message: format!(
            "use the database clock with the caller's duration (`{value}`, binding the duration's {unit}s)"
        ),
        applicability: Applicability::Unsafe,
        edits,
    })
}

/// For `Utc::now() + Duration::seconds(x)` (any clock's `now()`, any chrono or time duration
/// of seconds, milliseconds, minutes or hours): the unit and where `x` is in the text.
fn clock_plus_duration(arg: &str) -> Option<(&'static str, Span)> {
    let expr: syn::Expr = syn::parse_str(arg).ok()?;
    let mut e = &expr;
    loop {
        match e {
            syn::Expr::Reference(r) => e = &r.expr,
            syn::Expr::Paren(p) => e = &p.expr,
            _ => break,
        }
    }
    let syn::Expr::Binary(b) = e else { return None };
    if !matches!(b.op, syn::BinOp::Add(_)) {
        return None;
    }
    let call_name = |e: &syn::Expr| -> Option<(String, usize, Vec<syn::Expr>)> {
        let syn::Expr::Call(c) = e else { return None };
        let syn::Expr::Path(p) = &*c.func else {
            return None;
        };
        let last = p.path.segments.last()?.ident.to_string();
        Some((
            last,
            p.path.segments.len(),
            c.args.iter().cloned().collect(),
        ))
    };
    let (clock, clock_segments, clock_args) = call_name(&b.left)?;
    if !matches!(clock.as_str(), "now" | "now_utc") || clock_segments < 2 || !clock_args.is_empty()
    {
        return None;
    }
    let (ctor, segments, args) = call_name(&b.right)?;
    let unit = match ctor.as_str() {
        "seconds" => "second",
        "milliseconds" => "millisecond",
        "minutes" => "minute",
        "hours" => "hour",
        _ => return None,
    };
    let [amount] = args.as_slice() else {
        return None;
    };
    if segments < 2 {
        return None;
    }
    let sp = syn::spanned::Spanned::span(amount);
    let lines = locklint_ir::source::LineIndex::new(arg);
    let start = lines.offset(arg, sp.start().line, sp.start().column);
    let end = lines.offset(arg, sp.end().line, sp.end().column);
    (start < end).then_some((unit, Span::new(start, end)))
}
