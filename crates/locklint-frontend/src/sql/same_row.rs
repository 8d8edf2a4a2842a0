//! Conditions a write checks on its own row through a subquery: `EXISTS (SELECT 1 FROM locks o
//! WHERE o.name = locks.name AND o.owner = $2)`, `name IN (SELECT name FROM mine)` where `mine`
//! is a `WITH` query of the written table (or the table itself). The subquery reads the same
//! row as the write (correlated on one column, or selecting the column the write matches), so
//! its comparisons are the write's, as if written in its `WHERE`.

use super::statements::{object_name, Exprs};
use locklint_ir::sql::{Cmp, Col, Statement};
use sqlparser::ast::{self as ast, Expr};
use std::ops::ControlFlow;

impl Exprs<'_, '_> {
    /// Add to the write's filter the comparisons of the subqueries of `selection` that read
    /// its own row; `ctes` are the statement's `WITH` queries.
    pub(super) fn same_row_guards(&self, st: &mut Statement, selection: &Expr, ctes: &[&ast::Cte]) {
        let (Some(table), Some(target)) = (st.table.clone(), st.names.first().cloned()) else {
            return;
        };
        let mut found: Vec<Guard> = Vec::new();
        let _ = ast::visit_expressions(selection, |x| {
            if !self.spend(1) {
                return ControlFlow::Break(());
            }
            let guard = match x {
                Expr::Exists {
                    subquery,
                    negated: false,
                } => self.exists_guard(st, &table, subquery),
                Expr::In {
                    expr,
                    target: ast::InTarget::Subquery(subquery),
                    negated: false,
                    ..
                } => self.in_guard(st, &table, expr, subquery, ctes),
                // `id = (SELECT j.id FROM jobs j .. LIMIT 1)`: one picked row
                Expr::BinaryOp {
                    left,
                    op: ast::BinaryOperator::Eq,
                    right,
                } => match right.as_ref() {
                    Expr::Subquery(subquery) => self.picked_guard(st, &table, left, subquery),
                    _ => None,
                },
                _ => None,
            };
            found.extend(guard);
            ControlFlow::<()>::Continue(())
        });
        add_guards(st, found, &target);
    }

    /// Add to an `UPDATE`'s filter the conditions of a subquery in its `FROM` that picks its
    /// rows: `UPDATE jobs SET .. FROM (SELECT id FROM jobs WHERE hold_until < now() ..) AS
    /// picked WHERE jobs.id = picked.id`, or of a `WITH` query (`ctes`) named there (`WITH
    /// picked AS (SELECT j.id FROM jobs j JOIN unnest($1) u(id) ON u.id = j.id WHERE ..) ..
    /// FROM picked`; joined to a set-returning function at most, which only narrows the rows).
    pub(super) fn picked_in_from_guards(
        &self,
        st: &mut Statement,
        from: Option<&ast::UpdateTableFromKind>,
        selection: &Expr,
        ctes: &[&ast::Cte],
    ) {
        let Some(
            ast::UpdateTableFromKind::AfterSet(tables)
            | ast::UpdateTableFromKind::BeforeSet(tables),
        ) = from
        else {
            return;
        };
        self.picked_in_guards(st, tables, selection, ctes);
    }

    /// The same for a `DELETE`'s `USING`: `WITH mine AS (SELECT name FROM locks WHERE name =
    /// $1 AND owner = $2) DELETE FROM locks USING mine WHERE locks.name = mine.name`.
    pub(super) fn picked_in_using_guards(
        &self,
        st: &mut Statement,
        using: Option<&Vec<ast::TableWithJoins>>,
        selection: &Expr,
        ctes: &[&ast::Cte],
    ) {
        if let Some(tables) = using {
            self.picked_in_guards(st, tables, selection, ctes);
        }
    }

