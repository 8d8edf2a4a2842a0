//! The project-wide schema model: tables from `CREATE TABLE`, `ALTER TABLE ... ADD COLUMN`
//! and unique indexes anywhere in the project, with their fencing column and whether they are
//! lock tables.

use locklint_ir::sql::{Statement, TableDef};
use locklint_ir::vocabulary;
use locklint_ir::FileIr;
use std::collections::{BTreeMap, BTreeSet};

/// Default names of fencing-token columns.
pub const FENCE_COLUMNS: &[&str] = &["fence", "fence_token", "fencing_token"];
/// Columns naming a lock's holder.
pub const OWNER_COLUMNS: &[&str] = &["owner", "holder", "locked_by", "owner_id"];
/// Columns holding a lock's expiry.
pub const EXPIRY_COLUMNS: &[&str] = &[
    "expires_at",
    "locked_until",
    "lock_until",
    "lease_until",
    "expiry",
];

/// Column names that mark fencing tokens, lock owners and lock expiries: the defaults plus
/// `fence-columns` and `lock-table` from the configuration.
#[derive(Debug, Clone)]
pub struct ColumnNames {
    pub fence: Vec<String>,
    pub owner: Vec<String>,
    pub expiry: Vec<String>,
}

impl Default for ColumnNames {
    fn default() -> Self {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        ColumnNames {
            fence: v(FENCE_COLUMNS),
            owner: v(OWNER_COLUMNS),
            expiry: v(EXPIRY_COLUMNS),
        }
    }
}

impl ColumnNames {
    /// Whether a column names a lock's holder: a known name, or one shaped like a holder.
    pub fn is_owner(&self, c: &str) -> bool {
        self.owner.iter().any(|x| x == c) || vocabulary::names_holder_column(c)
    }

    /// Whether a column holds a lock's expiry or lease time: a known name, or one shaped like
    /// a lease time.
    pub fn is_expiry(&self, c: &str) -> bool {
        self.expiry.iter().any(|x| x == c) || vocabulary::names_lease_time_column(c)
    }

    /// The defaults extended by configured names (configured names first).
    pub fn with(fence: &[String], owner: &[String], expiry: &[String]) -> Self {
        let d = ColumnNames::default();
        let join = |a: &[String], b: Vec<String>| {
            let mut v: Vec<String> = a.to_vec();
            v.extend(b.into_iter().filter(|x| !a.contains(x)));
            v
        };
        ColumnNames {
            fence: join(fence, d.fence),
            owner: join(owner, d.owner),
            expiry: join(expiry, d.expiry),
        }
    }
}

/// One table as far as the project's SQL defines it.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<String>,
    /// Primary keys and unique constraints or indexes.
    pub unique: Vec<Vec<String>>,
}

impl Table {
    fn has(&self, c: &str) -> bool {
        self.columns.iter().any(|x| x == c)
    }

    pub fn fence_column(&self, names: &ColumnNames) -> Option<&str> {
        pick(&self.columns, &names.fence)
    }

    /// The holder column: the first of the known names it has, else one shaped like a holder
    /// (`lease_owner`, `claimed_by`).
    pub fn owner_column(&self, names: &ColumnNames) -> Option<&str> {
        pick(&self.columns, &names.owner).or_else(|| {
            self.columns
                .iter()
                .find(|c| vocabulary::names_holder_column(c))
                .map(String::as_str)
        })
    }

    /// The lease's time column: the first of the known names it has, else one shaped like a
    /// lease time (`lock_expires_at`, `hold_until`, `locked_at`, `heartbeat_at`).
    pub fn expiry_column(&self, names: &ColumnNames) -> Option<&str> {
        pick(&self.columns, &names.expiry).or_else(|| {
            self.columns
                .iter()
                .find(|c| vocabulary::names_lease_time_column(c))
                .map(String::as_str)
        })
    }

    /// A key column plus an owner and an expiry column.
    pub fn looks_like_lock_table(&self, names: &ColumnNames) -> bool {
        let keyed = self
            .unique
            .iter()
            .any(|k| k.iter().all(|c| self.has(c) && !names.is_owner(c)));
        keyed && self.owner_column(names).is_some() && self.expiry_column(names).is_some()
    }
}

/// The first of `names` (in the order of `names`) that `columns` has.
fn pick<'a>(columns: &'a [String], names: &[String]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|n| columns.iter().find(|c| *c == n))
        .map(String::as_str)
}

/// Whether a table's name says it holds locks (`job_locks`, `leases`, `mutexes`).
pub fn lock_table_name(table: &str) -> bool {
    locklint_ir::vocabulary::names_lock(table)
}

