#!/usr/bin/env bash
# Scaffold a new rule: its module in the rules crate (registered in the registry), its page in
# rules/, its line in both rule indexes, and an empty fixtures directory. The generated rule
# finds nothing and its page says so: the fixture test of the new rule fails until the rule is
# written and has its `bad_*` and `good_*` examples (see ARCHITECTURE.md, "Adding a rule").
#
#   bash scripts/new-rule.sh [--root DIR] <rule-id> <trace|file> <severity> "<summary>"
#
#   rule-id   the stable public name, kebab-case (`cross-slot-lock-keys`)
#   trace     a rule that reads Redis traces (`Rule::check`)
#   file      a rule that reads a file's SQL statements or Lua scripts (`Rule::check_file`)
#   severity  error or warning
#   --root    the checkout to change (default: the one holding this script)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ "${1:-}" == "--root" ]]; then
  root="$(cd "$2" && pwd)"
  shift 2
fi
usage() {
  echo "usage: new-rule.sh [--root DIR] <rule-id> <trace|file> <error|warning> \"<summary>\"" >&2
  exit 2
}
[[ $# -eq 4 ]] || usage
id="$1" kind="$2" severity="$3" summary="$4"

fail() {
  echo "new-rule: $*" >&2
  exit 1
}
[[ "$id" =~ ^[a-z][a-z0-9]*(-[a-z0-9]+)+$ ]] ||
  fail "\`$id\` is not a kebab-case name of at least two words (like \`cross-slot-lock-keys\`)"
[[ "$kind" == trace || "$kind" == file ]] || fail "kind must be \`trace\` or \`file\`, not \`$kind\`"
case "$severity" in
  error) sev=Error ;;
  warning) sev=Warning ;;
  *) fail "severity must be \`error\` or \`warning\`, not \`$severity\`" ;;
esac
[[ -n "$summary" && "$summary" != *[\"\|\\]* && "$summary" != *$'\n'* ]] ||
  fail "the summary must be one line of text without \`\"\`, \`|\` or \`\\\`"

module="${id//-/_}"
# CamelCase type name: cross-slot-lock-keys -> CrossSlotLockKeys
type=""
IFS=- read -ra words <<<"$id"
for w in "${words[@]}"; do type+="${w^}"; done

rules_src="$root/crates/locklint-rules/src"
lib="$rules_src/lib.rs"
page="$root/rules/$id.md"
rule_file="$rules_src/$module.rs"
for f in "$lib" "$root/rules/README.md" "$root/README.md"; do
  [[ -f "$f" ]] || fail "$f not found; is $root a locklint checkout?"
done
[[ ! -e "$rule_file" ]] || fail "$rule_file exists already"
[[ ! -e "$page" ]] || fail "$page exists already"
if grep -q "name: \"$id\"" -r "$rules_src" || grep -Eq "^(pub )?mod $module;" "$lib"; then
  fail "a rule named \`$id\` exists already"
fi

if [[ "$kind" == trace ]]; then
  own="Fixes, Rule, RuleInfo"
  imports="use locklint_project::{LockFacts, Trace};"
  method="    fn check(&self, trace: &Trace, facts: &LockFacts, fixes: Fixes<'_>, out: &mut Vec<Diagnostic>) {
        // Read \`trace.ops\` (one function with its lock helpers expanded; \`is_lock\` tells
        // the lock keys) and push findings built with \`matching::diagnostic\`; build a
        // finding's fix only when \`fixes.wants(&d)\`.
        let _ = (trace, facts, fixes, out);
    }"
else
  own="Rule, RuleInfo"
  imports="use locklint_ir::FileIr;
use locklint_project::Project;"
  method="    fn check_file(&self, file: &FileIr, project: &Project, out: &mut Vec<Diagnostic>) {
        // Read \`file.sql\` / \`file.lua\` (and \`locklint_project::sql\` for what a statement
        // means) and push findings built with \`sql_matching::sql_diagnostic\`.
        let _ = (file, project, out);
    }"
fi

cat >"$rule_file" <<EOF
//! \`$id\`: $summary.

use super::{$own};
use locklint_ir::diagnostic::{Diagnostic, Severity};
$imports

pub struct $type;

static INFO: RuleInfo = RuleInfo {
    name: "$id",
    summary: "$summary",
    severity: Severity::$sev,
    fixable: false,
    doc: include_str!("../../../rules/$id.md"),
};

impl Rule for $type {
    fn info(&self) -> &'static RuleInfo {
        &INFO
    }

$method
}
EOF

cat >"$page" <<EOF
# $id

**What it catches.** ${summary^}.

## Why it is wrong

### The failing interleaving

1. t=0ms: ...

## Example

### Bad

\`\`\`rust
\`\`\`

### Good

\`\`\`rust
\`\`\`

## How to fix

## What it leaves alone
EOF

mkdir -p "$root/fixtures/$id"
if command -v rustfmt >/dev/null; then
  rustfmt --edition 2021 "$rule_file"
fi

# insert line $2 before the first line of file $1 that starts with $3
insert_before() {
  ROW="$2" AT="$3" awk '!done && index($0, ENVIRON["AT"]) == 1 { print ENVIRON["ROW"]; done = 1 }
    { print }' "$1" >"$1.new"
  mv "$1.new" "$1"
}

# register: the module declaration (in order) and the registry entry (last rule)
MODULE="$module" TYPE="$type" awk '
  /^(pub )?mod [a-z0-9_]+;$/ {
    seen = 1; name = $0; sub(/^(pub )?mod /, "", name); sub(/;$/, "", name)
    if (!done && name > ENVIRON["MODULE"]) { print "mod " ENVIRON["MODULE"] ";"; done = 1 }
    print; next
  }
  seen && !done { print "mod " ENVIRON["MODULE"] ";"; done = 1 }
  /static RULES: &\[&dyn Rule\] = &\[/ { registry = 1 }
  registry && /^    \];/ { print "        &" ENVIRON["MODULE"] "::" ENVIRON["TYPE"] ","; registry = 0 }
  { print }
' "$lib" >"$lib.new"
mv "$lib.new" "$lib"

# the rule indexes: after the lock rules, before `parse-error`
insert_before "$root/rules/README.md" "| [$id] | $severity | $summary |" "| [parse-error] |"
insert_before "$root/rules/README.md" "[$id]: $id.md" "[parse-error]: parse-error.md"
insert_before "$root/README.md" "| [\`$id\`](rules/$id.md) | $summary | $severity |" \
  "| [\`parse-error\`](rules/parse-error.md) |"

cat <<EOF
new rule \`$id\`:
  $rule_file   (registered in crates/locklint-rules/src/lib.rs)
  $page
  $root/fixtures/$id/   (empty: add bad_* and good_* examples)
  a line in rules/README.md and in the README's rules table
next: write the page and the examples, then the rule, then
  INSTA_UPDATE=always cargo test --test fixtures -- $id/
EOF
