//! External effects made while a lock is held: object-store puts and deletes (aws-sdk-s3,
//! object_store), Redis stream entries added or deleted, Kafka and RabbitMQ messages, outbound
//! HTTP requests that change something. None of them can compare a fencing token unless the
//! service on the other side checks one: a holder that lost the lock still makes them.

use super::*;
use crate::ir::Call;

/// The calls of one library that make an external effect.
struct Effect {
    /// The library's path, which a file that uses it names (`aws_sdk_s3`).
    library: &'static str,
    /// Method names that make the effect.
    methods: &'static [&'static str],
    /// Arguments the method takes at least (tells `send(record, timeout)` from `send()`).
    min_args: usize,
    /// What is affected, for people.
    what: &'static str,
}

/// In the order they are tried: a file that names several libraries gives a method name to
/// the first whose names it is.
const EFFECTS: &[Effect] = &[
    Effect {
        library: "aws_sdk_s3",
        methods: &[
            "put_object",
            "delete_object",
            "delete_objects",
            "copy_object",
            "complete_multipart_upload",
        ],
        min_args: 0,
        what: "object store",
    },
    Effect {
        library: "object_store",
        methods: &[
            "put",
            "put_opts",
            "put_multipart",
            "delete",
            "copy",
            "rename",
        ],
        min_args: 1,
        what: "object store",
    },
    Effect {
        library: "redis",
        methods: &["xadd", "xadd_map", "xadd_maxlen", "xdel", "xtrim"],
        min_args: 1,
        what: "Redis stream",
    },
    Effect {
        library: "rdkafka",
        methods: &["send", "send_result"],
        min_args: 1,
        what: "Kafka",
    },
    Effect {
        library: "lapin",
        methods: &["basic_publish"],
        min_args: 1,
        what: "RabbitMQ",
    },
    Effect {
        library: "reqwest",
        methods: &["post", "put", "patch", "delete"],
        min_args: 1,
        what: "HTTP",
    },
];

/// What a method call affects outside the program, if anything (`object store put_object`).
fn effect_of(text: &str, c: &Call) -> Option<String> {
    if !c.method {
        return None;
    }
    EFFECTS
        .iter()
        .filter(|e| text.contains(e.library))
        .find(|e| e.methods.contains(&c.name.as_str()) && c.args.len() >= e.min_args)
        .map(|e| format!("{} {}", e.what, c.name))
}

/// Collect the external effects `func` makes between event indexes `start` and `end`.
pub(super) fn effects_between(
    file: &FileIr,
    func: &Function,
    start: usize,
    end: usize,
    lock: &mut Lock,
) {
    let text = file.file.text.as_str();
    for e in &func.events {
        let Event::Call(c) = e else {
            continue;
        };
        if c.id.index <= start || c.id.index >= end {
            continue;
        }
        let Some(target) = effect_of(text, c) else {
            continue;
        };
        push_write(
            &mut lock.protects,
            Write {
                site: Site::new(&file.file, c.span),
                function: func.name.clone(),
                target,
                idempotent: false,
                fenced: false,
                same_session: false,
                external: true,
                conditional_update: false,
                after_read: false,
            },
        );
    }
}
