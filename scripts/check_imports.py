"""Import graph of a package: cycles, imports of another module's `_private` names, and imports that go up
the package's layer order.

    python scripts/check_imports.py [PACKAGE_DIR]

Every `import` / `from ... import` counts, at module level AND inside functions (an import moved into a
function hides a cycle from Python but not from this check). A submodule's own parent packages are not
edges (Python imports them implicitly). Prints the cycles and private imports found; exit status 1 if any.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, current: str, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, root: Path, modules: set[str]) -> tuple[set[str], list[str]]:
    """(package modules imported by the file, `module.name` private names it imports from other modules)."""
    current = module_name(path, root)
    is_pkg = path.name == "__init__.py"
    edges, private = set(), []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules:
                    edges.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, current, is_pkg)
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in modules:
                    edges.add(sub)
                elif target in modules:
                    edges.add(target)
                    if a.name.startswith("_") and target != current:
                        private.append(f"{current} imports {target}.{a.name}")
    parents = {".".join(current.split(".")[:i]) for i in range(1, current.count(".") + 1)}
    return edges - parents - {current}, private


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# riskrank_jax's folders and top-level modules, top (entry points) to bottom: a module may import from its own
# folder or from any name below its own, never above (the package docstring is the map of this order).
LAYERS = ("__main__", "sweep", "cli", "serve", "integrations", "experiments", "rank", "registry", "model", "retrieve",
          "graph", "encode", "data", "permissions", "metrics", "scoring", "paths", "errors", "runtime")


def layer_of(module: str, layers: tuple[str, ...] = LAYERS) -> int:
    """Index in ``layers`` of a module's first component below the package (-1: the package itself)."""
    parts = module.split(".")
    return layers.index(parts[1]) if len(parts) > 1 else -1


def upward_imports(graph: dict[str, set[str]], layers: tuple[str, ...] = LAYERS) -> list[str]:
    """"a imports b" for every edge from a lower layer to a higher one (unknown names raise ValueError)."""
    return sorted(f"{a} imports {b}" for a, bs in graph.items() for b in bs
                  if layer_of(b, layers) < layer_of(a, layers))


def check(root: Path) -> tuple[dict[str, set[str]], list[list[str]], list[str]]:
    files = sorted(root.rglob("*.py"))
    modules = {module_name(p, root) for p in files}
    graph, private = {}, []
    for p in files:
        edges, priv = imports_of(p, root, modules)
        graph[module_name(p, root)] = edges
        private += priv
    return graph, find_cycles(graph), private


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent / "riskrank_jax"))
    root = Path(ap.parse_args(argv).root).resolve()
    graph, cycles, private = check(root)
    n_edges = sum(len(v) for v in graph.values())
    print(f"{len(graph)} modules, {n_edges} import edges (module level and in functions)")
    for c in cycles:
        print("cycle: " + " <-> ".join(c))
    for p in private:
        print("private import: " + p)
    upward = upward_imports(graph) if root.name == "riskrank_jax" else []
    for u in upward:
        print("upward import: " + u)
    print(f"{len(cycles)} cycle(s), {len(private)} private import(s), {len(upward)} upward import(s)")
    return 1 if cycles or private or upward else 0


if __name__ == "__main__":
    sys.exit(main())
