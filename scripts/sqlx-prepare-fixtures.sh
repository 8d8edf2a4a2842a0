#!/usr/bin/env bash
# Regenerates tests/compile-fixtures/.sqlx, the query data that `sqlx::query!` in the fixed
# fixtures compiles against (the normal build is offline). Needs `psql` and the PostgreSQL at
# DATABASE_URL; the tables come from tests/compile-fixtures/schema.sql, in a throwaway schema.
set -euo pipefail
cd "$(dirname "$0")/.."
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
schema="locklint_prepare_$$"
crate=tests/compile-fixtures

psql "$url" -v ON_ERROR_STOP=1 -q -c "CREATE SCHEMA $schema"
trap 'psql "$url" -q -c "DROP SCHEMA IF EXISTS $schema CASCADE"' EXIT
PGOPTIONS="-c search_path=$schema" psql "$url" -v ON_ERROR_STOP=1 -q -f "$crate/schema.sql"

rm -rf "$crate/.sqlx"
mkdir "$crate/.sqlx"
cargo clean --quiet -p locklint-compile-fixtures
case "$url" in *\?*) sep='&' ;; *) sep='?' ;; esac
SQLX_PREPARE=1 SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$PWD/$crate/.sqlx" \
    DATABASE_URL="${url}${sep}options=-c%20search_path%3D${schema}" \
    cargo build --quiet -p locklint-compile-fixtures
ls "$crate/.sqlx"
