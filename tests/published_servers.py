"""Installs the pinned published MCP servers and the MCP Inspector CLI that tests/test_serve_published.py puts
the gateway in front of: npm packages into .mcp-published/npm, PyPI servers into venvs of their own (they
pin other `mcp` majors than this project). Run by the tests' fixture and by .ci/run before pytest:

    python tests/published_servers.py          # installs once; later runs find the stamp and return

Each pin is an exact version. An install that cannot be done (no registry, no npm) raises InstallError with
the command and its output, so the tests skip with that reason.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / ".mcp-published"  # git-ignored

NPM = {  # package -> version
    "@modelcontextprotocol/inspector": "2.12.0",  # the published client (CLI mode)
    "@modelcontextprotocol/server-filesystem": "2026.8.31",
    "@modelcontextprotocol/server-memory": "2026.8.31",
    "@modelcontextprotocol/server-everything": "2026.8.31",
    "@modelcontextprotocol/server-sequential-thinking": "2026.8.31",
    "@modelcontextprotocol/server-github": "2025.4.8",
    "@modelcontextprotocol/server-gitlab": "2025.4.25",
    "@modelcontextprotocol/server-slack": "2025.4.25",
    "@modelcontextprotocol/server-postgres": "0.6.2",
}
# the archived GitLab server installed on its own, as `npx` installs it: its dependencies then resolve zod 4,
# whose schemas zod-to-json-schema turns into {"$schema": ...} with no "type": "object" (pinned here)
NPM_ALONE = {"npm-gitlab": {"@modelcontextprotocol/server-gitlab": "2025.4.25", "zod": "4.6.7",
                            "zod-to-json-schema": "3.25.2"}}
VENVS = {  # venv -> PyPI pins (each venv resolves its own mcp)
    "py-mcp2": ["mcp-server-git==2026.10.19", "mcp-server-time==2026.10.19", "mcp-server-fetch==2026.10.24"],
    "py-mcp1": ["mcp-server-calculator==0.2.1", "mcp-server-sqlite==2025.4.25"],
}


class InstallError(RuntimeError):
    """The published servers could not be installed here (the message says which command failed and why)."""


def _stamp() -> str:
    return hashlib.sha256(json.dumps([NPM, NPM_ALONE, VENVS, sys.version_info[:2]],
                                     sort_keys=True).encode()).hexdigest()


def _run(cmd: list[str], timeout: float) -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InstallError(f"{' '.join(cmd[:4])} …: {e}") from None
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-8:])
        raise InstallError(f"{' '.join(cmd[:4])} … exited with {p.returncode}:\n{tail}")


def bins() -> dict[str, Path]:
    """Where the installed executables are (whether or not they are installed yet)."""
    npm_bin = SCRATCH / "npm" / "node_modules" / ".bin"
    out = {n: npm_bin / n for n in ("mcp-inspector", "mcp-server-filesystem", "mcp-server-memory",
                                     "mcp-server-everything", "mcp-server-sequential-thinking", "mcp-server-github",
                                     "mcp-server-gitlab", "mcp-server-slack", "mcp-server-postgres")}
    out["mcp-server-gitlab-zod4"] = SCRATCH / "npm-gitlab" / "node_modules" / ".bin" / "mcp-server-gitlab"
    for venv, names in (("py-mcp2", ("mcp-server-git", "mcp-server-time", "mcp-server-fetch")),
                        ("py-mcp1", ("mcp-server-calculator", "mcp-server-sqlite"))):
        out.update({n: SCRATCH / venv / "bin" / n for n in names})
    return out


def install() -> dict[str, Path]:
    """Install everything once (a stamp of the pins marks a finished install); the executables' paths."""
    SCRATCH.mkdir(exist_ok=True)
    stamp = SCRATCH / "installed.stamp"
    with open(SCRATCH / "install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time (parallel test workers, CI)
        if stamp.exists() and stamp.read_text() == _stamp() and all(p.exists() for p in bins().values()):
            return bins()
        stamp.unlink(missing_ok=True)
        npm = shutil.which("npm")
        if npm is None:
            raise InstallError("npm is not on PATH")
        _run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(SCRATCH / "npm"),
              *[f"{p}@{v}" for p, v in NPM.items()]], timeout=600)
        for prefix, pins in NPM_ALONE.items():
            _run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(SCRATCH / prefix),
                  *[f"{p}@{v}" for p, v in pins.items()]], timeout=600)
        for venv, pins in VENVS.items():
            d = SCRATCH / venv
            if not (d / "bin" / "python").exists():
                _run([sys.executable, "-m", "venv", str(d)], timeout=300)
            _run([str(d / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
                 timeout=600)
        missing = [str(p) for p in bins().values() if not p.exists()]
        if missing:
            raise InstallError(f"installed, but these executables are missing: {', '.join(missing)}")
        stamp.write_text(_stamp())
    return bins()


if __name__ == "__main__":
    try:
        found = install()
    except InstallError as e:
        sys.exit(f"published MCP servers: cannot install: {e}")
    print(f"published MCP servers: {len(found)} executables under {SCRATCH}")
