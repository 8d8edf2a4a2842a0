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
cargo clippy --workspace --all-targets -- -D warnings
# Each cargo feature of the companion crate builds alone (type checking only, which is cheap).
for feature in redis redis-cluster postgres mysql sqlite tracing; do
    cargo check -p locklint-runtime --no-default-features --features "$feature"
done
cargo test --workspace
# The companion crate's own code uses only the correct lock forms. The binary is the one the
# test run just built (`cargo run` would resolve features for one package and build again).
"${CARGO_TARGET_DIR:-target}/debug/locklint" check runtime/
