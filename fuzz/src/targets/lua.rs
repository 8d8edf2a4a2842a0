//! `lua`: whole `.lua` files.

use super::{check_text, has_ext, Target};
use crate::gen;

pub const TARGET: Target = Target {
    name: "lua",
    about: "whole Lua files (Redis scripts)",
    ext: "lua",
    seed: |path, bytes| has_ext(path, "lua").then(|| bytes.to_vec()),
    builtin: &[],
    generate: Some(|rng, max| {
        // a `.lua` file without `redis.` is not analysed
        let mut s = gen::lua::generate(rng, max);
        if !s.contains("redis.") {
            s.push_str("\nreturn redis.call('del', KEYS[1])\n");
        }
        s.into_bytes()
    }),
    dictionary: &[
        "(",
        "{",
        "[",
        "do ",
        "end ",
        "function() ",
        "if x then ",
        "`",
        "[[",
        "]]",
        "--[[",
        "'",
        "\"",
        "\\",
        " and ",
        " .. ",
        "not ",
        "local x = ",
        "return ",
        "redis.call('del', KEYS[1])",
        "repeat ",
        " until x",
        "#",
        "é",
    ],
    run: |input| check_text("lua", &String::from_utf8_lossy(input)),
};
