"""The README's Library snippet runs as written (real default encoder, temporary embedding cache)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_library_snippet_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme[readme.index("## Library"):], re.S).group(1)
    assert "Ranker.load" in code and ".save(" in code and ".rank(" in code
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "RISKRANK_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [line for line in r.stdout.splitlines() if "->" in line]
    assert len(lines) == 2 and "listCalendarEvents" in lines[1]
