"""Hostile-input fuzzing: mutated real NetDefs through the Python API and the CLI.

Every mutant must either load and survive ``print_model``, the SSA table, ``verify``, the default
pipeline and a save + reload (which must then load, and print the same), or be refused with a
``GraphToolsError``. Anything else (an untyped exception, also one a ``GraphToolsError`` wraps,
such as a pass failing with a ``TypeError``; a saved file graphtools refuses to load again; a
reload that prints differently) is a finding. Through the CLI, ``show``, ``ssa`` and
``run -o`` must exit 0 or 2 without raising.

Mutants are made deterministically from a seed: byte flips, truncations, splices and deletions of
the file; strings made invalid UTF-8 in place (any string of the net: blob, op type, argument and
net names, externals, nested nets); nets wrapped in ``If`` ops up to 40 deep; step nets given as
text (valid, broken, not UTF-8, nested); odd argument values, devices, control inputs, unknown
fields and required fields left out. Text sources get text mutants (broken syntax, escapes that
are not UTF-8, deep nesting), binary sources binary ones.

    python benchmarks/fuzz_nets.py                    # 5,000 API mutants, 500 CLI calls
    python benchmarks/fuzz_nets.py --mutants 200 --cli 30 --seed 7

``tests/test_fuzz.py`` runs a short version of the same campaign in the suite.
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

from google.protobuf import text_format

from graphtools.cli import main as cli_main
from graphtools.errors import GraphToolsError, PassError
from graphtools.ir import Model
from graphtools.pass_infra import PassManager
from graphtools.printer import print_model, print_ssa_table
from graphtools.proto import caffe2_pb2
from graphtools.serde import load_model, load_model_dir, parse_netdef, save_model
from graphtools.wellformed import verify

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from byte_mutations import BYTE_MUTATIONS, flip  # noqa: E402

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures-real"

SOURCES: tuple[tuple[str, str | None], ...] = (
    ("facebookarchive-AICamera/squeeze_predict_net.pb", None),
    ("KleinYuan-Caffe2-iOS/tinyYoloPredict.pb", None),
    ("gredx-caffe2-maskrcnn-qt/mask_rcnn_2go_fp32_model.pb", None),
    (
        "breadbread1984-Caffe2-C-LSTM-demo/deploy_models/lstm_predict_net.pbtxt",
        "breadbread1984-Caffe2-C-LSTM-demo/deploy_models/lstm_init_net.pbtxt",
    ),
    (
        "breadbread1984-Caffe2-C-demo/deploy_models/mnist_predict_net.pbtxt",
        "breadbread1984-Caffe2-C-demo/deploy_models/mnist_init_net.pbtxt",
    ),
    ("glow/caffe2Models/fc_4d_predict_net.pbtxt", "glow/caffe2Models/fc_4d_init_net.pbtxt"),
    (
        "glow/caffe2Models/int8sumrelu_pred_net.pbtxt",
        "glow/caffe2Models/int8sumrelu_init_net.pbtxt",
    ),
    ("caffe2-models/bvlc_alexnet/predict_net.pbtxt", None),
)
"""Real pairs (predict_net, init_net) under ``fixtures-real``: binary and text, an If-holding
detection net, a RecurrentNetwork with its step nets given as text, int8 nets."""

_BAD_UTF8 = (b"\xff", b"\xfe", b"\xe1x", b"\xc0\xaf", b"\xed\xa0\x80", b"\x80")


@dataclass(frozen=True)
class Mutant:
    """One mutated file of a pair: which source, which file, how, and the bytes."""

    source: int
    which: str  # "predict" or "init"
    how: str
    data: bytes


@dataclass(frozen=True)
class Outcome:
    """What a mutant did: ``ok``, ``refused`` (a ``GraphToolsError``) or ``bug``."""

    kind: str
    step: str
    detail: str


# -- mutations ------------------------------------------------------------------------------


def _is_text(data: bytes) -> bool:
    return bool(data) and parse_netdef(data, allow_empty=True)[1]


def _strings_of(net: caffe2_pb2.NetDef) -> Iterator[str]:
    yield from (net.name, net.type)
    yield from net.external_input
    yield from net.external_output
    for op in net.op:
        yield from (op.type, op.name, op.engine)
        yield from op.input
        yield from op.output
        for arg in op.arg:
            yield arg.name
            for nested in ([arg.n] if arg.HasField("n") else []) + list(arg.nets):
                yield from _strings_of(nested)


def _bad_string(rng: random.Random, data: bytes, net: caffe2_pb2.NetDef) -> bytes:
    """One occurrence of one of the net's strings made invalid UTF-8, same length."""
    names = sorted({s for s in _strings_of(net) if s and isinstance(s, str)})
    if not names:
        return flip(rng, data)
    name = rng.choice(names).encode()
    starts = [i for i in range(len(data)) if data.startswith(name, i)][:200]
    if not starts:
        return flip(rng, data)
    at = rng.choice(starts) + rng.randrange(len(name))
    bad = rng.choice(_BAD_UTF8)[:1]
    return data[:at] + bad + data[at + 1 :]


