"""pfcswitch as a Mininet switch.

From the command line (Mininet 2.3, Debian's `mininet` package; its `mn` runs Debian's
/usr/bin/python3):

    sudo mn --custom integrations/mininet/pfcswitch_mn.py --switch pfc --host pfc \
        --controller none --topo single,3

From a script:

    from mininet.net import Mininet
    from mininet.topo import SingleSwitchTopo
    from pfcswitch_mn import PfcHost, PfcSwitch

    net = Mininet(SingleSwitchTopo(3), switch=PfcSwitch, host=PfcHost, controller=None)
    net.start()
    ...
    net.stop()

`PfcSwitch` runs `pfcswitch run` on the switch's interfaces and stops it (SIGTERM, which
detaches its XDP programs) before Mininet deletes the links. Its options, as keyword
arguments or `--switch pfc,speed=1G,lossless=3`:

    speed     every port's line rate ("100M", "1G", "10G"); what pauses last depends on it
    lossless  the lossless priorities: a list, or "3" or "3+4" on the command line
    config    a pfcswitch config file (its ports name the Mininet interfaces, s1-eth1...);
              given, it is used as it is (`lossless` is then its business; `speed`
              still applies, as --speed)
    tagger    a Tagger table for this switch (--tagger-table)
    binary    the pfcswitch binary (default: `pfcswitch` on PATH)
    args      more `pfcswitch run` arguments, as one string

The switch's control socket is in a directory of its own, `/run/pfcswitch/mininet-<name>/`;
`ctl(args)` runs `pfcswitch ctl` against it (`s1.ctl("pfcstat")`), `stats()` returns
`ctl --json stats` parsed.

`PfcHost` is a Mininet host that checksums in software, as pfcswitch's own testbeds set
their hosts up: a veth leaves a frame's checksum to "hardware" that never comes when an XDP
program redirects the frame to an AF_XDP socket, and the receiving host would drop it.
"""

import json
import os
import shlex
import signal
import subprocess
import time

from mininet.log import error, info
from mininet.node import Host, Switch


class PfcHost(Host):
    """A Mininet host whose interfaces checksum in software."""

    def config(self, **params):
        r = super().config(**params)
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd("ethtool -K %s tx off >/dev/null 2>&1" % intf.name)
        return r


def _priorities(value):
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [int(p) for p in value]
    return [int(p) for p in str(value).replace("+", ",").split(",") if p != ""]


class PfcSwitch(Switch):
    """A Mininet switch that is a pfcswitch process on its interfaces."""

    def __init__(self, name, speed=None, lossless=None, config=None, tagger=None, binary=None, args="",
                 busy_poll_us=200, **params):
        super().__init__(name, **params)
        self.speed = speed
        # A Mininet network puts many switches on a few cores: each loop sleeps 200 us
        # after its last frame (pfcswitch's default too), never polling for a second as
        # a switch with a core of its own may be set to (None: pfcswitch's default).
        self.busy_poll_us = busy_poll_us
        self.lossless = _priorities(lossless)
        self.config_file = config
        self.tagger = tagger
        self.binary = binary or "pfcswitch"
        self.extra = shlex.split(args) if isinstance(args, str) else list(args)
        self.proc = None
        self.exit_status = None
        self.run_dir = "/run/pfcswitch/mininet-%s" % name
        self.socket = os.path.join(self.run_dir, "control.sock")
        self.log = os.path.join(self.run_dir, "pfcswitch.log")

    def _config(self, ifaces):
        """The config file `pfcswitch run` gets: the user's, or one with these ports."""
        if self.config_file:
            return self.config_file
        lines = ['name = "%s"' % self.name]
        if self.lossless is not None:
            lines += ["[pfc]", "lossless = [%s]" % ", ".join(str(p) for p in self.lossless)]
        if self.busy_poll_us is not None:
            lines += ["[dataplane]", "busy_poll_us = %d" % int(self.busy_poll_us)]
        for iface in ifaces:
            lines += ["[[port]]", 'iface = "%s"' % iface]
            if self.speed:
                lines.append('speed = "%s"' % self.speed)
        path = os.path.join(self.run_dir, "config.toml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start(self, controllers):
        os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        ifaces = [i.name for i in self.intfList() if i.name != "lo"]
        for iface in ifaces:
            subprocess.run(["ip", "link", "set", "dev", iface, "up"], check=True)
        cmd = [self.binary, "run", "--config", self._config(ifaces), "--name", self.name, "--socket", self.socket]
        if self.config_file and self.speed:
            cmd += ["--speed", str(self.speed)]
        if self.tagger:
            cmd += ["--tagger-table", self.tagger]
        cmd += self.extra
        # Mininet's stop deletes the links before it stops the switches: pfcswitch must be
        # gone (its XDP programs detached) before the first of its links is.
        for intf in self.intfList():
            link = getattr(intf, "link", None)
            if link is not None:
                self._detach_before(link)
        info("*** %s: %s\n" % (self.name, " ".join(shlex.quote(c) for c in cmd)))
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("pfcswitch %s exited at start-up: %s" % (self.name, self._log_tail()))
            if subprocess.run(self._ctl_cmd(["stats"]), capture_output=True).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("pfcswitch %s did not come up in 15 s: %s" % (self.name, self._log_tail()))

    def _log_tail(self):
        try:
            with open(self.log) as f:
                return f.read()[-2000:]
        except OSError:
            return "(no log)"

    def _ctl_cmd(self, args):
        return [self.binary, "ctl", "--socket", self.socket] + list(args)

    def ctl(self, args):
        """`pfcswitch ctl ARGS` against this switch: its output."""
        args = shlex.split(args) if isinstance(args, str) else list(args)
        return subprocess.run(self._ctl_cmd(args), capture_output=True, text=True, check=True).stdout

    def stats(self):
        """`ctl --json stats`, parsed."""
        return json.loads(self.ctl(["--json", "stats"]))

    def _detach_before(self, link):
        for method in ("stop", "delete"):
            original = getattr(link, method)

            def wrapped(*args, _original=original, **kwargs):
                self.detach()
                return _original(*args, **kwargs)

            setattr(link, method, wrapped)

    def stop(self, deleteIntfs=True):
        self.detach()
        super().stop(deleteIntfs)

    def detach(self):
        """Stops pfcswitch: on SIGTERM it detaches its XDP programs and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                error("*** pfcswitch %s did not stop in 10 s: killed\n" % self.name)
                self.proc.kill()
                self.proc.wait()
            info("*** pfcswitch %s stopped: %s\n" % (self.name, "clean" if self.proc.returncode == 0 else
                                                      "status %s" % self.proc.returncode))
            self.exit_status = self.proc.returncode
        self.proc = None

    def connected(self):
        return self.proc is not None and self.proc.poll() is None


switches = {"pfc": PfcSwitch}
hosts = {"pfc": PfcHost}
