"""Drive one `laminar broker` process from Python through the Rust harness's line protocol
(`laminar-test-broker`, see tests/src/bin/laminar-test-broker.rs), so every suite starts,
kills and restarts brokers the same way."""

import os
import select
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 60


def controller_binary() -> Path:
    if os.environ.get("LAMINAR_TEST_BROKER"):
        return Path(os.environ["LAMINAR_TEST_BROKER"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    if not target.is_absolute():
        target = REPO_ROOT / target
    return target / "debug" / "laminar-test-broker"


class BrokerError(RuntimeError):
    pass


class BrokerProcess:
    """One broker, its data directory kept across kill9()/restart(). Not thread-safe."""

    def __init__(self, overrides=None, cores=2, cluster=None):
        """`cluster=N`: N brokers in combined mode forming one quorum; `bootstrap` then lists
        them all, and only stop() applies."""
        binary = controller_binary()
        if not binary.is_file():
            raise BrokerError(
                f"{binary} not found: build it with `cargo build -p laminar-tests --bins` "
                "(and the broker with `cargo build`), or set LAMINAR_TEST_BROKER")
        args = [str(binary), "--cores", str(cores)]
        for key, value in (overrides or {}).items():
            args += ["--override", f"{key}={value}"]
        if cluster:
            args += ["--cluster", str(cluster)]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.bootstrap = None
        self.data_dir = None
        self._expect_ready(self._read_line())

    def _read_line(self) -> str:
        ready, _, _ = select.select([self._proc.stdout], [], [], STARTUP_TIMEOUT_S)
        if not ready:
            raise BrokerError(f"laminar-test-broker said nothing within {STARTUP_TIMEOUT_S}s")
        line = self._proc.stdout.readline().strip()
        if not line:
            raise BrokerError(f"laminar-test-broker exited ({self._proc.wait()})")
        return line

    def _expect_ready(self, line: str):
        if not line.startswith("ready "):
            raise BrokerError(line)
        _, self.bootstrap, self.data_dir = line.split(" ", 2)

    def _command(self, command: str) -> str:
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        line = self._read_line()
        if line.startswith("error "):
            raise BrokerError(f"{command}: {line[6:]}")
        return line

    def kill9(self):
        self._command("kill9")

    def terminate(self) -> int:
        """SIGTERM and wait; returns the broker's exit code."""
        return int(self._command("terminate").split("exit=")[1])

    def restart(self):
        self._expect_ready(self._command("restart"))

    def stop(self):
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()  # EOF: the controller kills the broker and exits
            except BrokenPipeError:
                pass
            self._proc.wait(timeout=30)
