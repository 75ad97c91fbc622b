#!/usr/bin/python3
"""A small Mininet network through pfcswitch, and a PFC-paused lossless flow.

    sudo PATH=$PWD/target/release:$PATH /usr/bin/python3 integrations/mininet/demo.py

One pfcswitch (1G ports, priority 3 lossless) and three hosts. Every host pings every
other; then h3 sends PFC pauses for priority 3 (pfctools storm) while h1 sends it
priority-3 frames (pfctools gen): the switch holds them and, its buffer filling, pauses
h1 in turn. Prints what happened as JSON: the ping loss, what the generator sent, and the
switch's counters for the three ports.
"""

import json
import os
import sys
import time
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mininet.log import setLogLevel  # noqa: E402
from mininet.net import Mininet  # noqa: E402
from mininet.topo import SingleSwitchTopo  # noqa: E402

from pfcswitch_mn import PfcHost, PfcSwitch  # noqa: E402


def main():
    setLogLevel(os.environ.get("MN_LOG", "warning"))
    switch = partial(PfcSwitch, speed="1G", lossless=[3])
    net = Mininet(SingleSwitchTopo(3), switch=switch, host=PfcHost, controller=None, autoSetMacs=True,
                  waitConnected=False)
    s1 = None
    try:
        net.start()
        s1, (h1, h2, h3) = net.get("s1"), net.get("h1", "h2", "h3")
        ping_loss = net.pingAll(timeout=2)
        storm = h3.popen(["pfctools", "storm", "-i", "h3-eth0", "--prio", "3", "-s", "1", "--speed", "1G"])
        time.sleep(0.2)
        # A count, not a duration: what h1 sends is then the same on any machine (a paced
        # sender that wakes late skips what fell due meanwhile, as a NIC's rate limiter
        # does). The duration only bounds a sender that cannot keep up at all.
        gen = h1.cmd("pfctools gen -i h1-eth0 --dst-mac %s --dscp 3 --rate 5k --size 1000 --count 2500 --duration 3 "
                     "--tx-only --speed 1G --json" % h3.MAC())
        storm.wait(timeout=10)
        stats = s1.stats()
        ports = {p["iface"]: p for p in stats["ports"]}
        print(json.dumps({
            "ping_loss_percent": ping_loss,
            "gen": json.loads(gen[gen.index("{"):]),
            "ports": ports,
            "pfcstat": s1.ctl("pfcstat"),
        }))
    finally:
        net.stop()
        if s1 is not None:
            print(json.dumps({"switch_exit_status": s1.exit_status}))


if __name__ == "__main__":
    main()
