"""The package has no import cycles (module-level or in-function imports) and no function over 60 lines
outside the modules other issues own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import check_imports  # noqa: E402
import function_lengths  # noqa: E402

# owned by another issue's worktree (encoder / embedding cache / training loop); to fix there
KNOWN_PRIVATE = {"riskrank_jax.embed_cache imports riskrank_jax.encoder._check_texts"}
KNOWN_LONG = {("train.py", "train_models"), ("encoder.py", "_load_flax_params"), ("encoder.py", "__init__")}


def test_no_import_cycles_and_no_private_imports():
    graph, cycles, private = check_imports.check(ROOT / "riskrank_jax")
    assert "riskrank_jax.experiments.sweep" in graph["riskrank_jax.sweep"]
    assert cycles == []
    assert set(private) <= KNOWN_PRIVATE


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
    long = [(n, where) for n, where in function_lengths.function_lengths(ROOT / "riskrank_jax") if n > 60]
    assert all((Path(where.split(":")[0]).name, where.split()[-1]) in KNOWN_LONG for _, where in long), long
