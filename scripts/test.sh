#!/usr/bin/env bash
# The whole test suite: formatting and lints, unit tests, and the netns integration tests
# (which build real namespaces and run the real binaries; they need root).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo fmt --all -- --check
# No module imports one that imports it back (docs/architecture.md relies on it).
python3 scripts/check-import-cycles.py
cargo build --release --workspace
cargo clippy --release --workspace --all-targets -- -D warnings
# Every repeat a test makes for the machine's sake is noted here, and said at the end.
PFCS_REPEAT_LOG="$(mktemp /tmp/pfcs-repeats.XXXXXX)"
export PFCS_REPEAT_LOG
said_repeats() {
    local n
    n=$(wc -l < "$PFCS_REPEAT_LOG")
    if [ "$n" -eq 0 ]; then
        echo "repeats for the machine: none"
    else
        echo "repeats for the machine: $n, by test:"
        cut -d: -f1 "$PFCS_REPEAT_LOG" | sort | uniq -c
        echo "(why each was repeated: $PFCS_REPEAT_LOG)"
    fi
}
trap said_repeats EXIT
cargo test --release --workspace "$@"
# The simulator split over the ranks of an MPI job (a feature: the default build needs no MPI).
if [ $# -eq 0 ]; then
    cargo clippy --release -p pfcsim --features mpi --all-targets -- -D warnings
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        cargo test --release -p pfcsim --features mpi --test mpi
fi
