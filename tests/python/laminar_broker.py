"""Drive `laminar broker` processes from Python through the Rust harness's line protocol
(`laminar-test-broker`, see tests/src/bin/laminar-test-broker.rs), so every suite starts,
kills and restarts brokers the same way: `BrokerProcess` for one broker, `ClusterProcess` for
several in combined mode."""

import os
import select
import socket
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60
# A restart waits until the node serves (the harness allows 40 s) after a bounded SIGTERM.
COMMAND_TIMEOUT_S = 90


def controller_binary() -> Path:
    if os.environ.get("LAMINAR_TEST_BROKER"):
        return Path(os.environ["LAMINAR_TEST_BROKER"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    if not target.is_absolute():
        target = REPO_ROOT / target
    return target / "debug" / "laminar-test-broker"


def laminar_cli(*args: str) -> str:
    """Runs the `laminar` binary (built beside the harness) with `args`; its stdout. Raises
    `subprocess.CalledProcessError`, carrying stderr, when it fails."""
    binary = controller_binary().with_name("laminar")
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return done.stdout


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a broker's admin listener)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerError(RuntimeError):
    pass


class _Harness:
    """One `laminar-test-broker` process and its line protocol. Not thread-safe: one thread
    sends the commands."""

    def __init__(self, args):
        binary = controller_binary()
        if not binary.is_file():
            raise BrokerError(
                f"{binary} not found: build it with `cargo build -p laminar-tests --bins` "
                "(and the broker with `cargo build`), or set LAMINAR_TEST_BROKER")
        self._proc = subprocess.Popen([str(binary), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, bufsize=1)

    def _read_line(self, timeout_s=STARTUP_TIMEOUT_S) -> str:
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        if not ready:
            raise BrokerError(f"laminar-test-broker said nothing within {timeout_s}s")
        line = self._proc.stdout.readline().strip()
        if not line:
            raise BrokerError(f"laminar-test-broker exited ({self._proc.wait()})")
        return line

    def _command(self, command: str) -> str:
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        line = self._read_line(COMMAND_TIMEOUT_S)
        if line.startswith("error "):
            raise BrokerError(f"{command}: {line[6:]}")
        return line

    def stop(self):
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()  # EOF: the harness kills every broker and exits
            except BrokenPipeError:
                pass
            self._proc.wait(timeout=30)


def _overrides_args(overrides):
    args = []
    for key, value in (overrides or {}).items():
        args += ["--override", f"{key}={value}"]
    return args


class BrokerProcess(_Harness):
    """One broker, its data directory kept across kill9()/restart()."""

    def __init__(self, overrides=None, cores=2, cluster=None, listeners=()):
        """`cluster=N`: N brokers in combined mode forming one quorum; `bootstrap` then lists
        them all, and only stop() applies (`ClusterProcess` drives the nodes one by one).
        `listeners`: names of listeners besides the PLAINTEXT one `bootstrap` names (such as
        SASL_PLAINTEXT), each on a port of its own; `self.listeners` maps each to host:port."""
        args = ["--cores", str(cores), *_overrides_args(overrides)]
        for name in listeners:
            args += ["--listener", name]
        if cluster:
            args += ["--cluster", str(cluster)]
        super().__init__(args)
        self.bootstrap = None
        self.data_dir = None
        self._expect_ready(self._read_line())
        self.listeners = {}
        if listeners:
            for item in self._command("listeners").split(" ")[1:]:
                name, addr = item.split("=", 1)
                self.listeners[name] = addr

    def _expect_ready(self, line: str):
        if not line.startswith("ready "):
            raise BrokerError(line)
        _, self.bootstrap, self.data_dir = line.split(" ", 2)

    def kill9(self):
        self._command("kill9")

    def terminate(self) -> int:
        """SIGTERM and wait; returns the broker's exit code."""
        return int(self._command("terminate").split("exit=")[1])

    def restart(self):
        self._expect_ready(self._command("restart"))


class ClusterProcess(_Harness):
    """`nodes` brokers in combined mode (`process.roles=broker,controller`), node ids 1..nodes,
    each with its own ports and data dir kept across kill9()/restart(). `overrides` reach every
    node (e.g. min.insync.replicas, default.replication.factor); `session_timeout_ms` is how
    long a dead node keeps its leaderships (the harness's default: 6 s)."""

    def __init__(self, nodes=3, overrides=None, cores=1, session_timeout_ms=None):
        args = ["--cores", str(cores), *_overrides_args(overrides), "--cluster", str(nodes)]
        if session_timeout_ms is not None:
            args += ["--session-timeout-ms", str(session_timeout_ms)]
        super().__init__(args)
        self.session_timeout_ms = session_timeout_ms or 6000
        line = self._read_line()
        if not line.startswith("ready "):
            raise BrokerError(line)
        self.bootstrap = line.split(" ", 2)[1]
        self.node_ids = list(range(1, nodes + 1))
        self._dirs = {}
        for item in self._command("dirs").split(" ")[1:]:
            node, path = item.split("=", 1)
            self._dirs[int(node)] = Path(path)

    def node_bootstrap(self, node: int) -> str:
        return self.bootstrap.split(",")[node - 1]

    def data_dir(self, node: int) -> Path:
        """Node `node`'s `log.dirs`, the same across restarts."""
        return self._dirs[node]

    def stderr_logs(self, node: int):
        """Node `node`'s stderr, one file per start, oldest first."""
        logs = self._dirs[node].parent.glob("broker-*.stderr")
        return sorted(logs, key=lambda p: int(p.stem.split("-")[1]))

    def kill9(self, node: int):
        """SIGKILL (also of a paused node), then reap."""
        self._command(f"kill9 {node}")

    def terminate(self, node: int) -> int:
        """SIGTERM and wait; returns the node's exit code."""
        return int(self._command(f"terminate {node}").split("exit=")[1])

    def restart(self, node: int):
        """Starts a stopped node again (same ports and data dir) and waits until it serves; a
        running one is first stopped with SIGTERM."""
        self._command(f"restart {node}")

    def pause(self, node: int):
        """SIGSTOP: the node freezes, its sockets open, until resume()."""
        self._command(f"pause {node}")

    def resume(self, node: int):
        """SIGCONT."""
        self._command(f"resume {node}")

    def pid(self, node: int) -> int:
        return int(self._command(f"pid {node}").split(" ")[1])

    def states(self):
        """{node: "running" | "paused" | "stopped"}."""
        out = {}
        for item in self._command("nodes").split(" ")[1:]:
            node, rest = item.split("=", 1)
            out[int(node)] = rest.split("@", 1)[0]
        return out
