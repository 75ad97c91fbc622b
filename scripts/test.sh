#!/usr/bin/env bash
# The whole test suite: formatting and lints, unit tests, and the netns integration tests
# (which build real namespaces and run the real binaries; they need root).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo fmt --all -- --check
# No module imports one that imports it back (the README's Architecture relies on it).
python3 scripts/check-import-cycles.py
cargo build --release --workspace
cargo clippy --release --workspace --all-targets -- -D warnings
cargo test --release --workspace "$@"