def _wrap_in_ifs(net: caffe2_pb2.NetDef, depth: int) -> caffe2_pb2.NetDef:
    inner = net
    for level in range(depth):
        outer = caffe2_pb2.NetDef()
        outer.name = f"wrap{level}"
        outer.external_input.extend(net.external_input)
        outer.external_output.extend(net.external_output)
        op = outer.op.add()
        op.type = "If"
        op.input.append(net.external_input[0] if net.external_input else "cond")
        op.output.extend(net.external_output)
        arg = op.arg.add()
        arg.name = "then_net"
        arg.n.CopyFrom(inner)
        inner = outer
    return inner


def _step_net_text(rng: random.Random) -> bytes:
    choice = rng.randrange(5)
    if choice == 0:
        return b'name: "step" op { input: "x" output: "y" type: "Relu" } external_input: "x"'
    if choice == 1:
        return b'op { input: "x" output: "y" type: "Relu" '  # does not parse
    if choice == 2:
        return b'op { input: "\xff" output: "y" type: "Relu" }'  # not UTF-8
    if choice == 3:
        depth = rng.randint(10, 30)
        inner = 'op { type: "Relu" input: "x" output: "x" }'
        for _ in range(depth):
            inner = f'op {{ type: "If" input: "c" arg {{ name: "then_net" n {{ {inner} }} }} }}'
        return inner.encode()
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))


def _structural(rng: random.Random, net: caffe2_pb2.NetDef) -> tuple[str, caffe2_pb2.NetDef]:
    """A random edit through the message API; returns its name and the edited copy."""
    out = caffe2_pb2.NetDef()
    out.CopyFrom(net)
    ops = out.op
    choice = rng.randrange(16)
    if choice == 0:
        return "nest", _wrap_in_ifs(out, rng.choice((1, 2, 5, 15, 16, 17, 20, 34, 40)))
    if choice == 1 and ops:
        op = rng.choice(ops)
        if rng.random() < 0.7:
            op.type = "RecurrentNetwork"
        arg = op.arg.add()
        arg.name = rng.choice(("step_net", "backward_step_net"))
        arg.s = _step_net_text(rng)
        return "step-net", out
    if choice == 2 and ops:
        op = rng.choice(ops)
        if op.input:
            del op.input[rng.randrange(len(op.input))]
        return "drop-input", out
    if choice == 3 and ops:
        op = rng.choice(ops)
        if op.output:
            del op.output[rng.randrange(len(op.output))]
        return "drop-output", out
    if choice == 4 and len(ops) > 1:
        i, j = rng.sample(range(len(ops)), 2)
        a, b = caffe2_pb2.OperatorDef(), caffe2_pb2.OperatorDef()
        a.CopyFrom(ops[i])
        b.CopyFrom(ops[j])
        ops[i].CopyFrom(b)
        ops[j].CopyFrom(a)
        return "swap-ops", out
    if choice == 5 and ops:
        op = rng.choice(ops)
        op.type = rng.choice(
            (
                "",
                "If",
                "While",
                "Do",
                "RecurrentNetwork",
                "Reshape",
                "Copy",
                "NoSuchOp",
                ops[0].type,
            )
        )
        return "retype", out
    if choice == 6 and ops:
        op = rng.choice(ops)
        arg = op.arg.add()
        arg.name = rng.choice(("axis", "order", "shape", "kernel", "", "pads", "broadcast"))
        kind = rng.randrange(6)
        if kind == 0:
            arg.i = rng.choice((2**63 - 1, -(2**63), -1, 0, 10**12))
        elif kind == 1:
            arg.f = rng.choice((float("nan"), float("inf"), -0.0, 1e38))
        elif kind == 2:
            arg.ints.extend(rng.choice(([], [-1], [0, 0, 0], [2**62, -5])))
        elif kind == 3:
            arg.s = rng.choice((b"", b"\xff\xfe", b"NCHW", b"x" * 300))
        elif kind == 4:
            arg.strings.extend((b"\xff", b""))
        else:
            arg.qtensors.add()  # required fields left out
        return "odd-arg", out
    if choice == 7 and ops:
        op = rng.choice(ops)
        op.device_option.device_type = rng.choice((-1, 1, 6, 999, 2**31 - 1))
        op.device_option.device_id = rng.choice((-5, 0, 7))
        op.device_option.extra_info.append("x")
        return "device", out
    if choice == 8 and ops:
        rng.choice(ops).control_input.append(
            rng.choice(("nowhere", ops[0].output[0] if ops[0].output else "x"))
        )
        return "control-input", out
    if choice == 9:
        out.external_output.append(rng.choice(("never_written", "")))
        return "bad-external-output", out
    if choice == 10:
        del out.external_input[:]
        return "no-external-inputs", out
    if choice == 11 and ops:
        extra = ops.add()
        extra.CopyFrom(rng.choice(ops))
        return "duplicate-op", out
    if choice == 12 and ops:
        op = rng.choice(ops)
        if op.input and op.output:
            op.input.append(op.output[0])  # reads its own output
        return "self-loop", out
    if choice == 13:
        info = out.partition_info.add()  # required name left out
        info.device_id.append(3)
        return "partition-info", out
    if choice == 14 and ops:
        op = rng.choice(ops)
        arg = op.arg.add()
        arg.name = rng.choice(("then_net", "else_net", "net", "loop_net", "cond_net"))
        nested = arg.nets.add() if rng.random() < 0.5 else arg.n
        nested.CopyFrom(_wrap_in_ifs(net, rng.randint(0, 3)))
        return "nested-net", out
    del out.op[:]
    return "no-ops", out


