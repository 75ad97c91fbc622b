#!/usr/bin/env bash
# Installs what building, testing and benchmarking pfcswitch needs on a fresh
# Debian/Ubuntu machine. Idempotent; needs root (it calls apt-get).
#   --tests   only what the test suite uses (scripts/test.sh): not Open vSwitch, which only
#             the benches compare with.
set -euo pipefail
tests_only=0
[ "${1:-}" = "--tests" ] && tests_only=1

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: pfcswitch creates network namespaces and XDP programs: run as root (sudo -E, keeping cargo on PATH)" >&2
  exit 1
fi
packages=(
  clang libelf-dev zlib1g-dev pkg-config m4 # the XDP program and libbpf/libxdp (built by cargo)
  iproute2 iputils-ping util-linux           # ip netns / veth testbeds, ping, setpriv
  ethtool                                    # testbed hosts checksum in software (see testbed/mod.rs)
  tshark                                     # tests read what the tools and the switch put on the wire
  libopenmpi-dev openmpi-bin                 # the simulator over MPI ranks (pfcsim --features mpi; bindgen finds clang's libclang)
)
# Without what they recommend: Mininet (a test runs a network through pfcswitch with it)
# and Open vSwitch (the benches compare pfcswitch with its AF_XDP datapath; the tests do
# not need it; its daemons are started by the benches in their testbeds, never as services).
lean=(mininet)
[ "$tests_only" -eq 1 ] || lean+=(openvswitch-switch)
not_installed() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(not_installed "${packages[@]}")
mapfile -t extra < <(not_installed "${lean[@]}")
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ] || [ ${#extra[@]} -gt 0 ]; then
  # Once for both installs: on a fresh machine an update is several seconds.
  apt-get update -q
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  # tshark's package asks whether non-root users may capture: no (the tests run as root).
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get install -y -q "${missing[@]}"
fi
if [ ${#extra[@]} -gt 0 ]; then
  echo "setup: installing ${extra[*]}"
  # Debian's policy-rc.d: no service the packages ship is started (OVS's would run in the
  # root namespace and load its kernel module; the benches start their own daemons).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get install -y -q --no-install-recommends "${extra[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi
