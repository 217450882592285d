"""Print the longest functions of a package (lines from `def` to the last line of the body).

    python scripts/function_lengths.py [PACKAGE_DIR] [--top 15] [--max 60]

Exit status 1 when --max is given and some function is longer.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def function_lengths(root: Path) -> list[tuple[int, str]]:
    """(lines, "path:line name") of every function and method under root, longest first."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                out.append((node.end_lineno - first + 1, f"{path}:{node.lineno} {node.name}"))
    return sorted(out, reverse=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent / "riskrank_jax"))
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--max", type=int, default=None, help="fail when a function is longer than this")
    args = ap.parse_args(argv)
    lengths = function_lengths(Path(args.root))
    for n, where in lengths[: args.top]:
        print(f"{n:5d}  {where}")
    if args.max is not None:
        over = [x for x in lengths if x[0] > args.max]
        print(f"{len(over)} function(s) longer than {args.max} lines")
        return 1 if over else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
