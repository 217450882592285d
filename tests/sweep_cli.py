"""Run `python -m riskrank_jax.sweep` in a subprocess, to completion or until SIGKILL at a chosen output line.

Used by the end-to-end tests (test_reproducibility.py, test_kill_resume.py). Every run gets its own output,
embedding-cache and checkpoint directories from the caller, so nothing under the repository is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 900


def sweep_env(jax_cache: Path | None = None, **extra) -> dict:
    """Environment of a sweep subprocess; `extra` sets variables (RISKRANK_CACHE=...). With `jax_cache`, XLA
    programs compiled by one run are reused by the next (JAX's persistent compilation cache: the same
    programs, compiled once, so the same numbers; only faster)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    env.pop("RISKRANK_RUNS", None)
    if jax_cache is not None:
        env.update(JAX_COMPILATION_CACHE_DIR=str(jax_cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def sweep_cmd(args, *, prelude: str | None = None) -> list[str]:
    """The sweep's command line; with `prelude`, Python run first in the same process (fault injection)."""
    if prelude is None:
        return [sys.executable, "-m", "riskrank_jax.sweep", *map(str, args)]
    code = prelude + "\nimport sys\nfrom riskrank_jax.sweep import run\nrun(sys.argv[1:])\n"
    return [sys.executable, "-c", code, *map(str, args)]


def run_sweep(args, env, *, prelude: str | None = None) -> subprocess.CompletedProcess:
    """Run to the end; stdout and stderr captured separately."""
    return subprocess.run(sweep_cmd(args, prelude=prelude), env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, cwd=REPO)


def run_until(args, env, marker: str | None, *, prelude: str | None = None) -> tuple[int, str]:
    """Run with stderr merged into stdout; SIGKILL the process as soon as a line contains `marker`.

    Returns (exit status, output so far). A process that never prints `marker` runs to its end."""
    p = subprocess.Popen(sweep_cmd(args, prelude=prelude), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, cwd=REPO)
    watchdog = threading.Timer(TIMEOUT_S, p.kill)
    watchdog.start()
    lines = []
    try:
        for line in p.stdout:
            lines.append(line)
            if marker is not None and marker in line:
                os.kill(p.pid, signal.SIGKILL)
                break
        p.stdout.close()
        rc = p.wait()
    finally:
        watchdog.cancel()
    return rc, "".join(lines)


def load_results(out_root: Path, benchmark: str = "demo") -> dict:
    return json.loads((Path(out_root) / benchmark / "results.json").read_text())


def _compare_module():
    """scripts/compare_results.py (a script, not a package module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare_results", REPO / "scripts" / "compare_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


compare_results = _compare_module().compare
COMPARE_IGNORED = _compare_module().IGNORED  # what compare_results skips by default
