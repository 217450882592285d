"""Debian packages the tests need (PostgreSQL, HAProxy), installed on first use when missing, as
tests/published_servers.py installs the published MCP servers: the README's test command then runs these tests on
a fresh machine too. Installing needs root and apt-get; where either is missing the caller skips, naming the
package (.ci/run installs them before pytest).

    why = install("haproxy")      # None once installed, else why it could not be
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_TRIED: dict[str, str | None] = {}


def install(package: str) -> str | None:
    """Install the Debian ``package`` (apt-get; once per process, one process at a time); None when it is
    installed, else why not (not root, no apt-get, apt-get's error)."""
    if package in _TRIED:
        return _TRIED[package]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        why = f"{package} is not installed and this user cannot install it (apt-get install {package})"
    else:
        lock = Path(tempfile.gettempdir()) / "riskrank-tests-apt.lock"
        with open(lock, "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # pytest-xdist workers install one after the other
            why = _apt(package)
    _TRIED[package] = why
    return why


def _apt(package: str) -> str | None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "install", "-y", "-q", package], ["apt-get", "update", "-q"],
                 ["apt-get", "install", "-y", "-q", package]):
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
        if p.returncode == 0 and argv[1] == "install":
            return None
        if argv[1] == "update" and p.returncode != 0:
            break
    return f"apt-get install {package} failed: {(p.stderr or p.stdout).strip()[-300:]}"
