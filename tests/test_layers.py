"""The layer map is enforced: every import in the package goes down the map, the modules form no
import cycle, and importing a pass never loads what passes must not use.

``LAYERS`` below is the one map; the README's table ("Layout guardrails") is generated from it
(``pytest tests/test_layers.py --update-goldens`` rewrites it). Every import counts: function-
level ones, relative ones, and those made only for type checking (``if TYPE_CHECKING:``), which
would hide a cycle. A module may import a lower layer, or its own entry of the map (a package
importing its own modules); within a layer the entries are ordered, and a later entry may import
an earlier one, never the reverse (the core is ordered this way, module by module).

Pass modules never import protobuf, serde, the executor or the bridges themselves; and what
importing a pass loads, through every import it makes and every package ``__init__`` that runs
first, never includes the executor, the drop-in functions of ``compat``, the ONNX bridge, the
users' test helpers or the CLI. The two facades (``graphtools``, ``graphtools.passes``) load
what they give on first use, so they do not count.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"graphtools": REPO / "graphtools", "graphtools.passes": REPO / "passes"}
README = REPO / "README.md"

LAYERS: list[tuple[str, float, str]] = [
    # (module prefix, layer, what it is); most specific prefix first within a layer number.
    ("graphtools.proto", 1, "schemas (caffe2.proto and friends) and their generated modules"),
    ("graphtools.errors", 1, "the typed errors"),
    ("graphtools._gc", 1, "pausing the garbage collector around bulk work"),
    ("graphtools._ints", 1, "int objects shared by op indices and blob ids"),
    ("graphtools._malloc", 1, "big blocks mapped on their own (glibc's mmap threshold)"),
    ("graphtools.interrupt", 1, "Ctrl-C and SIGTERM handling"),
    ("graphtools._core", 1, "the dialect names and the op/net protocols the core sees"),
    ("graphtools.ssa", 2.1, "versioned blobs, get_ssa and Caffe2's SSA helpers"),
    ("graphtools.oplist", 2.1, "the immutable, chunked op list"),
    ("graphtools.values", 2.1, "constants and declared types a net holds"),
    ("graphtools.layout", 2.2, "where the ops of an edited net come from"),
    ("graphtools.ssa_view", 2.3, "the cached versioned-blob view of a net"),
    ("graphtools.usedef", 2.4, "use-def right after an edit"),
    ("graphtools.nested", 2.5, "what nested nets read and write outside"),
    ("graphtools.rewriter", 2.6, "Edit: the checked transaction on a net"),
    ("graphtools.ir", 2.7, "Model, Net, Op: the data model and snapshots"),
    ("graphtools.graph", 2.8, "graph views"),
    ("graphtools.wellformed", 2.8, "well-formedness findings"),
    ("graphtools.printer", 2.8, "the canonical text dump"),
    ("graphtools.serde", 3, "files and codecs: the only code turning bytes into IR and back"),
    ("graphtools.analysis", 3.1, "functions over the IR that return data"),
    ("graphtools.dot", 3.2, "DOT pictures"),
    ("graphtools.pass_infra", 4, "Pass and its checks, registry, pipeline specs, PassManager"),
    ("graphtools.executor", 4, "the numpy reference interpreter for Caffe2 ops"),
    ("graphtools.dialects", 4.1, "the op table of each dialect (evaluation by kernels, runtimes)"),
    ("graphtools.gradients", 5, "Caffe2's gradient registry, control-flow gradients"),
    ("graphtools.recurrent", 5.1, "recurrent_net: building RecurrentNetwork ops"),
    ("graphtools.convert", 5.2, "conversions between dialects: per-op converter tables"),
    ("graphtools.passes", 5.3, "one transformation per module"),
    ("graphtools.compat", 6, "Caffe2/detectron2 drop-in functions on NetDefs"),
    ("graphtools.feeds", 6, "made-up inputs and weights"),
    ("graphtools.gradient_check", 6, "finite-difference gradient checks"),
    ("graphtools.golden", 6, "golden files"),
    ("graphtools.testing", 6.1, "users' test helpers"),
    ("graphtools.onnx", 6.2, "the ONNX bridge: onnxruntime runs and comparisons"),
    ("graphtools.pytest_plugin", 6.3, "the pytest plugin (ONNX models compared on the bridge)"),
    ("graphtools.extract", 6.3, "sub-net extraction: Caffe2 pairs and ONNX models"),
    ("graphtools.cli", 7, "the command line, one module per command family"),
    ("graphtools.launch", 7.1, "the console script: signal handlers, then the command line"),
    ("graphtools.__main__", 7.2, "python -m graphtools"),
]
FACADES = {"graphtools", "graphtools.passes"}
"""Packages whose ``__init__`` gives names of higher layers, loaded on first use."""
PASS_MODULES_NEVER_IMPORT = (
    "google.protobuf",
    "graphtools.proto",
    "graphtools.serde",
    "graphtools.executor",
)
PASSES_NEVER_REACH = (
    "graphtools.executor",
    "graphtools.compat",
    "graphtools.onnx",
    "graphtools.testing",
    "graphtools.feeds",
    "graphtools.cli",
)


def layer_of(module: str) -> tuple[float, str]:
    """The layer of a module of the package and the entry of the map that places it."""
    for prefix, layer, _ in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer, prefix
    raise AssertionError(f"module {module} is in no layer: add it to LAYERS")


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


def _is_package(module: str, modules: dict[str, Path] | None) -> bool:
    return modules is not None and module in modules and modules[module].name == "__init__.py"


def imports_of(
    source: str,
    module: str = "",
    packages: frozenset[str] = frozenset(),
    *,
    loaded_only: bool = False,
) -> Iterator[tuple[str, int]]:
    """``(module imported, line)`` for every import at any depth, type-checking ones included;
    relative imports are resolved against ``module`` (``packages``: the package modules).
    ``loaded_only``: only the imports that run when the module is imported (not those in
    function bodies, nor those made only for type checking)."""
    package = module if module in packages else module.rpartition(".")[0]
    tree = ast.parse(source)
    for node in _loaded(tree) if loaded_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from graphtools.analysis import shapes` imports a module; which names are
            # modules, `check` knows: both candidates are given, joined by "|".
            for alias in node.names:
                yield f"{base}|{alias.name}", node.lineno


def _loaded(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes that run at import: everything but function bodies and type-checking
    blocks."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(child, ast.If) and _is_type_checking(child):
            yield from (node for other in child.orelse for node in [other, *_loaded(other)])
            continue
        yield child
        yield from _loaded(child)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph(
    modules: dict[str, str], *, loaded_only: bool = False
) -> tuple[nx.DiGraph, list[str]]:
    """The import graph among ``{module: source}`` and the direct-import problems found."""
    problems = []
    graph = nx.DiGraph()
    packages = frozenset(m for m in modules if m in _PACKAGES)
    for module, source in modules.items():
        graph.add_node(module)
        is_pass_module = module.startswith("graphtools.passes.")
        for found, line in imports_of(source, module, packages, loaded_only=loaded_only):
            base, _, name = found.partition("|")
            target = f"{base}.{name}" if f"{base}.{name}" in modules else base
            if is_pass_module and target.startswith(PASS_MODULES_NEVER_IMPORT):
                problems.append(f"{module}:{line} imports {target}: pass modules never do")
            if target not in modules or target == module:
                continue
            graph.add_edge(module, target, line=line)
    return graph, problems


def check(modules: dict[str, str]) -> list[str]:
    """Every layer-map violation among ``{module name: source}``, and every import cycle."""
    graph, problems = import_graph(modules)
    for module, target, data in graph.edges(data=True):
        if module in FACADES or _is_parent_edge(module, target):
            continue
        (own, own_entry), (layer, entry) = layer_of(module), layer_of(target)
        if layer > own or (layer == own and entry != own_entry):
            problems.append(
                f"{module}:{data['line']} (layer {own}) imports {target} (layer {layer})"
            )
    # A package's __init__ runs before its modules: importing graphtools.x.y imports the
    # package graphtools.x first, which is not an import cycle of the code.
    for cycle in nx.simple_cycles(graph):
        if not all(
            _is_parent_edge(a, b) for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)
        ):
            problems.append("import cycle: " + " -> ".join([*cycle, cycle[0]]))
    problems.extend(_reach_problems(import_graph(modules, loaded_only=True)[0]))
    return problems


def _reach_problems(graph: nx.DiGraph) -> list[str]:
    """What importing each pass module loads that passes must not: its imports, recursively,
    and the package ``__init__`` of each module loaded (the facades load nothing)."""
    problems = []
    for module in sorted(graph):
        if not module.startswith("graphtools.passes."):
            continue
        loading = _loading_graph(graph)
        reached = sorted(
            t for t in nx.descendants(loading, module) if t.startswith(PASSES_NEVER_REACH)
        )
        if reached:
            path = nx.shortest_path(loading, module, reached[0])
            problems.append(f"importing {module} loads {reached[0]}: {' -> '.join(path)}")
    return problems


def _loading_graph(graph: nx.DiGraph) -> nx.DiGraph:
    loading = nx.DiGraph()
    for module in graph:
        for target in graph.successors(module):
            if module not in FACADES:
                loading.add_edge(module, target)
        parts = module.split(".")
        for size in range(1, len(parts)):
            parent = ".".join(parts[:size])
            if parent in graph:
                loading.add_edge(module, parent)
    return loading


def _is_parent_edge(a: str, b: str) -> bool:
    return a.startswith(b + ".") or b.startswith(a + ".")


_PACKAGES = frozenset(
    module for module, path in _modules().items() if path.name == "__init__.py"
) | {"graphtools.proto"}


def layer_table() -> str:
    """The README's layer table, made from ``LAYERS``."""
    lines = ["| layer | modules | what they are |", "| --- | --- | --- |"]
    for prefix, layer, what in LAYERS:
        name = prefix.removeprefix("graphtools.") if prefix != "graphtools" else prefix
        shown = f"{name}/" if _is_package(prefix, _modules()) else name
        lines.append(f"| {layer:g} | `{shown}` | {what} |")
    return "\n".join(lines)


