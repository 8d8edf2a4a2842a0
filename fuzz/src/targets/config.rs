//! `config`: `locklint.toml` and `Cargo.toml` with `[package.metadata.locklint]`, discovered
//! for a small project as `locklint check` does, and loaded with `--config`.

use super::{files, has_ext, Target};
use crate::gen;
use locklint::engine::{self, ConfigSource, Options};

/// A file for the configuration to govern.
const CODE: &str = "pub async fn f(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {\n    let _: bool = redis::AsyncCommands::set_nx(con, \"lock:a\", \"1\").await?;\n    Ok(())\n}\n";

fn run(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let code = files::fresh_file("rs");
    let dir = code.parent().expect("a scratch directory").to_path_buf();
    std::fs::write(&code, CODE).expect("a scratch file");
    let name = if text.contains("[package") || text.contains("[workspace") {
        "Cargo.toml"
    } else {
        "locklint.toml"
    };
    let config = dir.join(name);
    std::fs::write(&config, text.as_bytes()).expect("a scratch file");
    let _ = locklint::config::load(&config);
    for source in [ConfigSource::Discover, ConfigSource::File(config.clone())] {
        let report = engine::run(&Options {
            paths: vec![dir.clone()],
            config: source,
            ..Default::default()
        });
        let _ = locklint::output::render(
            &report,
            locklint::output::Format::Json,
            locklint::output::human::Style {
                color: false,
                width: 100,
            },
            false,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

pub const TARGET: Target = Target {
    name: "config",
    about: "locklint.toml and Cargo.toml metadata",
    ext: "toml",
    seed: |path, bytes| has_ext(path, "toml").then(|| bytes.to_vec()),
    builtin: &[
        "select = [\"get-then-set\", \"separate-expire\"]\nextend-select = [\"constant-lock-value\"]\nignore = [\"lock-result-ignored\"]\nfail-on = \"error\"\n\n[severity]\nconstant-lock-value = \"error\"\n",
        "exclude = [\"generated\", \"vendor/**\"]\n[per-path-ignores]\n\"tests/**\" = [\"unconditional-release\"]\n",
        "lock-key-patterns = [\"guard\", \"claim\"]\nfence-columns = [\"fence\", \"epoch\"]\nlock-table = { name-columns = [\"name\"], owner-columns = [\"owner\"], expiry-columns = [\"expires_at\"] }\n\n[locks.\"lock:report:{}\"]\npurpose = \"efficiency\"\n",
        "redis-version = \"8.4\"\ndefault-ttl = \"30s\"\nhelp-uri = \"https://docs.example.com/locklint/{rule}\"\n",
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n\n[package.metadata.locklint]\nselect = [\"get-then-set\"]\n",
    ],
    generate: Some(|rng, max| gen::config::generate(rng, max).into_bytes()),
    dictionary: &[
        "[", "]", "{", "}", "\"", "'''", "=", ",", "\n", "[severity]\n", "select = [", "\"**\"",
        "extend = \"locklint.toml\"\n", ".", "é",
    ],
    run,
};
