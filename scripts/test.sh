#!/usr/bin/env bash
# The whole test suite: formatting and lints, unit tests, and the netns integration tests
# (which build real namespaces and run the real binaries; they need root).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo fmt --all -- --check
# No module imports one that imports it back (docs/architecture.md relies on it).
python3 scripts/check-import-cycles.py
# With the simulator's MPI feature, so that one build serves every test (the default
# build needs no MPI; sim/tests/sim/mpi.rs runs the simulator under mpirun).
features=(--features pfcsim/mpi)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release --workspace --all-targets "${features[@]}"
# The lints also read the simulator's event-engine bench, which the build leaves out: its
# feature brings nexosim, which the tests never need (sim/Cargo.toml).
cargo clippy --release --workspace --all-targets "${features[@]}" --features pfcsim/des-bench -- -D warnings
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
cargo test --release --workspace "${features[@]}" "$@"