_TABLE = re.compile(r"(<!-- layers -->\n)(.*?)(\n<!-- /layers -->)", re.S)


def test_the_package_respects_the_layer_map() -> None:
    sources = {module: path.read_text() for module, path in _modules().items()}
    assert check(sources) == []


def test_the_readme_table_is_made_from_the_map(update_goldens: bool) -> None:
    text = README.read_text()
    found = _TABLE.search(text)
    assert found, "README.md lacks the <!-- layers --> ... <!-- /layers --> table"
    if update_goldens:
        README.write_text(_TABLE.sub(lambda m: m[1] + layer_table() + m[3], text))
        return
    assert found[2] == layer_table(), "run: pytest tests/test_layers.py --update-goldens"


@pytest.mark.parametrize(
    ("module", "source", "words"),
    [
        ("graphtools.passes.bad", "import graphtools.serde\n", ["pass modules never do"]),
        ("graphtools.passes.bad", "from google.protobuf import text_format\n", ["never do"]),
        (
            "graphtools.ir",
            "def f():\n    from graphtools.serde import codec\n",
            ["layer 2.7", "layer 3"],
        ),
        ("graphtools.analysis.x", "import graphtools.executor\n", ["layer 3.1", "layer 4"]),
        # Same layer, another entry: serde is below analysis, not the reverse.
        ("graphtools.serde.x", "import graphtools.analysis.shapes\n", ["layer 3", "layer 3.1"]),
        # Inside the core, a lower module never names a higher one, even for type hints.
        (
            "graphtools.ssa_view",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from graphtools.ir import Net\n",
            ["layer 2.3", "layer 2.7"],
        ),
        # A relative import counts as the absolute one.
        ("graphtools.analysis.x", "from ..executor import run_model\n", ["layer 4"]),
        # A pass that reaches the executor through an analysis it imports.
        (
            "graphtools.analysis.x",
            "import graphtools.executor\n",
            ["loads graphtools.executor", "graphtools.passes.bad -> graphtools.analysis.x"],
        ),
    ],
)
def test_a_forbidden_import_is_reported(module: str, source: str, words: list[str]) -> None:
    sources = {name: path.read_text() for name, path in _modules().items()}
    sources[module] = sources.get(module, "") + source
    sources.setdefault("graphtools.passes.bad", "import graphtools.analysis.x\n")
    problems = check(sources)
    assert problems and all(word in "\n".join(problems) for word in words), problems


def test_an_import_cycle_is_reported() -> None:
    sources = {name: path.read_text() for name, path in _modules().items()}
    sources["graphtools.ssa"] += "import graphtools.ir\n"  # ir imports ssa_view imports ssa
    assert any("import cycle" in problem for problem in check(sources))


def test_type_checking_imports_are_counted() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import graphtools.cli\n"
    assert [target for target, _ in imports_of(source)] == [
        "typing|TYPE_CHECKING",
        "graphtools.cli",
    ]
