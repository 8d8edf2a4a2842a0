//! PostgreSQL advisory locks in the inventory, grouped by key.

use super::*;

/// Whether advisory-lock arguments hold a bind parameter (`$1`, `?`, `:name`), outside quotes.
pub(super) fn parametric(args: &str) -> bool {
    sql_lex::tokens(args)
        .iter()
        .any(|t| t.kind == sql_lex::TokenKind::Param)
}

pub(super) fn advisory_locks(project: &Project) -> Vec<Lock> {
    let mut groups: BTreeMap<String, Lock> = BTreeMap::new();
    for file in project.files {
        // statements a function runs, with that function and event index
        let mut ran: HashMap<Span, (&Function, usize, Option<Executor>, &str)> = HashMap::new();
        for f in &file.functions {
            for r in runs(file, f) {
                ran.insert(
                    r.statement.span,
                    (
                        f,
                        r.at.index,
                        r.embedded.exec.as_ref().map(|e| e.executor),
                        r.embedded.exec.as_ref().map_or("", |e| e.method.as_str()),
                    ),
                );
            }
        }
        for st in &file.sql.statements {
            for a in &st.advisory {
                if a.all && a.unlock {
                    continue;
                }
                let name = if parametric(&a.args) {
                    format!("advisory({}) in {}", a.args, file.file.display)
                } else {
                    format!("advisory({})", a.args)
                };
                let mech = if a.session {
                    Mechanism::AdvisorySession
                } else {
                    Mechanism::AdvisoryTransaction
                };
                let lock = groups
                    .entry(name.clone())
                    .or_insert_with(|| empty_lock(name, mech));
                let site = Site::new(&file.file, a.span);
                let run = ran.get(&st.span);
                let function = run.map(|r| r.0.name.clone()).unwrap_or_default();
                if a.unlock {
                    if !lock.releases.iter().any(|r| r.site.same(&site)) {
                        lock.releases.push(Release {
                            site,
                            function,
                            command: a.name.clone(),
                            atomic: true,
                            owner_checked: true,
                        });
                    }
                    continue;
                }
                if !a.session {
                    lock.mechanism = Mechanism::AdvisoryTransaction;
                }
                let checked = if a.try_lock {
                    match run {
                        Some(r) => {
                            let m = r.3;
                            Some(
                                m.starts_with("fetch")
                                    || m.starts_with("query")
                                    || m == "get"
                                    || m.is_empty(),
                            )
                        }
                        None => Some(!a.bare),
                    }
                } else {
                    None
                };
                lock.acquires.push(Acquire {
                    site,
                    function,
                    command: a.name.clone(),
                    ttl: if a.session {
                        "none (session)".to_string()
                    } else {
                        "none (transaction)".to_string()
                    },
                    token: TokenKind::None,
                    checked,
                    called_from: Vec::new(),
                });
                if let Some((f, at, executor, _)) = run {
                    let end = runs(file, f)
                        .iter()
                        .filter(|r| {
                            r.at.index > *at && r.statement.advisory.iter().any(|u| u.unlock)
                        })
                        .map(|r| r.at.index)
                        .min()
                        .unwrap_or(usize::MAX);
                    let session = executor.or(Some(Executor::Unknown));
                    sql_writes_after(project, file, f, *at, end, session, lock);
                }
            }
        }
    }
    groups
        .into_values()
        .filter(|l| !l.acquires.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parametric;

    #[test]
    fn advisory_arguments_with_bind_parameters() {
        for args in [
            "$1",
            "hashtext($2)",
            "?",
            ":job_id",
            "hashtext(:name)::bigint",
        ] {
            assert!(parametric(args), "{args}");
        }
        for args in [
            "42",
            "hashtext('jobs:nightly')",
            "'a:b'::text",
            "1, 2",
            "'$1'",
        ] {
            assert!(!parametric(args), "{args}");
        }
    }
}
