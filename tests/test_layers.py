"""The layer map is enforced: every import in the package (function-level ones included)
goes to a lower or the same layer, and the modules form no import cycle.

The layers (README, "Layout guardrails", with the placements it explains):

1. ``proto``, ``errors``, ``_gc``, ``interrupt``
2. the core: ``ssa``, ``usedef``, ``ssa_view``, ``analysis.nested``, ``ir``, ``oplist``, ``graph``,
   ``verify``, ``printer``
3. ``analysis`` (the rest), ``serde``, ``dot``
4. ``pass_infra``, ``executor``
5. ``passes``, ``gradients``, ``recurrent``
6. ``compat``, ``onnx``, ``extract``, ``testing`` and the other helpers for users' tests
   (``feeds``, ``golden``, ``pytest_plugin``)
7. ``cli``, ``__main__``; the package ``graphtools`` itself (the public facade)

Imports made only for type checking (``if TYPE_CHECKING:``) are not run and are not counted.
Pass modules (not the ``graphtools.passes`` facade, which re-exports the drop-in functions)
never import protobuf, serde or the executor.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"graphtools": REPO / "graphtools", "graphtools.passes": REPO / "passes"}

LAYERS: list[tuple[str, int]] = [
    # Most specific prefix first.
    ("graphtools.analysis.nested", 2),
    ("graphtools.proto", 1),
    ("graphtools.errors", 1),
    ("graphtools._gc", 1),
    ("graphtools.interrupt", 1),
    ("graphtools.ssa_view", 2),
    ("graphtools.ssa", 2),
    ("graphtools.usedef", 2),
    ("graphtools.ir", 2),
    ("graphtools.oplist", 2),
    ("graphtools.graph", 2),
    ("graphtools.verify", 2),
    ("graphtools.printer", 2),
    ("graphtools.dot", 3),
    ("graphtools.analysis", 3),
    ("graphtools.serde", 3),
    ("graphtools.pass_infra", 4),
    ("graphtools.executor", 4),
    ("graphtools.passes", 5),
    ("graphtools.gradients", 5),
    ("graphtools.recurrent", 5),
    ("graphtools.compat", 6),
    ("graphtools.onnx", 6),
    ("graphtools.extract", 6),
    ("graphtools.testing", 6),
    ("graphtools.feeds", 6),
    ("graphtools.gradient_check", 6),
    ("graphtools.golden", 6),
    ("graphtools.pytest_plugin", 6),
    ("graphtools.cli", 7),
    ("graphtools.__main__", 7),
]
FACADES = {"graphtools": 8, "graphtools.passes": 7}
"""Packages whose ``__init__`` is a public facade re-exporting higher layers."""
PASS_MODULES_NEVER_IMPORT = (
    "google.protobuf",
    "graphtools.proto",
    "graphtools.serde",
    "graphtools.executor",
)


def layer_of(module: str) -> int:
    """The layer of a module of the package."""
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"module {module} is in no layer: add it to LAYERS and the README")


def _modules() -> dict[str, Path]:
    found = {}
    for package, root in ROOTS.items():
        for path in root.rglob("*.py"):
            if path.name.endswith("_pb2.py") or "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if package == "graphtools" and parts[0] in ("passes", "proto"):
                continue  # never created (README guardrails); would be the mapped folders
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    for path in (REPO / "proto").glob("*.py"):
        if not path.name.endswith("_pb2.py"):
            name = path.stem
            found["graphtools.proto" + ("" if name == "__init__" else f".{name}")] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(source: str) -> Iterator[tuple[str, int]]:
    """``(module imported, line)`` for every import that runs, at any depth."""

    def walk(node: ast.AST) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    yield from walk(other)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                # `from graphtools.analysis import nested` imports a module; which names are
                # modules, `check` knows: both candidates are given, joined by "|".
                for alias in child.names:
                    yield f"{child.module}|{alias.name}", child.lineno
            yield from walk(child)

    yield from walk(ast.parse(source))


def check(modules: dict[str, str]) -> list[str]:
    """Every layer-map violation among ``{module name: source}``, and every import cycle."""
    problems = []
    graph = nx.DiGraph()
    for module, source in modules.items():
        own = FACADES.get(module) or layer_of(module)
        is_pass_module = module.startswith("graphtools.passes.")
        for found, line in imports_of(source):
            package, _, name = found.partition("|")
            target = f"{package}.{name}" if f"{package}.{name}" in modules else package
            if is_pass_module and target.startswith(PASS_MODULES_NEVER_IMPORT):
                problems.append(f"{module}:{line} imports {target}: pass modules never do")
            if target not in modules or target == module:
                continue
            graph.add_edge(module, target)
            layer = FACADES.get(target) or layer_of(target)
            if layer > own:
                problems.append(f"{module}:{line} (layer {own}) imports {target} (layer {layer})")
    # A package's __init__ runs before its modules: importing graphtools.x.y imports the
    # package graphtools.x first, which is not an import cycle of the code.
    for cycle in nx.simple_cycles(graph):
        if not all(
            _is_parent_edge(a, b) for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)
        ):
            problems.append("import cycle: " + " -> ".join([*cycle, cycle[0]]))
    return problems


def _is_parent_edge(a: str, b: str) -> bool:
    return a.startswith(b + ".") or b.startswith(a + ".")


def test_the_package_respects_the_layer_map() -> None:
    sources = {module: path.read_text() for module, path in _modules().items()}
    assert check(sources) == []


@pytest.mark.parametrize(
    ("module", "source", "words"),
    [
        ("graphtools.passes.bad", "import graphtools.serde\n", ["pass modules never do"]),
        ("graphtools.passes.bad", "from google.protobuf import text_format\n", ["never do"]),
        (
            "graphtools.ir",
            "def f():\n    from graphtools.serde import codec\n",
            ["layer 2", "layer 3"],
        ),
        ("graphtools.analysis.x", "import graphtools.executor\n", ["layer 3", "layer 4"]),
    ],
)
def test_a_forbidden_import_is_reported(module: str, source: str, words: list[str]) -> None:
    sources = {name: path.read_text() for name, path in _modules().items()}
    sources[module] = sources.get(module, "") + source
    problems = check(sources)
    assert problems and all(word in "\n".join(problems) for word in words), problems


def test_an_import_cycle_is_reported() -> None:
    sources = {name: path.read_text() for name, path in _modules().items()}
    sources["graphtools.ssa"] += "import graphtools.ir\n"  # ir imports ssa_view imports ssa
    assert any("import cycle" in problem for problem in check(sources))


def test_type_checking_imports_are_not_counted() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import graphtools.cli\n"
    assert [target for target, _ in imports_of(source)] == ["typing|TYPE_CHECKING"]
