#!/usr/bin/env bash
# The project's test command: formatting, lints, the whole test suite against real servers,
# and locklint over the runtime crate's own code.
set -euo pipefail
cd "$(dirname "$0")/.."

# Server binaries for the runtime tests (installed with apt-get when missing and possible;
# the test harness starts throwaway servers when none is reachable).
bash scripts/ensure-services.sh

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
# the companion crate's own code uses only the correct lock forms
cargo run --quiet --bin locklint -- check runtime/
