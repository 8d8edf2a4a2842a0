#!/usr/bin/env bash
# The project's test command: formatting, lints, the whole test suite against real servers,
# and locklint over the runtime crate's own code.
set -euo pipefail
cd "$(dirname "$0")/.."

# Server binaries for the runtime tests (installed with apt-get when missing and possible;
# the test harness starts throwaway servers when none is reachable).
bash scripts/ensure-services.sh

# A one-off build from a clean clone gains nothing from incremental compilation data.
if [ -n "${CI:-}" ]; then
    export CARGO_INCREMENTAL=0
fi

cargo fmt --all -- --check

# Each cargo feature of the companion crate builds alone (type checking only). These checks
# resolve the crate's dependencies with other features than the workspace build, so they run
# in a target directory of their own, at low priority, beside the main build, filling the
# cores it leaves idle; their result is collected before the end.
target_dir="${CARGO_TARGET_DIR:-target}"
feature_log="$target_dir/feature-checks.log"
mkdir -p "$target_dir"
(
    for feature in redis redis-cluster postgres mysql sqlite tracing; do
        echo "== locklint-runtime --no-default-features --features $feature"
        nice -n 10 cargo check -q -p locklint-runtime --no-default-features --features "$feature" \
            --target-dir "$target_dir/feature-checks" || exit 1
    done
) >"$feature_log" 2>&1 &
feature_checks=$!
# a failing step ends the script: do not leave the checks running behind it
trap 'pkill -P "$feature_checks" 2>/dev/null; kill "$feature_checks" 2>/dev/null || true' EXIT

# Clippy's lints, as errors, on every target of every workspace crate, in the same build as
# the tests: clippy's driver compiles the workspace's own crates (dependencies are built by
# rustc once, for both). This is `cargo clippy --workspace --all-targets -- -D warnings`
# without checking every dependency a second time.
clippy_driver="$(command -v clippy-driver || true)"
if [ -z "$clippy_driver" ]; then
    clippy_driver="$(rustc --print sysroot)/bin/clippy-driver"
fi
if [ ! -x "$clippy_driver" ]; then
    echo "test.sh: clippy is not installed (rustup component add clippy)" >&2
    exit 1
fi
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-Dwarnings"
# benches and examples are built (and linted) too, not run
cargo test --workspace --all-targets --no-run
cargo test --workspace

trap - EXIT
if ! wait "$feature_checks"; then
    cat "$feature_log" >&2
    echo "test.sh: a feature of locklint-runtime does not build alone (see above)" >&2
    exit 1
fi
cat "$feature_log"

# The companion crate's own code uses only the correct lock forms. The binary is the one the
# test run just built (`cargo run` would resolve features for one package and build again).
"$target_dir/debug/locklint" check runtime/
