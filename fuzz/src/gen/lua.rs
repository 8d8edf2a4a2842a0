//! Lua-ish text: Redis scripts (release, renew, acquire, hash locks) in Lua 5.1 with every
//! string and comment form, deep blocks and long operator chains.

use super::Gen;
use crate::rng::{Draw, Rng};

pub fn generate(rng: &mut Rng, max_len: usize) -> String {
    let mut g = Gen::new(rng, max_len);
    block(&mut g, 0);
    if g.rng.one_in(2) {
        g.push("return ");
        expr(&mut g, 1);
        g.push("\n");
    }
    g.out
}

fn block(g: &mut Gen, depth: usize) {
    let n = g.rng.range(1, 6);
    for _ in 0..n {
        if g.full() {
            break;
        }
        stmt(g, depth);
        g.pick(&["\n", " ", ";\n", "; "]);
    }
}

fn key(g: &mut Gen) {
    g.pick(&[
        "KEYS[1]",
        "KEYS[2]",
        "key",
        "lock",
        "KEYS[#KEYS]",
        "'lock:' .. ARGV[1]",
    ]);
}

fn stmt(g: &mut Gen, depth: usize) {
    match g.rng.below(16) {
        0 => {
            g.push("redis.call('");
            g.pick(&[
                "del",
                "DEL",
                "unlink",
                "pexpire",
                "expire",
                "pexpireat",
                "set",
                "hincrby",
                "publish",
            ]);
            g.push("', ");
            key(g);
            for _ in 0..g.rng.below(4) {
                g.push(", ");
                g.pick(&[
                    "ARGV[1]",
                    "ARGV[2]",
                    "'NX'",
                    "'XX'",
                    "'PX'",
                    "'KEEPTTL'",
                    "30000",
                    "1",
                ]);
            }
            g.push(")");
        }
        1 => {
            g.push("local ");
            g.ident();
            g.push(" = ");
            expr(g, depth + 1);
        }
        2 => {
            g.ident();
            g.push(" = ");
            expr(g, depth + 1);
        }
        3 | 4 if g.deeper(depth) => {
            g.push("if ");
            cond(g, depth + 1);
            g.push(" then ");
            block(g, depth + 1);
            if g.rng.one_in(3) {
                g.push(" elseif ");
                cond(g, depth + 1);
                g.push(" then ");
                block(g, depth + 1);
            }
            if g.rng.one_in(2) {
                g.push(" else ");
                block(g, depth + 1);
            }
            if g.rng.one_in(2) {
                g.pick(&[
                    "return 0 ",
                    "return redis.call('del', KEYS[1]) ",
                    "error('lost') ",
                    "break ",
                ]);
            }
            g.push(" end");
        }
        5 if g.deeper(depth) => {
            g.pick(&[
                "while ",
                "repeat ",
                "for i = 1, #KEYS do ",
                "for _, k in ipairs(KEYS) do ",
                "do ",
            ]);
            if g.out.ends_with("while ") {
                cond(g, depth + 1);
                g.push(" do ");
            }
            block(g, depth + 1);
            if g.out
                .rsplit("repeat ")
                .next()
                .is_some_and(|t| !t.contains("until"))
                && g.out.contains("repeat ")
            {
                g.push(" until ");
                cond(g, depth + 1);
            } else {
                g.push(" end");
            }
        }
        6 if g.deeper(depth) => {
            g.pick(&[
                "local function f(a, ...) ",
                "function M.release(k) ",
                "function o:m() ",
            ]);
            block(g, depth + 1);
            g.push(" end");
        }
        7 => {
            g.push("assert(");
            cond(g, depth + 1);
            g.push(", 'not the holder')");
        }
        8 => g.pick(&[
            "-- a comment `with` backticks? no",
            "--[[ long\ncomment ]]",
            "--[==[ ]] still ]==]",
            "local s = [[\nlong ' \" string]]",
            "local s = [=[ ]] ]=]",
            "local s = 'esc\\'aped\\\\' .. \"\\065\\x41\\z  \"",
            "redis.log(redis.LOG_WARNING, 'x')",
            "redis.replicate_commands()",
            "local t = {1, 2; x = 3, ['k'] = 4,}",
        ]),
        _ => {
            g.push("if redis.call('get', ");
            key(g);
            g.pick(&[
                ") == ARGV[1] then ",
                ") ~= ARGV[1] then return 0 end ",
                ") then ",
            ]);
            if g.out.ends_with("then ") {
                g.push("return redis.call('del', ");
                key(g);
                g.push(") end");
            }
        }
    }
}

fn cond(g: &mut Gen, depth: usize) {
    if !g.deeper(depth) {
        g.push("redis.call('get', KEYS[1]) == ARGV[1]");
        return;
    }
    match g.rng.below(6) {
        0 => {
            cond(g, depth + 1);
            g.pick(&[" and ", " or "]);
            cond(g, depth + 1);
        }
        1 => {
            g.pick(&["not ", "not (", "("]);
            let close = g.out.ends_with('(');
            cond(g, depth + 1);
            if close {
                g.push(")");
            }
        }
        2 => {
            g.push("redis.call('");
            g.pick(&["hexists", "sismember", "setnx", "exists", "get"]);
            g.push("', ");
            key(g);
            g.push(", ARGV[1]) == ");
            g.pick(&["1", "0", "ARGV[2]", "false"]);
        }
        _ => {
            expr(g, depth + 1);
            g.pick(&[" == ", " ~= ", " < ", " >= "]);
            expr(g, depth + 1);
        }
    }
}

fn expr(g: &mut Gen, depth: usize) {
    if !g.deeper(depth) {
        atom(g);
        return;
    }
    match g.rng.below(10) {
        0 | 1 => {
            expr(g, depth + 1);
            g.pick(&[" .. ", " + ", " * ", " and ", " or ", " == ", " ^ ", " % "]);
            expr(g, depth + 1);
        }
        2 => {
            g.pick(&["(", "tostring(", "tonumber(", "#", "-", "not "]);
            let close = g.out.ends_with('(');
            expr(g, depth + 1);
            if close {
                g.push(")");
            }
        }
        3 => {
            g.push("{");
            expr(g, depth + 1);
            g.push(", k = ");
            expr(g, depth + 1);
            g.push("}");
        }
        4 => {
            g.push("function(x) return ");
            expr(g, depth + 1);
            g.push(" end");
        }
        5 => {
            g.push("redis.call('get', ");
            key(g);
            g.push(")");
        }
        6 => {
            g.push("redis.pcall('set', ");
            key(g);
            g.push(", ARGV[1], 'NX', 'PX', ARGV[2])");
        }
        _ => atom(g),
    }
}

fn atom(g: &mut Gen) {
    match g.rng.below(5) {
        0 => g.number(),
        1 => g.pick(&[
            "ARGV[1]", "ARGV[2]", "KEYS[1]", "nil", "false", "true", "...", "#ARGV",
        ]),
        2 => g.pick(&[
            "'str'",
            "\"dq\"",
            "[[long]]",
            "[==[x]==]",
            "'\\n\\t\\\\'",
            "'é'",
        ]),
        _ => g.ident(),
    }
}
