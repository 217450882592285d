"""runtime.heap: freed heap pages go back to the operating system (glibc's malloc_trim).

Measured in a fresh interpreter: how much of a freed heap glibc keeps depends on everything the process
allocated before (a pytest worker that already ran other test files may hold gigabytes, and its heap's top then
moves on its own), so only a process whose heap is known tests the call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MEASURE = """
import json
import numpy as np
from riskrank_jax.runtime.heap import release_freed_heap

def rss():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024

if not release_freed_heap():
    print(json.dumps(None))
else:
    before = rss()
    blocks = [np.ones(1000) for _ in range(40_000)]  # ~330 MB of 8 KB blocks: kept in malloc's pools when freed
    held = rss()
    del blocks
    kept = rss()
    released = release_freed_heap()
    print(json.dumps({"before": before, "held": held, "kept": kept, "released": released, "after": rss()}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads resident memory from /proc (Linux)")
def test_freed_small_blocks_go_back_to_the_os():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)
    if m is None:
        pytest.skip("the C library has no malloc_trim (not glibc)")
    assert m["held"] - m["before"] > 250, m
    assert m["kept"] - m["before"] > 150, ("glibc already returned the pages: nothing left to test", m)
    assert m["released"] is True
    assert m["after"] - m["before"] < 60, m
