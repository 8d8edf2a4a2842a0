//! Lock tables in the inventory, grouped by table.

use super::*;

fn value_text(file: &FileIr, st: &Statement, column: &str) -> Option<String> {
    let v = st
        .values
        .iter()
        .chain(&st.assignments)
        .find(|a| a.column == column)?;
    let span = v.value.span?;
    let t = file.file.snippet(span);
    Some(t.split_whitespace().collect::<Vec<_>>().join(" "))
}

pub(super) fn table_locks(project: &Project) -> Vec<Lock> {
    let schema = &project.schema;
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for file in project.files {
        let mut ran: HashMap<Span, (&Function, usize, &str)> = HashMap::new();
        for f in &file.functions {
            for r in runs(file, f) {
                ran.insert(
                    r.statement.span,
                    (
                        f,
                        r.at.index,
                        r.embedded.exec.as_ref().map_or("", |e| e.method.as_str()),
                    ),
                );
            }
        }
        for st in &file.sql.statements {
            if st.in_body {
                continue;
            }
            let Some(lt) = lock_table(st, schema) else {
                continue;
            };
            let name = format!("table {}", lt.table);
            let lock = groups
                .entry(name.clone())
                .or_insert_with(|| empty_lock(name, Mechanism::LockTable));
            let site = Site::new(&file.file, st.span);
            let run = ran.get(&st.span);
            let function = run.map(|r| r.0.name.clone()).unwrap_or_default();
            let owner_checked = lt.owner.as_deref().is_some_and(|o| has_owner_check(st, o));
            let fence_col = schema
                .table(&lt.table)
                .and_then(|t| t.fence_column(&schema.names))
                .map(str::to_string)
                .or_else(|| fence_column(st, schema));
            match lock_write(st, &lt) {
                LockWrite::Acquire => {
                    let ttl = lt
                        .expiry
                        .as_deref()
                        .and_then(|c| value_text(file, st, c))
                        .unwrap_or_else(|| "none".to_string());
                    let token = match lt.owner.as_deref().and_then(|c| {
                        st.values
                            .iter()
                            .chain(&st.assignments)
                            .find(|a| a.column == c)
                    }) {
                        Some(a) if a.value.is_constant() => TokenKind::Constant,
                        Some(_) => TokenKind::Unique,
                        None => TokenKind::None,
                    };
                    let text = file.file.snippet(st.span).to_ascii_uppercase();
                    let checked = run.map(|r| {
                        let m = r.2;
                        text.contains("RETURNING")
                            || m.starts_with("fetch")
                            || m.starts_with("query")
                            || m.contains("rows_affected")
                    });
                    if fence_col
                        .as_deref()
                        .is_some_and(|c| st.written().any(|w| w == c))
                    {
                        push_site(&mut lock.fencing.minted, site.clone());
                    }
                    lock.acquires.push(Acquire {
                        site,
                        function,
                        command: target(st),
                        ttl,
                        token,
                        checked,
                        called_from: Vec::new(),
                    });
                    if let Some((f, at, _)) = run {
                        let key = format!("table {}", lt.table);
                        let end = runs(file, f)
                            .iter()
                            .filter(|r| {
                                r.at.index > *at
                                    && lock_table(r.statement, schema).is_some_and(|l| {
                                        format!("table {}", l.table) == key
                                            && lock_write(r.statement, &l) == LockWrite::Release
                                    })
                            })
                            .map(|r| r.at.index)
                            .min()
                            .unwrap_or(usize::MAX);
                        writes_after(project, file, f, *at, end, None, lock);
                    }
                }
                LockWrite::Release => lock.releases.push(Release {
                    site,
                    function,
                    command: target(st),
                    atomic: true,
                    owner_checked,
                }),
                LockWrite::Renew => lock.renewals.push(Renewal {
                    site,
                    function,
                    command: target(st),
                    owner_checked,
                }),
                LockWrite::Other => {}
            }
        }
    }
    groups
        .into_values()
        .filter(|l| !l.acquires.is_empty())
        .collect()
}
