"""The package has no import cycles (module-level or in-function imports), no module importing another
module's `_private` names, and no function over 60 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import check_imports  # noqa: E402
import function_lengths  # noqa: E402

MAX_FUNCTION_LINES = 60


def test_no_import_cycles_and_no_private_imports():
    graph, cycles, private = check_imports.check(ROOT / "riskrank_jax")
    assert "riskrank_jax.experiments.sweep" in graph["riskrank_jax.sweep"]
    assert cycles == []
    assert private == []


def test_checker_finds_a_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import _x\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_imports.py"), str(pkg)], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "cycle: pkg.a <-> pkg.b" in r.stdout and "pkg.b imports pkg.a._x" in r.stdout


def test_functions_are_short():
    lengths = function_lengths.function_lengths(ROOT / "riskrank_jax")
    assert len(lengths) > 100  # the whole package was read
    long = [(n, where) for n, where in lengths if n > MAX_FUNCTION_LINES]
    assert long == []


def test_length_checker_counts_decorators_and_flags_long_functions(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    (pkg / "m.py").write_text(f"@staticmethod\ndef long():\n{body}\n\ndef short():\n    return 1\n")
    assert function_lengths.function_lengths(pkg) == [(62, f"{pkg / 'm.py'}:2 long"), (2, f"{pkg / 'm.py'}:65 short")]
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "function_lengths.py"), str(pkg), "--max", "60"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "1 function(s) longer than 60 lines" in r.stdout
