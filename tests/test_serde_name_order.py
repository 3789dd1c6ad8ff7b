"""A loaded pair names each blob with one string, not one per occurrence (``ir.NameOrder``):
the init_net's fills and declared outputs, the predict_net's declared inputs and the ops
reading them share the parameter's string, a layer's input is its producer's output string;
names out of order load as equal copies, and saving is byte for byte either way."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

from graphtools.ir import Model, Net, Op
from graphtools.serde import load_model, save_model

_SYNTH_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth.py"
_spec = importlib.util.spec_from_file_location("synth", _SYNTH_PATH)
assert _spec is not None and _spec.loader is not None
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.pb"))}


def test_a_loaded_pair_names_each_parameter_and_chained_value_with_one_string(
    tmp_path: Path,
) -> None:
    synth.write_pair(*synth.make_synthetic_pair(3000, seed=3), tmp_path / "pair")
    model = load_model(tmp_path / "pair")
    init, predict = model.init_net, model.predict_net
    assert init is not None
    string_of = {name: name for name in init.external_outputs}
    fills = [op.outputs[0] for op in init]
    assert all(name is string_of[name] for name in fills)  # fills share the declared list
    declared = [name for name in predict.external_inputs if name in string_of]
    assert declared and all(name is string_of[name] for name in declared)
    reads = [name for op in predict for name in op.inputs if name in string_of]
    assert len(reads) > 1000 and all(name is string_of[name] for name in reads)
    chained = [
        (op.inputs[0], before.outputs[0])
        for before, op in zip(predict, list(predict)[1:], strict=False)
        if op.inputs and before.outputs and op.inputs[0] == before.outputs[0]
    ]
    assert len(chained) > 1000 and all(a is b for a, b in chained)
    save_model(model, tmp_path / "out")
    assert _files(tmp_path / "out") == _files(tmp_path / "pair")


def test_names_out_of_order_load_as_equal_copies(tmp_path: Path) -> None:
    """A pair whose predict_net declares and reads its parameters in another order than the
    init_net fills them (shuffled): every name loads equal to what was saved."""
    rng = random.Random(5)
    params = [f"w{i}" for i in range(200)]
    init = Net(
        [Op("ConstantFill", [], [p], args={"shape": [1], "value": 1.0}) for p in params],
        external_outputs=params,
    )
    shuffled = params[:]
    rng.shuffle(shuffled)
    ops = [
        Op("Add", ["x" if i == 0 else f"h{i - 1}", p], [f"h{i}"]) for i, p in enumerate(shuffled)
    ]
    predict = Net(ops, ["x", *reversed(params)], [f"h{len(params) - 1}"])
    save_model(Model(predict, init), tmp_path / "pair")
    loaded = load_model(tmp_path / "pair")
    assert list(loaded.predict_net) == ops and list(loaded.init_net) == list(init)
    assert loaded.predict_net.external_inputs == ("x", *reversed(params))
    save_model(loaded, tmp_path / "out")
    assert _files(tmp_path / "out") == _files(tmp_path / "pair")
