"""Hostile-input fuzzing for ONNX: mutated real ONNX models through the API and the CLI.

Every mutant must either load and survive the default pipeline and a write + reload through
the codec, or be refused with a ``GraphToolsError`` (a ``PassError`` wrapping an untyped
exception is a finding); through the CLI, ``show`` and ``run -p default -o`` must exit 0 or 2
and ``verify -p default`` (onnxruntime before and after) 0, 1 or 2, without raising, with one
``error:`` line on 2. A file ``run`` wrote after exit 0 must pass
``onnx.checker.check_model(full_check=True)``, unless onnx's checker rejected the input too
(then ``run`` said so in a warning: graphtools rewrites models the checker rejects, such as
ones with an op it does not know, and keeps what it cannot judge).

Mutants are made deterministically from a seed, from model files (the PyTorch corpus, the
backend node cases): byte flips, truncations, splices and deletions; strings made invalid
UTF-8; attributes whose declared type does not match the field set, or without any value; If
nodes without branches, Loop and Scan without bodies; graphs wrapped in If nodes up to 30
deep; external data locations outside the folder, absolute, missing or with offsets past the
file; initializers whose data does not fit their type or shape, unknown element types; nodes
reading values nobody writes, writing values twice, unknown op types and domains; removed
opsets, odd IR versions, declared types with odd element types and dims; model-local
functions calling themselves.

    python benchmarks/fuzz_onnx.py                  # 3,000 mutants (corpus needs torch)
    python benchmarks/fuzz_onnx.py --mutants 500 --seed 7 --no-corpus
    python benchmarks/fuzz_onnx.py --corpus-dir /tmp/corpus   # keeps the corpus export

``tests/test_fuzz_onnx.py`` runs a short version of the same campaign in the suite.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import AttributeProto, TensorProto, helper

from graphtools.cli import main as cli_main
from graphtools.cli.onnx_files import checker_problem
from graphtools.errors import GraphToolsError, PassError
from graphtools.pass_infra import PassManager
from graphtools.printer import print_model
from graphtools.serde.onnx_codec import model_from_onnx_bytes, model_to_onnx_bytes
from graphtools.serde.onnx_io import load_onnx_model
from graphtools.wellformed import verify

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from byte_mutations import BYTE_MUTATIONS, flip, truncate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
_BAD_UTF8 = (b"\xff", b"\xfe", b"\xc0", b"\xed", b"\x80")


@dataclass(frozen=True)
class Source:
    """A model to mutate: its name, bytes, and its external data files (name -> bytes)."""

    name: str
    data: bytes
    external: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class Mutant:
    """One mutated model: the source, how it was mutated, its bytes and data files."""

    source: int
    how: str
    data: bytes
    external: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Outcome:
    """What a mutant did: ``ok``, ``refused`` (a ``GraphToolsError``) or ``bug``."""

    kind: str
    step: str
    detail: str


# -- mutations --------------------------------------------------------------------------------


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _names(model: onnx.ModelProto) -> list[str]:
    found: set[str] = {model.producer_name}
    for graph in _graphs(model.graph):
        found.add(graph.name)
        for node in graph.node:
            found.update((node.op_type, node.name, node.domain, *node.input, *node.output))
            found.update(a.name for a in node.attribute)
        for section in (graph.input, graph.output, graph.value_info):
            found.update(v.name for v in section)
        found.update(t.name for t in graph.initializer)
    return sorted(name for name in found if name)


def _bad_string(rng: random.Random, data: bytes, model: onnx.ModelProto) -> bytes:
    """One occurrence of one of the model's strings made invalid UTF-8, same length."""
    names = _names(model)
    if not names:
        return flip(rng, data)
    name = rng.choice(names).encode()
    starts: list[int] = []
    at = data.find(name)
    while at >= 0 and len(starts) < 100:
        starts.append(at)
        at = data.find(name, at + 1)
    if not starts:
        return flip(rng, data)
    at = rng.choice(starts) + rng.randrange(len(name))
    return data[:at] + rng.choice(_BAD_UTF8) + data[at + 1 :]