def _text_mutation(rng: random.Random, text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True) or [""]
    choice = rng.randrange(6)
    at = rng.randrange(len(lines))
    if choice == 0:
        return "text-drop-line", "".join(lines[:at] + lines[at + 1 :])
    if choice == 1:
        return "text-dup-line", "".join(lines[: at + 1] + lines[at:])
    if choice == 2:
        quotes = [i for i, c in enumerate(text) if c == '"']
        if quotes:
            i = rng.choice(quotes) + 1
            return "text-bad-escape", text[:i] + rng.choice(
                ("\\377", "\\xff", "\\300\\257", "\\u0000")
            ) + text[i:]
    if choice == 3:
        depth = rng.randint(10, 200)
        nested = 'op { type: "Relu" input: "x" output: "x" }'
        for _ in range(depth):
            nested = f'op {{ type: "If" input: "c" arg {{ name: "then_net" n {{ {nested} }} }} }}'
        return "text-deep", text + "\n" + nested + "\n"
    if choice == 4:
        return "text-brace", text[: rng.randrange(max(1, len(text)))] + rng.choice(
            ("{", "}", ":", '"')
        )
    return "text-number", text.replace("i: ", f"i: {rng.choice(('-', '9' * 30, '0x'))}", 1)


def make_mutants(
    sources: Sequence[tuple[bytes, bytes | None]], count: int, seed: int
) -> Iterator[Mutant]:
    """``count`` mutants of the ``(predict, init)`` byte pairs, deterministic for ``seed``."""
    rng = random.Random(seed)
    parsed: dict[bytes, tuple[caffe2_pb2.NetDef, bool]] = {}
    for number in range(count):
        source = number % len(sources)
        which = "init" if sources[source][1] is not None and rng.random() < 0.2 else "predict"
        data = sources[source][1] if which == "init" else sources[source][0]
        assert data is not None
        if data not in parsed:
            parsed[data] = parse_netdef(data, allow_empty=True)
        net, text = parsed[data]
        family = rng.randrange(10)
        if family < 3:
            how, edited = _structural(rng, net)
            if text and rng.random() < 0.7:
                out = text_format.MessageToString(edited).encode()
            else:
                out = edited.SerializePartialToString()
        elif family < 5:
            how = "bad-utf8"
            out = _bad_string(rng, net.SerializePartialToString() if text else data, net)
        elif family < 7 and text:
            how, changed = _text_mutation(rng, data.decode())
            out = changed.encode()
        else:
            how, fn = rng.choice(BYTE_MUTATIONS)
            out = fn(rng, data)
        yield Mutant(source, which, how, out)


# -- running --------------------------------------------------------------------------------


