"""The package has no import cycles (module-level or in-function imports), no module importing another
module's `_private` names, and no function over 60 lines."""

from __future__ import annotations

import ast
import re
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
    assert "riskrank_jax.experiments.run" in graph["riskrank_jax.sweep"]
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


PACKAGE = ROOT / "riskrank_jax"
MAX_TOP_LEVEL_MODULES = 8
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def test_imports_go_down_the_layer_order():
    graph, _, _ = check_imports.check(PACKAGE)
    top = {m.split(".")[1] for m in graph if m.count(".") >= 1}
    assert top == set(check_imports.LAYERS)  # every folder and top-level module has its place in the order
    assert check_imports.upward_imports(graph) == []


def test_upward_import_is_reported():
    graph = {"riskrank_jax.graph.smoothing": {"riskrank_jax.rank.ranker", "riskrank_jax.scoring"},
             "riskrank_jax.rank.ranker": {"riskrank_jax.graph.smoothing"}}
    assert check_imports.upward_imports(graph) == ["riskrank_jax.graph.smoothing imports riskrank_jax.rank.ranker"]


def test_at_most_eight_top_level_modules():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def test_package_docstring_maps_the_folders_in_layer_order():
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text()))
    folders = [name for name in check_imports.LAYERS if (PACKAGE / name).is_dir()]
    positions = [doc.find(f"{name}/") for name in folders]
    assert -1 not in positions, [n for n, p in zip(folders, positions) if p == -1]
    assert positions == sorted(positions)
    for name in folders:  # each folder's __init__ says what it owns, naming every module in it
        init_doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
        missing = [p.stem for p in (PACKAGE / name).glob("*.py") if p.stem != "__init__" and p.stem not in init_doc]
        assert missing == [], f"{name}/__init__.py does not name {missing}"


def test_no_dates_in_code():
    dated = [f"{p.relative_to(ROOT)}:{i}" for p in sorted(PACKAGE.rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if DATE.search(line)]
    assert dated == []