def _nodes(model: onnx.ModelProto) -> list[tuple[onnx.GraphProto, onnx.NodeProto]]:
    return [(graph, node) for graph in _graphs(model.graph) for node in graph.node]


def _wrap_in_ifs(model: onnx.ModelProto, depth: int) -> None:
    graph = model.graph
    outputs = list(graph.output)
    inner = onnx.GraphProto()
    inner.CopyFrom(graph)
    del inner.input[:]
    del inner.initializer[:]
    names = [o.name for o in outputs]
    for level in range(depth):
        other = helper.make_graph(
            [helper.make_node("Constant", [], names[:1], value_float=0.0)], "other", [], outputs
        )
        node = helper.make_node("If", ["wrap_cond"], names, then_branch=inner, else_branch=other)
        outer = helper.make_graph([node], f"wrap{level}", [], outputs)
        inner = outer
    del graph.node[:]
    graph.node.extend(inner.node)
    graph.initializer.append(helper.make_tensor("wrap_cond", TensorProto.BOOL, [], [True]))


def _odd_attribute(rng: random.Random, node: onnx.NodeProto) -> None:
    attribute = node.attribute.add() if not node.attribute or rng.random() < 0.4 else None
    if attribute is None:
        attribute = rng.choice(node.attribute)
    else:
        attribute.name = rng.choice(("axis", "perm", "value", "then_branch", "body", "to", ""))
    choice = rng.randrange(7)
    if choice == 0:  # the declared type does not match the field set
        attribute.type = rng.choice(
            (AttributeProto.GRAPH, AttributeProto.TENSOR, AttributeProto.INTS, AttributeProto.FLOAT)
        )
    elif choice == 1:
        attribute.type = rng.choice((AttributeProto.UNDEFINED, AttributeProto.TYPE_PROTOS))
    elif choice == 2:  # no value at all
        for field in ("f", "i", "s", "t", "g", "tp", "sparse_tensor"):
            attribute.ClearField(field)  # type: ignore[arg-type]
    elif choice == 3:
        attribute.i = rng.choice((2**63 - 1, -(2**63), -1, 10**12))
        attribute.type = AttributeProto.INT
    elif choice == 4:
        attribute.ints.extend(rng.choice(([], [-1], [2**62, -5], [0] * 9)))
        attribute.type = AttributeProto.INTS
    elif choice == 5:
        attribute.t.CopyFrom(helper.make_tensor("t", TensorProto.INT64, [2], [1, 2]))
        attribute.t.data_type = rng.choice((0, 99, TensorProto.STRING, TensorProto.INT64))
        attribute.type = AttributeProto.TENSOR
    else:
        attribute.g.CopyFrom(helper.make_graph([], "empty", [], []))
        attribute.type = AttributeProto.GRAPH