def _call(step: str, fn: Callable[[], object]) -> Outcome | None:
    """Run one step: ``None`` when it passes, else a refusal or a bug."""
    try:
        fn()
    except GraphToolsError as exc:
        cause = exc.__cause__
        if isinstance(exc, PassError) and not isinstance(cause, GraphToolsError | None):
            # the manager wraps whatever a pass raised: an untyped error there is a bug
            detail = "".join(traceback.format_exception(cause, limit=-4))
            return Outcome("bug", step, f"{type(exc).__name__} wrapping:\n{detail}")
        return Outcome("refused", step, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # the finding this script looks for
        detail = "".join(traceback.format_exception(exc, limit=-4))
        return Outcome("bug", step, detail)
    return None


def exercise(predict: Path, init: Path | None, out_dir: Path) -> Outcome:
    """Load a pair and put it through everything; the first bug, else a refusal, else ``ok``."""
    models: list[Model] = []
    found = _call("load", lambda: models.append(load_model(predict, init, allow_empty=True)))
    if found is not None:
        return found
    model = models[0]
    steps: tuple[tuple[str, Callable[[], object]], ...] = (
        ("print", lambda: print_model(model)),
        ("ssa", lambda: print_ssa_table(model.predict_net)),
        ("verify", lambda: verify(model)),
        ("pipeline", lambda: PassManager.parse("default")(model)),
        ("save", lambda: save_model(model, out_dir)),
        ("reload", lambda: models.append(load_model_dir(out_dir, allow_empty=True))),
    )
    refusal: Outcome | None = None
    for step, fn in steps:
        found = _call(step, fn)
        if found is not None and (found.kind == "bug" or step == "save"):
            return found
        if found is not None and step == "reload":  # graphtools refused what it wrote
            return Outcome("bug", step, found.detail)
        refusal = refusal or found
    if print_model(models[-1]) != print_model(model):
        return Outcome("bug", "reload", "the reloaded model prints differently")
    return refusal or Outcome("ok", "all", "")


def exercise_cli(predict: Path, init: Path | None, out_dir: Path) -> Outcome:
    """``show``, ``ssa`` and ``run -o`` in-process: exit 0 or 2, never an exception."""
    init_args = ["--init", str(init)] if init is not None else []
    calls = (
        ["show", str(predict)],
        ["ssa", str(predict)],
        ["run", str(predict), *init_args, "-o", str(out_dir)],
    )
    for argv in calls:
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                code = cli_main(argv)
        except BaseException as exc:
            detail = "".join(traceback.format_exception(exc, limit=-4))
            return Outcome("bug", argv[0], detail)
        if code not in (0, 2):
            return Outcome("bug", argv[0], f"exit {code}: {sink.getvalue()[-500:]}")
    return Outcome("ok", "cli", "")


def load_sources(root: Path = REAL) -> list[tuple[bytes, bytes | None]]:
    """The source pairs' bytes (``SOURCES`` under ``root``)."""
    return [
        ((root / predict).read_bytes(), None if init is None else (root / init).read_bytes())
        for predict, init in SOURCES
    ]


def run_campaign(
    sources: Sequence[tuple[bytes, bytes | None]],
    mutants: int,
    cli: int,
    seed: int,
    work: Path,
) -> tuple[Counter[str], list[tuple[Mutant, Outcome]]]:
    """Run ``mutants`` API mutants and ``cli`` CLI mutants; outcome counts and the bugs."""
    counts: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    bugs: list[tuple[Mutant, Outcome]] = []
    suffixes = [
        tuple(".pbtxt" if data is not None and _is_text(data) else ".pb" for data in pair)
        for pair in sources
    ]
    for number, mutant in enumerate(make_mutants(sources, mutants + cli, seed)):
        case = work / f"m{number}"
        case.mkdir()
        predict_data, init_data = sources[mutant.source]
        predict_suffix, init_suffix = suffixes[mutant.source]
        predict = case / f"predict_net{predict_suffix}"
        init = None if init_data is None else case / f"init_net{init_suffix}"
        predict.write_bytes(mutant.data if mutant.which == "predict" else predict_data)
        if init is not None and init_data is not None:
            init.write_bytes(mutant.data if mutant.which == "init" else init_data)
        if number < mutants:
            outcome = exercise(predict, init, case / "out")
            counts[f"api {outcome.kind}"] += 1
        else:
            outcome = exercise_cli(predict, init, case / "cli_out")
            counts[f"cli {outcome.kind}"] += 1
        if outcome.kind == "bug":
            bugs.append((mutant, outcome))
        elif outcome.kind == "refused":
            refusals[f"{outcome.step}: {outcome.detail.split(':')[0]}"] += 1
    counts.update({f"refused at {key}": value for key, value in refusals.items()})
    return counts, bugs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=5000, help="API mutants (default 5000)")
    parser.add_argument("--cli", type=int, default=500, help="CLI mutants (default 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", type=Path, default=REAL, help="the fixtures-real folder")
    options = parser.parse_args(argv)
    sources = load_sources(options.root)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        counts, bugs = run_campaign(sources, options.mutants, options.cli, options.seed, Path(tmp))
    seconds = time.perf_counter() - start
    print(f"{options.mutants} API mutants, {options.cli} CLI mutants, seed {options.seed}")
    print(f"{seconds:.0f}s")
    for key in sorted(counts):
        print(f"  {key:12} {counts[key]}")
    by_step = Counter(f"{m.how} -> {o.step}" for m, o in bugs)
    for key, value in by_step.most_common():
        print(f"  bug: {key} x{value}")
    for mutant, outcome in bugs[:5]:
        print(f"\n--- source {mutant.source} {mutant.which} {mutant.how} at {outcome.step}")
        print(outcome.detail)
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
