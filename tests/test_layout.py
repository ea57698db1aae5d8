"""The package's architecture (docs/architecture.md), checked: no import circles among gr_core modules, the layers
import only downwards, no module over 500 lines. Imports inside functions and ``if TYPE_CHECKING`` blocks are read
too: a circle through a type annotation is still a circle for the reader."""
import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gr_core"
METHODS = ("g_retriever", "gnn_rag")
ABOVE_METHODS = ("chat", "studies", "report", "suite", "plan", "speeds")
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = ["gr_core", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """The gr_core modules ``name`` imports (a submodule import also imports its packages)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for target in targets:
            parts = target.split(".")
            for k in range(2, len(parts) + 1):
                prefix = ".".join(parts[:k])
                if prefix in MODULES and prefix != name and not name.startswith(prefix + "."):
                    out.add(prefix)
    return out


GRAPH = {name: imports_of(name) for name in MODULES}


def _layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "gr_core"


def find_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of an import graph that hold more than one module, each sorted."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles():
    circles = find_circles(GRAPH)
    assert not circles, f"import circles: {circles}"


def test_the_circle_check_finds_a_circle(tmp_path, monkeypatch):
    """The check above would see one: two modules importing each other inside functions or for a type only."""
    pkg = tmp_path / "gr_core"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n"
                              "def g():\n    from gr_core.a import f\n")
    (pkg / "c.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    monkeypatch.setattr(sys.modules[__name__], "MODULES", {module_name(p): p for p in pkg.rglob("*.py")})
    assert imports_of("gr_core.a") == {"gr_core.b"} and imports_of("gr_core.b") == {"gr_core.a", "gr_core.c"}
    graph = {n: imports_of(n) for n in MODULES}
    assert find_circles(graph) == [["gr_core.a", "gr_core.b"]]
    graph["gr_core.b"].discard("gr_core.a")
    assert find_circles(graph) == []


RUNNER = ("suite", "plan", "speeds")
# plumbing's one use of a method (docs/architecture.md): a dataset's default retrieval
RETRIEVAL = {"gr_core.g_retriever", "gr_core.g_retriever.retrieval", "gr_core.g_retriever.textualize"}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.endswith("__main__")))
def test_layers_import_only_downwards(name):
    """docs/architecture.md's table: the methods never import a study, the report, the chat or the runner; the
    plumbing imports no method except graphqa's retrieval, which imports only plumbing; the report reads files, so it
    imports plumbing only; studies use the report's table builders only; G-Retriever never imports GNN-RAG; nothing
    imports the runner (a ``__main__`` is an entry point and may import anything)."""
    layer, targets = _layer(name), GRAPH[name]
    plumbing = layer not in (*METHODS, *ABOVE_METHODS)
    upward = {t for t in targets if _layer(t) in ABOVE_METHODS}
    if layer in METHODS or plumbing:
        assert not upward, f"{name} ({layer}) imports {sorted(upward)}"
    if plumbing:
        allowed = RETRIEVAL if name == "gr_core.graphqa" else set()
        assert not {t for t in targets if _layer(t) in METHODS} - allowed, f"{name} (plumbing) imports a method"
    if name in RETRIEVAL - {"gr_core.g_retriever"}:
        beyond = {t for t in targets if _layer(t) in (*METHODS, *ABOVE_METHODS)} - RETRIEVAL
        assert not beyond, f"{name} imports beyond plumbing: {sorted(beyond)}"
    if layer == "report":
        assert not {t for t in targets if _layer(t) in (*METHODS, "chat", "studies", *RUNNER)}, name
    if layer == "studies":
        assert not {t for t in targets if _layer(t) == "report"} - {"gr_core.report", "gr_core.report.results"}, name
    if layer == "g_retriever":
        assert not {t for t in targets if _layer(t) == "gnn_rag"}, name
    if layer == "chat":
        assert not {t for t in targets if _layer(t) in ("studies", "report", *RUNNER)}, name
    if layer not in RUNNER:
        assert not {t for t in targets if _layer(t) in RUNNER}, f"{name} imports the runner"


def test_the_layer_rules_catch_an_upward_import(monkeypatch):
    """Each rule above fails a module that breaks it (the graph edited, one import added at a time)."""
    for name, target in (("gr_core.kg", "gr_core.gnn_rag.model"), ("gr_core.report.claims", "gr_core.studies.gnn_rag"),
                         ("gr_core.g_retriever.retrieval", "gr_core.g_retriever.model"),
                         ("gr_core.studies.gnn_rag", "gr_core.report.claims"),
                         ("gr_core.g_retriever.train", "gr_core.gnn_rag.model"), ("gr_core.llm", "gr_core.plan")):
        monkeypatch.setitem(GRAPH, name, GRAPH[name] | {target})
        with pytest.raises(AssertionError):
            test_layers_import_only_downwards(name)
        monkeypatch.setitem(GRAPH, name, GRAPH[name] - {target})


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_500_lines(name):
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines (docs/architecture.md: split it by step)"


BENCH = PACKAGE.parent / "bench"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py") if p.name != "common.py"))
def test_every_bench_has_an_argparse_command_line(script):
    """``python bench/NAME.py --help`` works for every benchmark: options through argparse, never ``sys.argv``."""
    tree = ast.parse((BENCH / script).read_text())
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | \
        {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "argparse" in names and "ArgumentParser" in names, f"bench/{script} has no argparse parser"
    assert "argv" not in {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}, \
        f"bench/{script} reads sys.argv itself"


NOTEBOOKS = PACKAGE.parent / "notebooks"
# what ./gr runs (gr suite, gr data) besides the package's ``__main__`` modules
ENTRY_POINTS = {"gr_core.suite", "gr_core.data_sources"}


def test_every_module_serves_the_notebooks_or_the_library():
    """``gr_core/`` is what the notebooks and users call: each module is imported by a notebook or another module, or
    is a command line (``./gr``, ``python -m``); an experiment only ``bench/`` runs lives in ``bench/``."""
    import json

    cells = "\n".join("".join(c["source"]) for p in NOTEBOOKS.glob("*.ipynb")
                      for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code")
    used = set().union(*GRAPH.values())
    for line in cells.splitlines():
        words = line.replace(",", " ").split()
        if words[:1] == ["from"] or words[:1] == ["import"]:
            base = words[1]
            used |= {base} | ({f"{base}.{w}" for w in words[3:]} if words[:1] == ["from"] else set())
    idle = sorted(n for n in MODULES if n not in used and not n.endswith("__main__") and n not in ENTRY_POINTS
                  and n != "gr_core")
    assert not idle, f"imported by no notebook and no module (move to bench/ or delete): {idle}"


DOCS = PACKAGE.parent / "docs"


@pytest.mark.parametrize("doc", sorted(p.name for p in DOCS.glob("*.md")))
def test_docs_are_guides_of_at_most_about_300_lines(doc):
    """docs/ says what is true now and how to use it; history goes to CHANGELOG.md. method.md maps the papers' steps
    to the code and may be longer."""
    lines = (DOCS / doc).read_text().count("\n")
    assert lines <= (500 if doc == "method.md" else 300), f"docs/{doc} has {lines} lines"


def test_the_architecture_names_every_module():
    """docs/architecture.md lists every module that remains (a package's ``__init__`` speaks for itself)."""
    text = (DOCS / "architecture.md").read_text()
    unnamed = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if p.name != "__init__.py" and p.name not in text)
    assert not unnamed, f"docs/architecture.md does not name {unnamed}"
