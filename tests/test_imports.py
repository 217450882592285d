"""The package has no import cycles (module-level or in-function imports), no module importing another
module's `_private` names, no function over 60 lines, and no lab notes (dates, measured durations) in code."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
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
    found = {name: re.search(rf"(?<![\w/]){re.escape(name)}/", doc) for name in folders}
    assert [n for n, m in found.items() if m is None] == []
    positions = [found[name].start() for name in folders]
    assert positions == sorted(positions)
    unnamed = {}
    for name in folders:  # each folder's __init__ says what it owns, naming every module in it as a whole word
        init_doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
        missing = sorted(p.stem for p in (PACKAGE / name).glob("*.py")
                         if p.stem != "__init__" and not names_module(init_doc, p.stem))
        if missing:
            unnamed[f"{name}/__init__.py"] = missing
    assert unnamed == {}


def names_module(doc: str, stem: str) -> bool:
    """Whether ``doc`` names the module ``stem`` as a word of its own ("cross" is not in "across")."""
    return re.search(rf"(?<![\w]){re.escape(stem)}(?![\w])", doc) is not None


def test_module_names_match_whole_words():
    assert names_module("    cross.py   the cross-encoder rows", "cross")
    assert names_module("``reproducibility``: flip bounds", "reproducibility")
    assert not names_module("risk-head transfer across registries", "cross")
    assert not names_module("the tuned_encoder families", "tuned")


CODE_DIRS = [PACKAGE, ROOT / "benchmarks", ROOT / "scripts"]
# A measured duration: a number followed by a unit of time ("3.18 s", "505 ms", "25 minutes"). Not "2 s/step"
# style rates, not identifiers ("fp16s"), not a version ("1.5s" inside a word). A setting that is not a
# measurement is written with the name of its knob ("timeout_s seconds"), which this does not match.
TIMING = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?\s?(?:ms|s|seconds?|minutes?|min|hours?)\b(?![\w/])")


def code_files(dirs=CODE_DIRS) -> list[Path]:
    return [p for d in dirs for p in sorted(Path(d).rglob("*.py"))]


def dated_lines(paths) -> list[str]:
    """``file:line`` of every line (code, docstring or comment) that holds a YYYY-MM-DD date."""
    return [f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}:{i}" for p in paths
            for i, line in enumerate(p.read_text().splitlines(), 1) if DATE.search(line)]


def docstrings_and_comments(path: Path):
    """(line, text) of every line of the module's, classes' and functions' docstrings and of every comment."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                for i, line in enumerate(first.value.value.splitlines()):
                    yield first.lineno + i, line
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def timed_lines(paths) -> list[str]:
    """``file:line: text`` of every docstring or comment line that states a measured duration."""
    return [f"{p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}:{i}: {text.strip()}" for p in paths
            for i, text in docstrings_and_comments(p) if TIMING.search(text)]


def test_no_dates_in_code():  # dates belong in docs/ and the results, not in the code that produced them
    assert dated_lines(code_files()) == []


def test_no_timings_in_docstrings_or_comments():  # figures live in docs/performance.md or the benchmark's output
    assert len(code_files()) > 100  # the package, the benchmarks and the scripts were read
    assert timed_lines(code_files()) == []


def test_lab_note_checkers_flag_a_planted_timing_and_date(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text('"""A module.\n\nMeasured: 3.18 s against 0.47 s."""\n\n\n'
                       'def f(timeout_s=10.0):\n    """Waits timeout_s seconds (the setting, not a figure)."""\n'
                       '    return 1  # took 505 ms\n\n\n'
                       'class C:\n    """Built 2026-11-30; one step per 2 minutes."""\n')
    assert [t.split(":", 2)[1] for t in timed_lines([planted])] == ["3", "12", "8"]
    assert dated_lines([planted]) == [f"{planted}:12"]


MAX_MODULE_LINES = 600
DEFERRED = "# deferred:"


def undeclared_deferred_imports(root: Path) -> list[str]:
    """``file:line`` of every import inside a function or class that no ``# deferred: why`` comment introduces: the
    comment stands on the line above the import, or above the run of import lines (and blank lines) it belongs to."""
    out = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in top:
                continue
            i = node.lineno - 2  # the line above, 0-based
            while i >= 0 and (not lines[i].strip() or re.match(r"\s*(from \S+ )?import ", lines[i])):
                i -= 1
            if i < 0 or not lines[i].strip().startswith(DEFERRED):
                out.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return out


def test_imports_stand_at_the_top_or_say_why_not():
    assert undeclared_deferred_imports(PACKAGE) == []


def test_deferred_import_checker(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("import os\n\n\ndef f():\n    # deferred: heavy\n    import json\n\n    import re\n"
                              "    return json, re\n\n\ndef g():\n    x = 1\n    import json\n    return x, json\n")
    assert undeclared_deferred_imports(pkg) == ["pkg/m.py:14"]


def test_no_package_module_is_over_600_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}