def _initializers(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """The model's initializers, one added to the main graph when it has none."""
    tensors = [t for g in _graphs(model.graph) for t in g.initializer]
    if not tensors:
        tensors.append(helper.make_tensor("extra", TensorProto.FLOAT, [2, 2], [1.0] * 4))
        model.graph.initializer.extend(tensors)
    return tensors


def _external(rng: random.Random, model: onnx.ModelProto) -> str:
    tensors = _initializers(model)
    tensor = rng.choice(tensors)
    choice = rng.randrange(5)
    location = rng.choice(
        ("../outside.data", "/etc/hostname", "sub/../../x.data", "missing.data", "", "a\x00b")
    )
    if choice < 3:
        del tensor.external_data[:]
        tensor.external_data.add(key="location", value=location)
        tensor.data_location = TensorProto.EXTERNAL
        tensor.ClearField("raw_data")
        return "external-location"
    entries = {e.key: e for e in tensor.external_data}
    if not entries:
        tensor.data_location = TensorProto.EXTERNAL
        return "external-no-entries"
    for key in ("offset", "length"):
        if key in entries:
            entries[key].value = rng.choice(("-1", "99999999", "x", "0"))
    return "external-range"


def _initializer(rng: random.Random, model: onnx.ModelProto) -> str:
    tensors = _initializers(model)
    tensor = rng.choice(tensors)
    choice = rng.randrange(4)
    if choice == 0:
        tensor.data_type = rng.choice((0, 99, TensorProto.STRING, TensorProto.FLOAT16))
    elif choice == 1:
        tensor.dims.append(rng.choice((3, 0, -1, 2**40)))
    elif choice == 2:
        tensor.raw_data = tensor.raw_data[: len(tensor.raw_data) // 2] or b"\x01"
    else:
        model.graph.initializer.append(tensor)  # the same name twice
    return "initializer"


def _structural(rng: random.Random, model: onnx.ModelProto) -> str:
    """A random edit through the message API; returns its name."""
    nodes = _nodes(model)
    choice = rng.randrange(14)
    if choice == 0:
        _wrap_in_ifs(model, rng.choice((1, 2, 5, 15, 16, 17, 30)))
        return "nest"
    if choice == 1 and nodes:
        _odd_attribute(rng, rng.choice(nodes)[1])
        return "odd-attribute"
    if choice == 2 and nodes:
        _, node = rng.choice(nodes)
        node.op_type = rng.choice(("If", "Loop", "Scan"))
        del node.attribute[:]  # control flow without its graphs
        return "no-branches"
    if choice == 3:
        return _external(rng, model)
    if choice == 4:
        return _initializer(rng, model)
    if choice == 5 and nodes:
        _, node = rng.choice(nodes)
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(
                ("nobody", "", node.output[0] if node.output else "x")
            )
        return "rewire"
    if choice == 6 and len(nodes) > 1:
        (_, a), (_, b) = rng.sample(nodes, 2)
        if a.output and b.output:
            b.output[0] = a.output[0]  # written twice
        return "write-twice"
    if choice == 7 and nodes:
        _, node = rng.choice(nodes)
        node.op_type = rng.choice(("NoSuchOp", "", "Identity", "Dropout", "Constant"))
        if rng.random() < 0.4:
            node.domain = rng.choice(("com.example", "ai.onnx.ml", "ai.onnx"))
        return "retype"
    if choice == 8:
        if rng.random() < 0.5:
            del model.opset_import[:]
        else:
            model.opset_import.add(domain=rng.choice(("", "x")), version=rng.choice((0, 9999, -3)))
        model.ir_version = rng.choice((0, 1, 3, 99, model.ir_version))
        return "opset"
    if choice == 9:
        values = [v for g in _graphs(model.graph) for v in (*g.input, *g.output, *g.value_info)]
        if values:
            value = rng.choice(values)
            tensor_type = value.type.tensor_type
            tensor_type.elem_type = rng.choice((0, 99, TensorProto.STRING))
            dim = tensor_type.shape.dim.add()
            if rng.random() < 0.5:
                dim.dim_value = rng.choice((-1, 0, 2**40))
            else:
                dim.dim_param = rng.choice(("", "N", "\u00e9"))
        return "value-type"
    if choice == 10:
        function = helper.make_function(
            "f", "Self", ["a"], ["b"], [helper.make_node("Self", ["a"], ["b"], domain="f")], []
        )
        model.functions.append(function)
        model.opset_import.add(domain="f", version=1)
        if nodes:
            _, node = rng.choice(nodes)
            node.op_type, node.domain = "Self", "f"
        return "function"
    if choice == 11 and nodes:
        graph, node = rng.choice(nodes)
        graph.node.remove(node)
        return "drop-node"
    if choice == 12:
        model.graph.input.extend(model.graph.input[:1])  # an input declared twice
        model.graph.output.append(onnx.ValueInfoProto(name=rng.choice(("never_written", ""))))
        return "interface"
    del model.graph.node[:]
    return "no-nodes"


def make_mutants(sources: Sequence[Source], count: int, seed: int) -> Iterator[Mutant]:
    """``count`` mutants of ``sources``, deterministic for ``seed``."""
    rng = random.Random(seed)
    parsed: dict[int, onnx.ModelProto] = {}
    for number in range(count):
        index = number % len(sources)
        source = sources[index]
        if index not in parsed:
            parsed[index] = onnx.ModelProto.FromString(source.data)
        family = rng.randrange(10)
        external = source.external
        if family < 5:
            model = onnx.ModelProto()
            model.CopyFrom(parsed[index])
            how = _structural(rng, model)
            data = model.SerializeToString()
        elif family < 7:
            how = "bad-utf8"
            data = _bad_string(rng, source.data, parsed[index])
        elif family < 8 and external:
            how = "external-bytes"
            name, content = external[0]
            external = ((name, truncate(rng, content)), *external[1:])
            data = source.data
        else:
            how, fn = rng.choice(BYTE_MUTATIONS)
            data = fn(rng, source.data)
        yield Mutant(index, how, data, external)


# -- running ---------------------------------------------------------------------------------


def _call(step: str, fn: Callable[[], object]) -> Outcome | None:
    """Run one step: ``None`` when it passes, else a refusal or a bug."""
    try:
        fn()
    except GraphToolsError as exc:
        cause = exc.__cause__
        if isinstance(exc, PassError) and not isinstance(cause, GraphToolsError | None):
            detail = "".join(traceback.format_exception(cause, limit=-4))
            return Outcome("bug", step, f"{type(exc).__name__} wrapping:\n{detail}")
        return Outcome("refused", step, f"{type(exc).__name__}: {exc}")
    except RecursionError as exc:
        return Outcome("bug", step, f"RecursionError: {str(exc)[:200]}")
    except Exception as exc:  # the finding this script looks for
        detail = "".join(traceback.format_exception(exc, limit=-4))
        return Outcome("bug", step, detail)
    return None


def exercise_api(path: Path) -> Outcome:
    """Load, print, verify, run the default pipeline, write and read back through the codec."""
    models = []
    found = _call("load", lambda: models.append(load_onnx_model(path)))
    if found is not None:
        return found
    model = models[0]
    written: list[bytes] = []
    steps: tuple[tuple[str, Callable[[], object]], ...] = (
        ("print", lambda: print_model(model)),
        ("verify", lambda: verify(model)),
        ("pipeline", lambda: PassManager.parse("default")(model)),
        ("write", lambda: written.append(model_to_onnx_bytes(model))),
        ("reload", lambda: model_from_onnx_bytes(written[0], path)),
    )
    refusal: Outcome | None = None
    for step, fn in steps:
        if step == "reload" and not written:
            break
        found = _call(step, fn)
        if found is not None and found.kind == "bug":
            return found
        if found is not None and step == "reload":  # graphtools refused what it wrote
            return Outcome("bug", step, found.detail)
        refusal = refusal or found
    return refusal or Outcome("ok", "all", "")


def _cli(argv: list[str]) -> tuple[int | None, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli_main(argv)
    except BaseException as exc:
        return None, "", "".join(traceback.format_exception(exc, limit=-4))
    return code, stdout.getvalue(), stderr.getvalue()


def checker_rejects(path: Path) -> str | None:
    """What onnx's checker (full check) says against a file, or ``None``; run in a child
    process, as the CLI runs it, since its shape inference crashes on some mutants."""
    return checker_problem(path)


def exercise_cli(path: Path, out_dir: Path, counts: Counter[str]) -> Outcome:
    """``show``, ``run -p default -o`` and ``verify -p default``: exit 0 or 2 (verify: 1
    too) with one error line, never an exception; a written file passes the checker unless
    the input failed it too."""
    target = out_dir / "out.onnx"
    calls = (
        ["show", str(path)],
        ["run", str(path), "-p", "default", "-o", str(target)],
        ["verify", str(path), "-p", "default"],
    )
    for argv in calls:
        code, _, err = _cli(argv)
        counts[f"{argv[0]} exit {code}"] += 1
        if code is None:
            return Outcome("bug", argv[0], err)
        if code not in ((0, 1, 2) if argv[0] == "verify" else (0, 2)):
            return Outcome("bug", argv[0], f"exit {code}: {err[-500:]}")
        if code == 2 and len(err.strip().splitlines()) != 1:
            return Outcome("bug", argv[0], f"not one error line:\n{err[-800:]}")
        if argv[0] == "run" and code == 0:
            rejected = checker_rejects(target)
            if rejected is not None:
                input_rejected = checker_rejects(path)
                if input_rejected is None:
                    return Outcome("bug", "checker", f"the output fails: {rejected}")
                if "warning: onnx's checker rejects" not in err:
                    return Outcome("bug", "checker", "the input fails the checker, unsaid")
    return Outcome("ok", "cli", "")


def run_campaign(
    sources: Sequence[Source], mutants: int, seed: int, work: Path
) -> tuple[Counter[str], list[tuple[Mutant, Outcome]]]:
    """Put ``mutants`` mutants through the API and the CLI; outcome counts and the bugs."""
    counts: Counter[str] = Counter()
    bugs: list[tuple[Mutant, Outcome]] = []
    for number, mutant in enumerate(make_mutants(sources, mutants, seed)):
        case = work / f"m{number}"
        case.mkdir()
        path = case / "model.onnx"
        path.write_bytes(mutant.data)
        for name, content in mutant.external:
            (case / name).write_bytes(content)
        api = exercise_api(path)
        counts[f"api {api.kind}"] += 1
        if api.kind == "refused":
            counts[f"refused at {api.step}"] += 1
        outcome = api if api.kind == "bug" else exercise_cli(path, case / "out", counts)
        counts[f"cli {outcome.kind}"] += 1
        if outcome.kind == "bug":
            bugs.append((mutant, outcome))
        counts[f"mutant {mutant.how}"] += 1
    return counts, bugs


def node_case_sources(folder: Path, stride: int = 1) -> list[Source]:
    """The backend node cases (every ``stride``-th), generated into ``folder``."""
    sys.path.insert(0, str(REPO / "tests"))
    from onnx_testdata import write_node_cases

    return [Source(c.name, c.path.read_bytes()) for c in write_node_cases(folder)[::stride]]


def corpus_sources(folder: Path) -> list[Source]:
    """The PyTorch corpus (needs the ``torch`` extra), exported into ``folder``."""
    sys.path.insert(0, str(REPO / "tests"))
    from onnx_corpus import build_corpus

    return [file_source(m.path) for m in build_corpus(folder)]


def file_source(path: Path) -> Source:
    """A model file and the external data files beside it that it names."""
    data = path.read_bytes()
    model = onnx.load(str(path), load_external_data=False)
    names = {
        {e.key: e.value for e in t.external_data}.get("location", "")
        for g in _graphs(model.graph)
        for t in g.initializer
        if t.data_location == TensorProto.EXTERNAL
    }
    external = tuple((n, (path.parent / n).read_bytes()) for n in sorted(names) if n)
    return Source(path.stem, data, external)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mutants", type=int, default=3000, help="mutants (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-corpus", action="store_true", help="node cases only (no torch)")
    parser.add_argument("--stride", type=int, default=4, help="every Nth node case (default 4)")
    parser.add_argument(
        "--corpus-dir", type=Path, help="a folder keeping the exported corpus between runs"
    )
    options = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        sources = node_case_sources(Path(tmp) / "cases", options.stride)
        if not options.no_corpus:
            sources += corpus_sources(options.corpus_dir or Path(tmp) / "corpus")
        made = time.perf_counter()
        work = Path(tmp) / "work"
        work.mkdir()
        counts, bugs = run_campaign(sources, options.mutants, options.seed, work)
    seconds = time.perf_counter() - made
    print(
        f"{options.mutants} mutants of {len(sources)} models, seed {options.seed}: "
        f"{seconds:.0f}s (sources made in {made - start:.0f}s)"
    )
    for key in sorted(counts):
        print(f"  {key:32} {counts[key]}")
    by_step = Counter(f"{m.how} -> {o.step}" for m, o in bugs)
    for key, value in by_step.most_common():
        print(f"  bug: {key} x{value}")
    for mutant, outcome in bugs[:5]:
        print(f"\n--- source {sources[mutant.source].name} {mutant.how} at {outcome.step}")
        print(outcome.detail)
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
