"""The README's Library snippet runs as written (real default encoder, temporary embedding cache), executed in
this process in a namespace of its own (so it must import all it uses) from the repository root."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_library_snippet_runs(tmp_path, monkeypatch, capsys):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme[readme.index("## Library"):], re.S).group(1)
    assert "Ranker.load" in code and ".save(" in code and ".rank(" in code
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("RISKRANK_CACHE", str(tmp_path))
    capsys.readouterr()
    exec(compile(code, "README.md (## Library)", "exec"), {"__name__": "__main__"})
    lines = [line for line in capsys.readouterr().out.splitlines() if "->" in line]
    assert len(lines) == 2 and "listCalendarEvents" in lines[1]
