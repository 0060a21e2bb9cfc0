"""bench/pays's emulated links and child processes: W network namespaces joined by a bridge.

Each worker namespace holds one end of a veth pair, the other end is a port of a bridge in a
namespace of its own, so nothing is added to the root namespace. A link rate puts a tbf qdisc on
both ends of every pair (the worker's egress is its upload, the bridge port's egress its download),
as bench/run's slow link does for two. Everything is named after this process's pid, so two
harnesses never collide, and Links.close() removes it all (deleting a namespace deletes its veths).
"""

import os
import shlex
import signal
import subprocess
import time

SUBNET = "10.231.0"  # the worker of rank r is SUBNET.(r + 1)
TBF = ("burst", "256kb", "latency", "50ms")


class Failed(Exception):
    pass


def ip(*command, check=True):
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise Failed(f"`{shlex.join(command)}` failed: {done.stderr.strip()}")
    return done.stdout


class Links:
    def __init__(self, workers, prefix=None):
        prefix = prefix or f"gcrun-pays-{os.getpid()}"
        self.bridge_ns = f"{prefix}-br"
        self.worker_ns = [f"{prefix}-w{r}" for r in range(workers)]
        tag = f"gp{os.getpid() % 10 ** 7}"  # interface names have at most 15 characters
        self.worker_if = [f"{tag}w{r}" for r in range(workers)]
        self.bridge_if = [f"{tag}b{r}" for r in range(workers)]
        self.created = []

    def address(self, rank):
        return f"{SUBNET}.{rank + 1}"

    def open(self):
        try:
            for ns in [self.bridge_ns] + self.worker_ns:
                ip("ip", "netns", "add", ns)
                self.created.append(ns)
                ip("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            inside = lambda *command: ip("ip", "netns", "exec", self.bridge_ns, *command)
            inside("ip", "link", "add", "br0", "type", "bridge")
            inside("ip", "link", "set", "br0", "up")
            for r, ns in enumerate(self.worker_ns):
                ip("ip", "link", "add", self.worker_if[r], "netns", ns, "type", "veth", "peer", "name",
                   self.bridge_if[r], "netns", self.bridge_ns)
                inside("ip", "link", "set", self.bridge_if[r], "master", "br0")
                inside("ip", "link", "set", self.bridge_if[r], "up")
                ip("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.address(r)}/24", "dev", self.worker_if[r])
                ip("ip", "netns", "exec", ns, "ip", "link", "set", self.worker_if[r], "up")
        except Failed:
            self.close()
            raise
        return self

    def shape(self, rate):
        """rate: a tc rate ("100mbit") on both ends of every pair, or None for no qdisc."""
        ends = list(zip(self.worker_ns, self.worker_if)) + [(self.bridge_ns, end) for end in self.bridge_if]
        for ns, device in ends:
            if rate is None:
                ip("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", device, "root", check=False)
            else:
                ip("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", device, "root", "tbf", "rate", rate, *TBF)

    def close(self):
        for ns in reversed(self.created):
            ip("ip", "netns", "del", ns, check=False)
        self.created = []

    def __enter__(self):
        return self.open()

    def __exit__(self, *exception):
        self.close()

    def command(self, rank, argv):
        """argv run inside worker `rank`'s namespace, Gloo on its veth, one thread."""
        return ["ip", "netns", "exec", self.worker_ns[rank], "env", "OMP_NUM_THREADS=1",
                f"GLOO_SOCKET_IFNAME={self.worker_if[rank]}"] + argv


class Jobs:
    """Child processes, each in its own session so that a timeout or Ctrl-C stops all its workers."""

    def __init__(self, cwd):
        self.cwd = cwd
        self.live = []

    def start(self, command, log):
        with open(log, "w") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd,
                                       env={**os.environ, "OMP_NUM_THREADS": "1"}, start_new_session=True)
        self.live.append(process)
        return process

    def wait(self, processes, timeout):
        """Waits for all; one failing stops the others (its peers would wait for it until timeout)."""
        deadline = time.monotonic() + timeout
        try:
            while any(p.poll() is None for p in processes):
                if time.monotonic() > deadline:
                    raise Failed(f"timed out after {timeout:.0f} s")
                if any(p.poll() not in (None, 0) for p in processes):
                    break
                time.sleep(0.2)
            codes = [p.poll() for p in processes]
            if any(code not in (None, 0) for code in codes):
                raise Failed("exit status " + ", ".join("running" if c is None else str(c) for c in codes))
        finally:
            self.stop(processes)

    def stop(self, processes):
        for signum in (signal.SIGTERM, signal.SIGKILL):
            for p in processes:
                try:
                    os.killpg(p.pid, signum)  # also reaches workers whose launcher already exited
                except ProcessLookupError:
                    pass
            try:
                for p in processes:
                    p.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        self.live = [p for p in self.live if p not in processes]
