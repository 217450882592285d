"""Ports on 127.0.0.1 for the tests that start servers over HTTP: a free one, and waiting until one listens; and
a started server's child process, found by its command line (benchmarks/gateway_footprint.py uses it too)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A port nothing listens on now (the OS's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, seconds: float = 120) -> None:
    """Return once something listens on 127.0.0.1:port; RuntimeError if ``proc`` exits first, TimeoutError after
    ``seconds``."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def child_pid(parent: int, marker: str) -> int:
    """The process whose parent is ``parent`` and whose command line holds ``marker`` (read from /proc);
    LookupError when there is none."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if marker in cmd and ppid == parent:
            return int(p.name)
    raise LookupError(marker)
