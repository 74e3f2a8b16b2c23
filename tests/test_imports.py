"""gavel_ng imports one way: no module reaches itself again through its imports.

Every import statement counts, wherever it is written: at module level, inside a
function (a deferred import is still a dependency, it only hides the cycle until the
function runs) and under `if TYPE_CHECKING:`. Modules are read with `ast`, never
imported, so the test also covers modules whose optional dependencies (torch, grpc)
are missing.

Edges: `import a.b` and `from a.b import c` name module `a.b`, or submodule `a.b.c`
when `c` is one; `from . import x` names submodule x when there is one, else the
package. Importing a submodule also runs its parents' `__init__`, but that edge is not
counted: a package's `__init__` re-exporting its submodules is how the public API is
built, and counting it would make every `from ..pkg.mod import x` a cycle.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "gavel_ng"


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is its __init__)."""
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names before its imported names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of `name` that is a module of the package (`a.b.func` -> `a.b`)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """Package modules imported anywhere in `module`, with the line of the first import of each."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}

    def add(name: str | None, line: int) -> None:
        if name is not None and name != module:
            found.setdefault(name, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    add(_known(alias.name, modules), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in modules else _known(base, modules), node.lineno)
    return found


@functools.cache     # read once per test process: the layer, cycle and torch checks share it (read-only)
def import_graph() -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    modules = module_files()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}, modules


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted: every
    module of one reaches every other through imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def visit(root: str) -> None:   # iterative Tarjan: the graph may be deep
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    components.append(sorted(comp))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return components


def cycle_in(graph: dict[str, dict[str, int]], comp: list[str]) -> list[str]:
    """A shortest cycle through the component's first module."""
    return _shortest_cycle(graph, comp)


def _shortest_cycle(graph: dict[str, dict[str, int]], comp: list[str]) -> list[str]:
    inside = set(comp)
    start = comp[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in inside:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return list(reversed(path)) + [start]
                if child not in parent:
                    parent[child] = node
                    nxt.append(child)
        frontier = nxt
    return comp


def describe(comp: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    cycle = cycle_in(graph, comp)
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        steps.append(f"    {a} -> {b}  ({modules[a].relative_to(ROOT)}:{graph[a][b]})")
    return (f"{len(comp)} modules import each other: {', '.join(comp)}\n  for instance:\n"
            + "\n".join(steps))


def test_the_walk_sees_deferred_and_relative_imports(tmp_path):
    """The parser itself: a function-level relative import and `from . import sub` count."""
    pkg = tmp_path / PACKAGE / "pkg"
    pkg.mkdir(parents=True)
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from . import b\n    return b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    (pkg / "c.py").write_text("import gavel_ng.pkg.a\nfrom .. import pkg\n")
    modules = {
        f"{PACKAGE}": tmp_path / PACKAGE / "__init__.py", f"{PACKAGE}.pkg": pkg / "__init__.py",
        f"{PACKAGE}.pkg.a": pkg / "a.py", f"{PACKAGE}.pkg.b": pkg / "b.py", f"{PACKAGE}.pkg.c": pkg / "c.py",
    }
    graph = {m: imports_of(m, p, modules) for m, p in modules.items()}
    assert set(graph[f"{PACKAGE}.pkg"]) == {f"{PACKAGE}.pkg.a"}
    assert set(graph[f"{PACKAGE}.pkg.a"]) == {f"{PACKAGE}.pkg.b"}
    assert set(graph[f"{PACKAGE}.pkg.b"]) == {f"{PACKAGE}.pkg.a"}
    assert set(graph[f"{PACKAGE}.pkg.c"]) == {f"{PACKAGE}.pkg.a", f"{PACKAGE}.pkg"}
    assert find_cycles(graph) == [[f"{PACKAGE}.pkg.a", f"{PACKAGE}.pkg.b"]]
    assert cycle_in(graph, find_cycles(graph)[0]) == [f"{PACKAGE}.pkg.a", f"{PACKAGE}.pkg.b", f"{PACKAGE}.pkg.a"]


def test_no_import_cycles():
    graph, modules = import_graph()
    assert len(graph) > 50, "the walk found too few modules"
    cycles = find_cycles(graph)
    if cycles:
        pytest.fail("import cycles (every import counts, inside functions too):\n"
                    + "\n".join(describe(c, graph, modules) for c in cycles), pytrace=False)


def test_the_library_never_imports_the_cli():
    graph, modules = import_graph()
    cli = f"{PACKAGE}.cli"
    bad = [f"{m} -> {t} ({modules[m].relative_to(ROOT)}:{line})"
           for m, targets in graph.items() if not (m == cli or m.startswith(cli + ".") or m == f"{PACKAGE}.__main__")
           for t, line in targets.items() if t == cli or t.startswith(cli + ".")]
    assert not bad, "library modules importing the CLI:\n" + "\n".join(bad)


@pytest.mark.parametrize("module", ["gavel_ng.iterator", "gavel_ng.worker", "gavel_ng.worker.daemon",
                                    "gavel_ng.worker.run_job"])
def test_what_runs_in_a_job_or_on_a_worker_loads_no_solver(module):
    """A training job and a worker daemon start without the policies and their solvers: importing
    the package itself defers its public names (gavel_ng/__init__.py)."""
    import subprocess
    import sys

    heavy = ("cvxpy", "highspy", "scipy", "gavel_ng.policies", "gavel_ng.mechanism", "gavel_ng.elastic")
    code = f"import sys, {module}; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "", f"importing {module} loaded {out.stdout.strip()}"


def test_the_package_still_gives_its_public_names():
    import gavel_ng

    assert {"solve", "policy", "Cluster", "ThroughputTable"} <= set(dir(gavel_ng))
    assert gavel_ng.solve is __import__("gavel_ng.policies", fromlist=["solve"]).solve
    with pytest.raises(AttributeError):
        gavel_ng.no_such_name  # noqa: B018
