//! `sql`: whole `.sql` files.

use super::{check_text, has_ext, Target};
use crate::gen;

pub const TARGET: Target = Target {
    name: "sql",
    about: "whole SQL files",
    ext: "sql",
    seed: |path, bytes| has_ext(path, "sql").then(|| bytes.to_vec()),
    builtin: &[],
    generate: Some(|rng, max| gen::sql::generate(rng, max).into_bytes()),
    dictionary: &[
        "(",
        ")",
        "'",
        "\"",
        "`",
        "$$",
        "$1",
        "?",
        ";",
        "--",
        "/*",
        "*/",
        "E'\\'",
        "::",
        " AND ",
        "UPDATE locks SET owner = $1 WHERE name = $2;\n",
        "SELECT pg_advisory_lock(1);\n",
        "SELECT pg_advisory_unlock(1);\n",
        "DO $$ BEGIN ",
        " END $$;",
        "CASE WHEN ",
        "NOT ",
        "\\connect x\n",
        "é",
    ],
    run: |input| check_text("sql", &String::from_utf8_lossy(input)),
};
