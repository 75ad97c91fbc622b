#!/bin/bash
# What a `stats` request costs the switch's threads: an idle 2-port switch on two veth
# pairs in a namespace of its own, N requests through the control socket one after
# another, and each thread's CPU time (utime + stime from /proc) per second idle and per
# request. Compare two binaries by running it for each, alternating.
#
#   sudo scripts/stats-cost.sh [PFCSWITCH_BINARY] [N]
set -euo pipefail
bin=${1:-target/release/pfcswitch}
n=${2:-1000}
ns=pfcs-stats-cost-$$
dir=$(mktemp -d)
chmod 700 "$dir"
cleanup() {
    [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link add name a type veth peer name a2
ip -n "$ns" link add name b type veth peer name b2
for i in a a2 b b2; do ip -n "$ns" link set dev "$i" up; done
cat > "$dir/sw.toml" <<EOF
name = "stats-cost"
[dataplane]
busy_poll_us = 0
[[port]]
iface = "a"
[[port]]
iface = "b"
EOF
ip netns exec "$ns" "$bin" run -c "$dir/sw.toml" --socket "$dir/sock" > "$dir/log" 2>&1 &
pid=$!
for _ in $(seq 50); do [ -S "$dir/sock" ] && break; sleep 0.1; done
sleep 1
python3 - "$n" "$dir/sock" "$pid" <<'PY'
import os, socket, sys, time
n, path, pid = int(sys.argv[1]), sys.argv[2], sys.argv[3]
hz = os.sysconf('SC_CLK_TCK')

def threads():
    out = {}
    for t in os.listdir(f'/proc/{pid}/task'):
        fields = open(f'/proc/{pid}/task/{t}/stat').read().rsplit(')', 1)[1].split()
        out[t] = (open(f'/proc/{pid}/task/{t}/comm').read().strip(), int(fields[11]) + int(fields[12]))
    return out

def spent(before, after, seconds, per):
    for t, (comm, ticks) in sorted(after.items()):
        d = (ticks - before.get(t, (comm, 0))[1]) / hz
        if d > 0:
            print(f"  {comm:16s} {d / seconds * 1e3:7.1f} ms/s" + (f", {d / per * 1e6:6.0f} us per request" if per else ""))

a = threads(); time.sleep(5); b = threads()
print("idle, 5 s:")
spent(a, b, 5, 0)
t0 = time.time()
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b'{"cmd":"stats"}\n')
    reply = b''
    while not reply.endswith(b'\n'):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        reply += chunk
    s.close()
elapsed = time.time() - t0
c = threads()
print(f"{n} stats requests in {elapsed:.1f} s ({n / elapsed:.0f}/s):")
spent(b, c, elapsed, n)
PY