    fn picked_in_guards(
        &self,
        st: &mut Statement,
        tables: &[ast::TableWithJoins],
        selection: &Expr,
        ctes: &[&ast::Cte],
    ) {
        let (Some(table), Some(target)) = (st.table.clone(), st.names.first().cloned()) else {
            return;
        };
        let (_, joined) = self.filter_of(selection);
        let mut found: Vec<Guard> = Vec::new();
        for t in tables.iter().filter(|t| t.joins.is_empty()) {
            let (derived, picked_by) = match &t.relation {
                ast::TableFactor::Derived {
                    subquery,
                    alias: Some(derived),
                    ..
                } => (derived.name.value.to_lowercase(), single_table(subquery)),
                ast::TableFactor::Table {
                    name,
                    alias,
                    args: None,
                    ..
                } => {
                    let named = object_name(name);
                    let Some(cte) = ctes
                        .iter()
                        .find(|c| c.alias.name.value.to_lowercase() == named)
                    else {
                        continue;
                    };
                    let derived = alias
                        .as_ref()
                        .map_or(named, |a| a.name.value.to_lowercase());
                    (derived, narrowed_table(&cte.query))
                }
                _ => continue,
            };
            let derived = derived.as_str();
            let Some((select, inner_table, inner_alias)) = picked_by else {
                continue;
            };
            let Some(column) = selected_column(select) else {
                continue;
            };
            if inner_table != table {
                continue;
            }
            // the write's row is the one the subquery picked: `<target>.c = <derived>.c`
            let picked = joined.iter().any(|k| {
                let (Some(l), Some(r)) = (&k.left.bare, &k.right.bare) else {
                    return false;
                };
                let ours = |c: &Col| c.qualifier.as_deref() == Some(derived);
                let theirs = |c: &Col| c.qualifier.is_some() && st.is_target(c);
                l.name == column
                    && r.name == column
                    && ((ours(l) && theirs(r)) || (ours(r) && theirs(l)))
            });
            if let (true, Some(where_)) = (picked, select.selection.as_ref()) {
                let (columns, comparisons) = self.filter_of(where_);
                found.push((inner_alias, columns, comparisons));
            }
        }
        add_guards(st, found, &target);
    }

    /// `EXISTS (SELECT .. FROM <table> a WHERE a.c = <target>.c AND ..)`: the subquery's alias
    /// and conditions.
    fn exists_guard(&self, st: &Statement, table: &str, subquery: &ast::Query) -> Option<Guard> {
        let (select, from, alias) = single_table(subquery)?;
        if from != table || alias == from {
            return None;
        }
        let (columns, comparisons) = self.filter_of(select.selection.as_ref()?);
        let correlated = comparisons.iter().any(|k| {
            let (Some(l), Some(r)) = (&k.left.bare, &k.right.bare) else {
                return false;
            };
            let ours = |c: &Col| c.qualifier.as_deref() == Some(alias.as_str());
            let theirs = |c: &Col| c.qualifier.is_some() && st.is_target(c);
            l.name == r.name && ((ours(l) && theirs(r)) || (ours(r) && theirs(l)))
        });
        correlated.then_some((alias, columns, comparisons))
    }

    /// `<target>.c = (SELECT j.c FROM <table> j [JOIN ..] WHERE ..)`: the row the subquery
    /// picks meets the conditions of its `WHERE` on the table, also when the query joins other
    /// tables (their columns keep their own aliases; an unqualified column of a join may be
    /// another table's, so a condition with one is left out).
    fn picked_guard(
        &self,
        st: &Statement,
        table: &str,
        expr: &Expr,
        subquery: &ast::Query,
    ) -> Option<Guard> {
        let column = self.value(expr).bare.filter(|c| st.is_target(c))?;
        let ast::SetExpr::Select(select) = subquery.body.as_ref() else {
            return None;
        };
        let [from] = select.from.as_slice() else {
            return None;
        };
        let ast::TableFactor::Table { name, alias, .. } = &from.relation else {
            return None;
        };
        let (from_table, alias) = table_and_alias(name, alias.as_ref());
        if from_table != table || selected_column(select)? != column.name {
            return None;
        }
        let (columns, comparisons) = self.filter_of(select.selection.as_ref()?);
        if from.joins.is_empty() {
            return Some((alias, columns, comparisons));
        }
        let qualified = |c: &Col| c.qualifier.is_some();
        let comparisons = comparisons
            .into_iter()
            .filter(|k| {
                k.left.columns.iter().all(qualified) && k.right.columns.iter().all(qualified)
            })
            .collect();
        let columns = columns.into_iter().filter(qualified).collect();
        Some((alias, columns, comparisons))
    }

    /// `<target>.c IN (SELECT c FROM <table> WHERE ..)`, or `SELECT c FROM <cte>` with the
    /// `WITH` query `<cte>` selecting `c` from the table: that query's alias and conditions.
    fn in_guard(
        &self,
        st: &Statement,
        table: &str,
        expr: &Expr,
        subquery: &ast::Query,
        ctes: &[&ast::Cte],
    ) -> Option<Guard> {
        let column = self.value(expr).bare.filter(|c| st.is_target(c))?;
        let (select, from, _) = single_table(subquery)?;
        let source = if from == table {
            select
        } else {
            let cte = ctes
                .iter()
                .find(|c| c.alias.name.value.to_lowercase() == from)?;
            if selected_column(select)? != column.name {
                return None;
            }
            let (inner, inner_from, _) = single_table(&cte.query)?;
            if inner_from != table {
                return None;
            }
            inner
        };
        if selected_column(source)? != column.name {
            return None;
        }
        let (_, _, alias) = single_table_of(source)?;
        let (columns, comparisons) = self.filter_of(source.selection.as_ref()?);
        Some((alias, columns, comparisons))
    }
}

/// A subquery's alias with the columns and comparisons of its `WHERE`.
type Guard = (String, Vec<Col>, Vec<Cmp>);

/// Add guards to the write's filter, their alias named as the write's `target`.
fn add_guards(st: &mut Statement, found: Vec<Guard>, target: &str) {
    let Some(filter) = st.filter.as_mut() else {
        return;
    };
    for (alias, columns, comparisons) in found {
        let (columns, comparisons) = renamed(columns, comparisons, &alias, target);
        filter.columns.extend(columns);
        filter.comparisons.extend(comparisons);
    }
}

/// The subquery's columns qualified with its `alias` named as the write's `target` (its
/// unqualified columns are its own table's, which is the target's too).
fn renamed(
    mut columns: Vec<Col>,
    mut comparisons: Vec<Cmp>,
    alias: &str,
    target: &str,
) -> (Vec<Col>, Vec<Cmp>) {
    let name = |c: &mut Col| {
        if c.qualifier.as_deref() == Some(alias) {
            c.qualifier = Some(target.to_string());
        }
    };
    columns.iter_mut().for_each(name);
    for k in comparisons.iter_mut() {
        k.left.columns.iter_mut().for_each(name);
        k.right.columns.iter_mut().for_each(name);
        k.left.bare.iter_mut().for_each(name);
        k.right.bare.iter_mut().for_each(name);
    }
    (columns, comparisons)
}

/// A query that selects from one table with no join: its `SELECT`, the table and its alias
/// (the table's name without one).
fn single_table(q: &ast::Query) -> Option<(&ast::Select, String, String)> {
    match q.body.as_ref() {
        ast::SetExpr::Select(select) => single_table_of(select).map(|(_, t, a)| (&**select, t, a)),
        _ => None,
    }
}

fn single_table_of(select: &ast::Select) -> Option<(&ast::Select, String, String)> {
    let [from] = select.from.as_slice() else {
        return None;
    };
    if !from.joins.is_empty() {
        return None;
    }
    let ast::TableFactor::Table { name, alias, .. } = &from.relation else {
        return None;
    };
    let (table, alias) = table_and_alias(name, alias.as_ref());
    Some((select, table, alias))
}

/// [`single_table`], or a `SELECT` of one table joined only to set-returning functions
/// (`JOIN unnest($1) u(id) ON u.id = j.id`), which narrow its rows and read no other table.
fn narrowed_table(q: &ast::Query) -> Option<(&ast::Select, String, String)> {
    let ast::SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let [from] = select.from.as_slice() else {
        return None;
    };
    let narrows = |j: &ast::Join| {
        matches!(
            &j.relation,
            ast::TableFactor::UNNEST { .. }
                | ast::TableFactor::Function { .. }
                | ast::TableFactor::Table { args: Some(_), .. }
        )
    };
    if !from.joins.iter().all(narrows) {
        return None;
    }
    let ast::TableFactor::Table {
        name,
        alias,
        args: None,
        ..
    } = &from.relation
    else {
        return None;
    };
    let (table, alias) = table_and_alias(name, alias.as_ref());
    Some((select, table, alias))
}

/// A table's name and the name its columns are qualified with (its alias, or its name).
fn table_and_alias(name: &ast::ObjectName, alias: Option<&ast::TableAlias>) -> (String, String) {
    let table = object_name(name);
    let alias = alias.map_or_else(|| table.clone(), |a| a.name.value.to_lowercase());
    (table, alias)
}

/// The one column a `SELECT` selects, by name.
fn selected_column(select: &ast::Select) -> Option<String> {
    let [ast::SelectItem::UnnamedExpr(e)] = select.projection.as_slice() else {
        return None;
    };
    match e {
        Expr::Identifier(i) => Some(i.value.to_lowercase()),
        Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.to_lowercase()),
        _ => None,
    }
}
