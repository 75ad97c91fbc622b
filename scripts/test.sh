#!/usr/bin/env bash
# The whole test suite: formatting and lints, unit tests, and the netns integration tests
# (which build real namespaces and run the real binaries; they need root).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --tests
cargo fmt --all -- --check
# No module imports one that imports it back (docs/architecture.md relies on it).
python3 scripts/check-import-cycles.py
# With the simulator's MPI feature, so that one build serves every test (the default
# build needs no MPI; sim/tests/sim/mpi.rs runs the simulator under mpirun). Without its
# event-engine bench's (`des-bench`: nexosim and the thirty-odd crates under it, 45 s of
# CPU, and the bench, 9 s: half a minute of a suite bound by its two CPUs);
# DEVELOPERS.md's clippy command builds and lints it.
features=(--features pfcsim/mpi)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The lints run in the build: clippy-driver is rustc with clippy's lints (what `cargo
# clippy` runs on our crates, but to the end, code included), and CLIPPY_ARGS is how
# `cargo clippy -- -D warnings` passes its flags to it. A separate `cargo clippy` checked
# every crate again, dependencies included: a minute of the suite. The tests below build
# with the same wrapper, or cargo would build our crates again for them.
command -v clippy-driver >/dev/null || { echo "test: clippy is needed (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER=clippy-driver CLIPPY_ARGS=-Dwarnings
# The release build without debug information: the same code (debug information changes
# no instruction), an eighth less compiling (1 083 against 948 s of CPU from a clean
# clone, 2026-12-02). A user's `cargo build --release` keeps it, for perf and backtraces.
export CARGO_PROFILE_RELEASE_DEBUG=0
# And without the release profile's ThinLTO, which inlines across crates for speed and
# changes nothing the tests check (every built-in scenario's report is byte-identical
# with and without it); with it, each of the thirty-odd binaries a test build links (unit
# tests, integration tests, binaries, examples, the bench) would pay its own
# link-time pass over the whole dependency graph.
export CARGO_PROFILE_RELEASE_LTO=false
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
# The netns tests are the suite's longest part (4-5 minutes, one test at a time through
# their lock), and need only the binaries and their own test binary. So those are built
# first, and the netns tests start as soon as they are; the rest of the build (the unit
# tests, the other integration tests, benches and examples: a third of it) and then the
# other tests run beside them. Every switch, sender, sink and storm a netns test judges
# runs raised (nice -15 in an autogroup of its own: `Placement::raised`), so a compiler
# or a test at nice 0 gets only the CPU time they leave; an attempt the machine disturbed
# all the same is repeated and noted in the log of repeats. The same workspace and
# features in both builds: the second rebuilds nothing the first built.
cargo build --release --workspace "${features[@]}" --bins --test netns
netns_log="$(mktemp /tmp/pfcs-netns.XXXXXX)"
# In a session of its own, so that an interrupted suite can stop it with all it started
# (a script's background job ignores the terminal's Ctrl-C); the testbed it leaves is
# removed by the next test's `pfctools testbed clean`.
setsid cargo test --release --workspace "${features[@]}" --test netns "$@" > "$netns_log" 2>&1 &
netns_pid=$!
trap 'kill -TERM -- "-$netns_pid" 2>/dev/null; exit 130' INT TERM
rest=0
cargo build --release --workspace --all-targets "${features[@]}" || rest=$?
if [ "$rest" -eq 0 ]; then
    cargo test --release --workspace --exclude netns-tests "${features[@]}" "$@" || rest=$?
fi
netns=0
wait "$netns_pid" || netns=$?
echo "--- the netns tests (run beside the rest) ---"
cat "$netns_log"
rm -f "$netns_log"
if [ "$rest" -ne 0 ] || [ "$netns" -ne 0 ]; then
    echo "test: failed (the netns tests: exit $netns; the build and the other tests: exit $rest)" >&2
    exit 1
fi
