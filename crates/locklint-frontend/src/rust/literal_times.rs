//! The time fields of struct literals: for a field named like a point in time (`expires_at`,
//! `locked_until`), whether its value reads the machine's clock. A struct that an ORM inserts
//! whole (`diesel::insert_into(mutexes::table).values(mutex)`) is built by constructors, often
//! in another file; what they put in its lease time is what the insert writes. The walker
//! records them as it walks a body (`FileIr.literal_times`), so a body parsed one statement at
//! a time gives the same.

use locklint_ir::source::Span;
use locklint_ir::{vocabulary, LiteralTime};
use syn::visit::Visit;

/// Types whose `now()` reads the machine's clock.
const CLOCKS: &[&str] = &[
    "Utc",
    "Local",
    "SystemTime",
    "Instant",
    "OffsetDateTime",
    "Timestamp",
    "Zoned",
];

/// The field `field: value` of a literal of `type_name`, when the field is named like a point in
/// time.
pub(super) fn of_field(
    type_name: &str,
    field: &str,
    value: &syn::Expr,
    span: Span,
) -> Option<LiteralTime> {
    (vocabulary::names_time_column(field) || vocabulary::names_lease_time_column(field)).then(
        || LiteralTime {
            type_name: type_name.to_string(),
            field: field.to_string(),
            client_clock: reads_client_clock(value),
            span,
        },
    )
}

/// Whether an expression calls a machine clock's `now` (`Utc::now()`, `chrono::Utc::now()`,
/// `SystemTime::now()`, `OffsetDateTime::now_utc()`).
pub(super) fn reads_client_clock(e: &syn::Expr) -> bool {
    struct Find(bool);
    impl<'ast> Visit<'ast> for Find {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func {
                let segs: Vec<String> = p
                    .path
                    .segments
                    .iter()
                    .map(|s| s.ident.to_string())
                    .collect();
                if let [.., clock, now] = segs.as_slice() {
                    if CLOCKS.contains(&clock.as_str()) && (now == "now" || now == "now_utc") {
                        self.0 = true;
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut f = Find(false);
    f.visit_expr(e);
    f.0
}

#[cfg(test)]
mod tests {
    use locklint_ir::source::SourceFile;

    fn of(text: &str) -> Vec<(String, String, bool)> {
        let ir = crate::analyze(0, SourceFile::new("m.rs".into(), text.to_string()));
        ir.literal_times
            .into_iter()
            .map(|t| (t.type_name, t.field, t.client_clock))
            .collect()
    }

    #[test]
    fn time_fields_of_struct_literals_say_whether_they_read_the_clock() {
        let got = of("impl Options {
                fn to_lock(&self) -> Lease {
                    Lease { name: self.name.clone(), holder: None,
                            lease_until: Some(chrono::Utc::now().naive_utc() + self.ttl),
                            created_at: self.created_at }
                }
            }
            impl Lease {
                fn released(&self) -> Self {
                    Self { name: self.name.clone(), lease_until: None, ..self.clone() }
                }
            }");
        assert_eq!(
            got,
            [
                ("Lease".into(), "lease_until".into(), true),
                ("Lease".into(), "created_at".into(), false),
                ("Lease".into(), "lease_until".into(), false),
            ]
        );
    }
}
