//! `selftest`: checks the harness itself. Its inputs name a failure to cause (`panic`,
//! `thread-panic`, `overflow`, `abort`, `slow`, `memory`); anything else runs cleanly
//! (`outputs` slowly, but as several commands, none slow).

use super::Target;

#[inline(never)]
fn recurse(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        std::hint::black_box(recurse(std::hint::black_box(n - 1))) + 1
    }
}

fn run(input: &[u8]) {
    match input {
        b"panic" => panic!("selftest panic"),
        b"thread-panic" => {
            // a panic caught inside the code under test still counts
            let _ = std::thread::spawn(|| panic!("caught elsewhere")).join();
        }
        b"overflow" => {
            std::hint::black_box(recurse(u64::MAX));
        }
        b"abort" => std::process::abort(),
        b"slow" => std::thread::sleep(std::time::Duration::from_millis(1500)),
        // three outputs of 0.6 s on one analysis: one command's time is 0.6 s
        b"outputs" => {
            let each = std::time::Duration::from_millis(600);
            for _ in 0..3 {
                std::thread::sleep(each);
            }
            crate::exec::not_one_command(2 * each);
        }
        b"memory" => {
            let v = vec![1u8; 200 * 1024 * 1024];
            std::hint::black_box(&v);
        }
        _ => {}
    }
}

pub const TARGET: Target = Target {
    name: "selftest",
    about: "checks the harness: panics, stack overflow, abort, slow and memory-hungry inputs",
    ext: "txt",
    seed: |_, _| None,
    builtin: &[
        "ok",
        "panic",
        "thread-panic",
        "overflow",
        "abort",
        "slow",
        "memory",
        "ok",
    ],
    generate: None,
    dictionary: &[],
    run,
};