/// Project-wide schema facts from every file's SQL.
#[derive(Debug, Default)]
pub struct Schema {
    pub tables: BTreeMap<String, Table>,
    pub names: ColumnNames,
    /// Tables the project's statements claim on a time condition, with their lease columns
    /// (`crate::lease`).
    pub leases: BTreeMap<String, crate::lease::Lease>,
    /// Lock tables whose leases lapse: a claim or a reaper gives a row whose time has passed
    /// to another holder.
    pub lapsing: BTreeSet<String>,
    /// Per lock table, where the project first takes a row of it (`crate::lease::claims`): a
    /// completion written in another file than the claim is linked to it through the table.
    pub claims: BTreeMap<String, crate::lease::ClaimSite>,
    /// Per table whose rows a lease on another table's rows covers (the jobs of a leased
    /// queue), that lease (`crate::lease::joined_leases`).
    pub joined_leases: BTreeMap<String, crate::lease::JoinedLease>,
    /// Per work table whose rows a worker holds by their state until a time passes, that lease
    /// (`crate::lease::state_leases`).
    pub state_leases: BTreeMap<String, crate::lease::StateLease>,
    /// Per (struct, field), where the project's struct literals fill a time field from the
    /// client's clock, when all of them do (`crate::orm::client_clock_fields`): the value of
    /// that column in an ORM insert of the whole struct.
    pub client_clock_fields: BTreeMap<(String, String), (usize, locklint_ir::source::Span)>,
    /// Per table, the columns the project's statements write.
    pub written: BTreeMap<String, BTreeSet<String>>,
    /// Per table, the columns the project's writes compare with an incoming value (its keys
    /// and holders, as the statements use them).
    pub keyed: BTreeMap<String, BTreeSet<String>>,
    /// Per table, the columns an upsert inserts from an incoming value and lets its `DO
    /// UPDATE` touch only while the stored row holds that same value (`ON CONFLICT (active)
    /// DO UPDATE SET expires_at = .. WHERE t.worker_id = $2` with `$2` inserted into
    /// `worker_id`): the holder, as the statements use it (`crate::lease::upsert_holders`).
    pub upsert_holders: BTreeMap<String, BTreeSet<String>>,
}

impl Schema {
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name)
    }

    fn add(&mut self, def: &TableDef) {
        let t = self.tables.entry(def.table.clone()).or_default();
        for c in &def.columns {
            if !t.has(c) {
                t.columns.push(c.clone());
            }
        }
        for u in &def.unique {
            if !t.unique.contains(u) {
                t.unique.push(u.clone());
            }
        }
    }

    /// Add the definitions found in these statements.
    pub fn extend<'s>(&mut self, statements: impl IntoIterator<Item = &'s Statement>) {
        for s in statements {
            if let Some(d) = &s.table_def {
                self.add(d);
            }
        }
    }
}

/// Build the schema model from all files.
pub fn schema(files: &[FileIr]) -> Schema {
    schema_with(files, ColumnNames::default())
}

/// Build the schema model with configured column names.
pub fn schema_with(files: &[FileIr], names: ColumnNames) -> Schema {
    let mut s = Schema {
        names,
        ..Default::default()
    };
    for f in files {
        s.extend(&f.sql.statements);
    }
    s.leases = crate::lease::leases(files, &s.names);
    s.written = crate::lease::written_columns(files);
    s.keyed = crate::lease::keyed_columns(files);
    s.upsert_holders = crate::lease::upsert_holders(files);
    s.lapsing = crate::lease::lapsing(files, &s);
    s.claims = crate::lease::claims(files, &s);
    s.joined_leases = crate::lease::joined_leases(files, &s.names);
    s.state_leases = crate::lease::state_leases(files);
    s.client_clock_fields = crate::orm::client_clock_fields(files);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use locklint_ir::source::SourceFile;

    fn schema_of(sql: &str) -> Schema {
        let ir = locklint_frontend::analyze(0, SourceFile::new("m.sql".into(), sql.to_string()));
        let mut s = Schema::default();
        s.extend(&ir.sql.statements);
        s
    }

    #[test]
    fn lock_tables_and_fencing_columns() {
        let s = schema_of(
            "CREATE TABLE IF NOT EXISTS job_locks (
                 name TEXT PRIMARY KEY,
                 holder TEXT NOT NULL,
                 locked_until TIMESTAMPTZ NOT NULL
             );
             CREATE TABLE invoices (id BIGINT PRIMARY KEY, amount BIGINT NOT NULL);
             ALTER TABLE invoices ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0;
             CREATE TABLE claims (scope TEXT, k TEXT, PRIMARY KEY (scope, k));
             CREATE UNIQUE INDEX invoices_period ON invoices (amount);",
        );
        let locks = s.table("job_locks").unwrap();
        let n = ColumnNames::default();
        assert!(locks.looks_like_lock_table(&n));
        assert_eq!(locks.owner_column(&n), Some("holder"));
        assert_eq!(locks.expiry_column(&n), Some("locked_until"));
        let inv = s.table("invoices").unwrap();
        assert_eq!(inv.fence_column(&n), Some("fence_token"));
        assert!(!inv.looks_like_lock_table(&n));
        assert!(inv.unique.contains(&vec!["amount".to_string()]));
        assert_eq!(
            s.table("claims").unwrap().unique,
            vec![vec!["scope".to_string(), "k".to_string()]]
        );
    }

    #[test]
    fn mysql_and_sqlite_definitions() {
        let s = schema_of(
            "CREATE TABLE IF NOT EXISTS `leases` (
                 `name` VARCHAR(255) NOT NULL PRIMARY KEY,
                 `owner` VARCHAR(64) NOT NULL,
                 `expires_at` DATETIME(6) NOT NULL
             ) ENGINE = InnoDB;
             CREATE TABLE t (a INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)));",
        );
        assert!(s
            .table("leases")
            .unwrap()
            .looks_like_lock_table(&ColumnNames::default()));
        assert_eq!(s.table("t").unwrap().columns, vec!["a".to_string()]);
    }

    #[test]
    fn lock_words_in_table_names() {
        assert!(lock_table_name("job_locks"));
        assert!(lock_table_name("leases"));
        assert!(!lock_table_name("blocks"));
        assert!(!lock_table_name("locklint_claims"));
    }
}
