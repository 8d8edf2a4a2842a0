//! Configuration text: `locklint.toml` and `Cargo.toml` with `[package.metadata.locklint]`,
//! with valid and misspelt keys, wrong types, globs and nested tables.

use super::Gen;
use crate::rng::{Draw, Rng};

const RULES: &[&str] = &[
    "\"get-then-set\"",
    "\"separate-expire\"",
    "\"unfenced-write\"",
    "\"advisory-lock-on-pool\"",
    "\"parse-error\"",
    "\"no-such-rule\"",
    "\"unconditonal-release\"",
    "\"\"",
];

pub fn generate(rng: &mut Rng, max_len: usize) -> String {
    let mut g = Gen::new(rng, max_len);
    let cargo = g.rng.one_in(3);
    if cargo {
        g.pick(&[
            "[package]\nname = \"x\"\nversion = \"0.1.0\"\n\n[package.metadata.locklint]\n",
            "[workspace]\nmembers = [\"a\"]\n\n[workspace.metadata.locklint]\n",
            "[package]\nname = \"x\"\n[package.metadata]\nlocklint = { select = [\"get-then-set\"] }\n",
        ]);
    }
    let n = g.rng.range(1, 10);
    for _ in 0..n {
        if g.full() {
            break;
        }
        entry(&mut g, 0);
        g.push("\n");
    }
    g.out
}

fn entry(g: &mut Gen, depth: usize) {
    match g.rng.below(14) {
        0 => list(g, "select", RULES),
        1 => list(g, "ignore", RULES),
        2 => list(g, "extend-select", RULES),
        3 => g.pick(&["fail-on = \"error\"", "fail-on = \"warning\"", "fail-on = 3", "fail-on = \"never\""]),
        4 => g.pick(&["[severity]\nconstant-lock-value = \"error\"", "[severity]\nget-then-set = \"info\"", "severity = []"]),
        5 => list(g, "exclude", &["\"generated\"", "\"vendor/**\"", "\"[\"", "\"**/*.rs\"", "\"../..\"", "\"{a,b\""]),
        6 => g.pick(&["[per-path-ignores]\n\"tests/**\" = [\"unconditional-release\"]", "[per-path-ignores]\n\"[\" = [\"x\"]"]),
        7 => list(g, "lock-key-patterns", &["\"guard\"", "\"\"", "\"(\"", "\"claim\""]),
        8 => g.pick(&[
            "lock-table = { name-columns = [\"name\"], owner-columns = [\"owner\"], expiry-columns = [\"expires_at\"] }",
            "lock-table = { owner-column = \"x\" }",
            "fence-columns = [\"fence\", 1]",
        ]),
        9 => g.pick(&[
            "[locks.\"lock:report:{}\"]\npurpose = \"efficiency\"",
            "[locks.\"{{}}\"]\npurpose = \"nope\"",
            "[locks]\nx = 1",
        ]),
        10 => g.pick(&[
            "redis-version = \"8.4\"",
            "redis-version = \"99999999999999999999.1\"",
            "default-ttl = \"30s\"",
            "default-ttl = \"99999999999999999999m\"",
            "default-ttl = \"-1ms\"",
            "default-ttl = \"\"",
        ]),
        11 => g.pick(&[
            "extend = \"../locklint.toml\"",
            "extend = \"locklint.toml\"",
            "extend = \"/nonexistent\"",
            "help-uri = \"https://docs.example.com/{rule}\"",
        ]),
        12 if g.deeper(depth) => {
            g.push("x = ");
            value(g, depth + 1);
        }
        _ => g.pick(&["slect = [\"get-then-set\"]", "[[array]]\na = 1", "a.b.c = 1", "= 1", "\"quoted key\" = 'v'"]),
    }
}

fn list(g: &mut Gen, key: &str, items: &[&str]) {
    g.push(key);
    g.push(" = [");
    for i in 0..g.rng.range(0, 4) {
        if i > 0 {
            g.push(", ");
        }
        g.pick(items);
    }
    g.push("]");
}

fn value(g: &mut Gen, depth: usize) {
    if !g.deeper(depth) {
        g.pick(&[
            "1",
            "\"s\"",
            "true",
            "1979-05-27T07:32:00Z",
            "1.5",
            "'''multi\nline'''",
        ]);
        return;
    }
    match g.rng.below(3) {
        0 => {
            g.push("[");
            value(g, depth + 1);
            g.push(", ");
            value(g, depth + 1);
            g.push("]");
        }
        1 => {
            g.push("{ a = ");
            value(g, depth + 1);
            g.push(" }");
        }
        _ => g.pick(&["1", "\"s\"", "inf", "nan"]),
    }
}
