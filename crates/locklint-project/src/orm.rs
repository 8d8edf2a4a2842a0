//! The tables of writes built with sea-orm, across files: a write names its table through its
//! entity's module (`job_lock::Entity::update_many()`), and the module's model, often in
//! another file, declares the table (`#[sea_orm(table_name = "job_locks")]`). Each file's
//! entity tables ([`FileIr::orm_tables`]) are collected, and every write whose table stands in
//! for a module the project declares exactly one table for takes that table.

use locklint_ir::source::Span;
use locklint_ir::{FileIr, Origin};
use std::collections::{BTreeMap, HashMap};

/// Give each ORM write whose file does not declare its entity's table the table the project
/// declares for that module; a module declared with different tables (two crates each with an
/// entity `lock`) is left as it is.
pub fn resolve_entity_tables(files: &mut [FileIr]) {
    let mut declared: HashMap<&str, Option<&str>> = HashMap::new();
    for f in files.iter() {
        for (module, table) in &f.orm_tables {
            declared
                .entry(module.as_str())
                .and_modify(|t| {
                    if *t != Some(table.as_str()) {
                        *t = None;
                    }
                })
                .or_insert(Some(table.as_str()));
        }
    }
    if declared.is_empty() {
        return;
    }
    let declared: HashMap<String, String> = declared
        .into_iter()
        .filter_map(|(m, t)| Some((m.to_string(), t?.to_string())))
        .collect();
    for f in files.iter_mut() {
        let tables: Vec<(usize, &String)> = f
            .embedded
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.origin {
                Origin::Orm {
                    entity: Some(m), ..
                } => Some((i, declared.get(m)?)),
                _ => None,
            })
            .collect();
        for (embedded, table) in tables {
            for st in f
                .sql
                .statements
                .iter_mut()
                .filter(|s| s.embedded == embedded)
            {
                st.table = Some(table.clone());
                st.names = vec![table.clone()];
            }
        }
    }
}

/// Where the project's struct literals put the client's clock into a time field: per (struct,
/// field), the first literal that does (its file's place and the field's span), when every
/// literal of that struct that names the field reads the client's clock (`expires_at:
/// Some(Utc::now().naive_utc().add(..))` in each constructor of `MutexLock`). A struct built
/// both ways is left out: which value an insert gets is not known.
pub fn client_clock_fields(files: &[FileIr]) -> BTreeMap<(String, String), (usize, Span)> {
    let mut seen: BTreeMap<(String, String), Option<(usize, Span)>> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        for t in &f.literal_times {
            let key = (t.type_name.clone(), t.field.clone());
            let here = t.client_clock.then_some((i, t.span));
            match seen.get_mut(&key) {
                Some(first) => {
                    if here.is_none() {
                        *first = None;
                    }
                }
                None => {
                    seen.insert(key, here);
                }
            }
        }
    }
    seen.into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use locklint_ir::source::SourceFile;

    fn file(path: &str, text: &str) -> FileIr {
        locklint_frontend::analyze(0, SourceFile::new(path.into(), text.to_string()))
    }

    const WRITE: &str = "use sea_orm::EntityTrait;
        async fn f(db: &DatabaseConnection) {
            job_lock::Entity::delete_many().exec(db).await.unwrap();
        }";

    fn entity(table: &str) -> String {
        format!("use sea_orm::entity::prelude::*;\n#[sea_orm(table_name = \"{table}\")]\npub struct Model {{ pub name: String }}")
    }

    fn table(f: &FileIr) -> Option<&str> {
        f.sql.statements[0].table.as_deref()
    }

    #[test]
    fn a_write_takes_the_table_its_entity_declares_in_another_file() {
        let mut files = vec![
            file("src/worker.rs", WRITE),
            file("src/entity/job_lock.rs", &entity("job_locks")),
        ];
        assert_eq!(
            table(&files[0]),
            Some("job_lock"),
            "the module's name until resolved"
        );
        resolve_entity_tables(&mut files);
        assert_eq!(table(&files[0]), Some("job_locks"));
        assert_eq!(files[0].sql.statements[0].names, ["job_locks"]);
    }

    #[test]
    fn a_module_declared_with_two_tables_is_left_alone() {
        let mut files = vec![
            file("src/worker.rs", WRITE),
            file("a/job_lock.rs", &entity("job_locks")),
            file("b/job_lock.rs", &entity("locks")),
        ];
        resolve_entity_tables(&mut files);
        assert_eq!(table(&files[0]), Some("job_lock"));
    }

    #[test]
    fn a_time_field_every_literal_fills_from_the_client_clock() {
        let files = [
            file(
                "models.rs",
                "impl Lock {
                    fn fresh(ttl: i64) -> Self {
                        Self { expires_at: Some(Utc::now().naive_utc() + Duration::seconds(ttl)), created_at: None }
                    }
                }",
            ),
            file(
                "options.rs",
                "impl Options {
                    fn to_lock(&self) -> Lock {
                        Lock { expires_at: Some(chrono::Utc::now().naive_utc()), created_at: self.at }
                    }
                    fn to_lease(&self) -> Lease {
                        Lease { until: Some(Utc::now().naive_utc()) }
                    }
                }
                fn stored(row: &Row) -> Lease {
                    Lease { until: row.until }
                }",
            ),
        ];
        let got = client_clock_fields(&files);
        let keys: Vec<(&str, &str)> = got.keys().map(|(t, f)| (t.as_str(), f.as_str())).collect();
        // `Lease.until` is also copied from a row: not known
        assert_eq!(keys, [("Lock", "expires_at")]);
        assert_eq!(got[&("Lock".to_string(), "expires_at".to_string())].0, 0);
    }
}
