#!/usr/bin/env bash
# The demo: builds a 3-host netns testbed, runs pfcswitch, sends traffic (plain and
# lossless under congestion), prints the switch's counters, and tears everything down.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --workspace
./target/release/pfctools demo "$@"
