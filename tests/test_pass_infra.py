"""PassManager: fixpoint, steps, checks after each pass, rollback, pipeline specs, registry."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import publish_passes

from graphtools._core import CAFFE2, ONNX
from graphtools.errors import (
    GraphToolsError,
    IllegalRewriteError,
    InvalidArgumentError,
    PassError,
    PostconditionError,
    PreconditionError,
    SerdeError,
)
from graphtools.ir import Model, Net, Op
from graphtools.pass_infra import (
    DEFAULT_PIPELINE,
    DEFAULT_PIPELINES,
    NoFixpointWarning,
    Pass,
    PassManager,
    PassRecord,
    PassResult,
    PipelineSpecError,
    available_passes,
    register_pass,
)
from graphtools.passes import FuseCopyOps
from graphtools.serde.codec import net_from_netdef, net_to_netdef

# -- toy passes ---------------------------------------------------------------------------------


@register_pass
@dataclass(frozen=True)
class PeelOne(Pass):
    """Removes the first op of type ``op_type`` per call: progress once per occurrence."""

    name: ClassVar[str] = "test-peel-one"
    op_type: str = "Identity"

    def call(self, model: Model) -> PassResult:
        net = model.predict_net
        for index, op in enumerate(net):
            if op.type == self.op_type:
                net.remove_ops([index])
                return PassResult(model, True, {"peeled": 1})
        return PassResult(model, False, {"peeled": 0})


@register_pass
@dataclass(frozen=True)
class Options(Pass):
    """Does nothing; exists for its option types."""

    name: ClassVar[str] = "test-options"
    count: int = 1
    ratio: float = 0.5
    flag: bool = False
    label: str = "x"
    types: tuple[str, ...] = ()

    def call(self, model: Model) -> PassResult:
        return PassResult(model, False)


@dataclass(frozen=True)
class Scripted(Pass):
    """Removes op 0, then misbehaves as told."""

    name: ClassVar[str] = "test-scripted"
    raise_error: BaseException | None = None
    claim_modified: bool = True
    mutate: bool = True
    new_outputs: tuple[str, ...] | None = None
    undefine: bool = False
    fail_requires: bool = False
    fail_ensures: bool = False

    def requires(self, model: Model) -> None:
        if self.fail_requires:
            raise PreconditionError("needs an init_net")

    def call(self, model: Model) -> PassResult:
        net = model.predict_net
        if self.mutate:
            net.remove_ops([0])
        if self.new_outputs is not None:
            net.set_external_outputs(self.new_outputs)
        if self.undefine:
            net.replace_op(0, net[0].replace(inputs=["nowhere"]))
        if self.raise_error is not None:
            raise self.raise_error
        return PassResult(model, self.claim_modified)

    def ensures(self, model: Model) -> None:
        if self.fail_ensures:
            raise PostconditionError("left an Identity behind")


@dataclass(frozen=True)
class Renamer(Scripted):
    name: ClassVar[str] = "test-renamer"
    changes_interface: ClassVar[bool] = True


def _model() -> Model:
    ops = [
        Op("Identity", ["x"], ["unused1"]),
        Op("Relu", ["x"], ["b"]),
        Op("Identity", ["b"], ["unused2"]),
        Op("Sigmoid", ["b"], ["y"]),
    ]
    predict = Net(ops, ["x", "w"], ["y"], name="toy")
    init = Net([Op("GivenTensorFill", [], ["w"], args={"shape": [2]})], name="toy_init")
    return Model(predict, init)


def _bytes(model: Model) -> tuple[bytes, bytes]:
    assert model.init_net is not None
    return (
        net_to_netdef(model.predict_net).SerializeToString(),
        net_to_netdef(model.init_net).SerializeToString(),
    )


# -- fixpoint and steps -------------------------------------------------------------------------


def test_fixpoint_repeats_until_a_round_modifies_nothing() -> None:
    model = _model()
    records = PassManager([PeelOne()])(model)
    assert [(r.name, r.round, r.modified) for r in records] == [
        ("test-peel-one", 1, True),
        ("test-peel-one", 2, True),
        ("test-peel-one", 3, False),
    ]
    assert [(r.ops_before, r.ops_after) for r in records] == [(4, 3), (3, 2), (2, 2)]
    assert [r.stats for r in records] == [{"peeled": 1}, {"peeled": 1}, {"peeled": 0}]
    assert all(isinstance(r, PassRecord) and r.seconds >= 0 for r in records)
    assert [op.type for op in model.predict_net] == ["Relu", "Sigmoid"]


def test_a_round_with_any_modification_runs_again() -> None:
    records = PassManager([PeelOne(), PeelOne(op_type="Nothing")])(_model())
    assert [(r.round, r.modified) for r in records] == [
        (1, True),
        (1, False),
        (2, True),
        (2, False),
        (3, False),
        (3, False),
    ]


@dataclass(frozen=True)
class IdempotentPeel(PeelOne):
    """``PeelOne`` claiming, wrongly, to be idempotent: shows when the manager skips it."""

    idempotent: ClassVar[bool] = True


def test_an_idempotent_pass_is_skipped_while_the_model_is_unchanged_since_it_ran() -> None:
    model = _model()
    records = PassManager([IdempotentPeel()])(model)
    # Round 2 would peel again, but the pass claims one run reaches its fixpoint.
    assert [(r.round, r.modified, r.skipped, r.stats) for r in records] == [
        (1, True, False, {"peeled": 1}),
        (2, False, True, {}),
    ]
    assert records[1].ops_before == records[1].ops_after == 3


def test_an_idempotent_pass_runs_again_after_another_pass_changed_the_model() -> None:
    records = PassManager([IdempotentPeel(), PeelOne()])(_model())
    assert [(r.round, r.modified, r.skipped) for r in records] == [
        (1, True, False),
        (1, True, False),
        (2, False, False),  # the second pass changed the model since: runs again
        (2, False, False),
    ]


@dataclass(frozen=True)
class PeelNaming(PeelOne):
    """``PeelOne`` whose changes may give work only to the passes named in ``enables``."""

    name: ClassVar[str] = "test-peel-naming"
    enables: tuple[str, ...] = ()

    def call(self, model: Model) -> PassResult:
        result = PeelOne.call(self, model)
        return PassResult(model, result.modified, result.stats, frozenset(self.enables))


def test_an_idempotent_pass_stays_skipped_after_changes_that_cannot_give_it_work() -> None:
    # the round that confirms the fixpoint does not rerun what nothing since could re-enable
    records = PassManager([IdempotentPeel(), PeelNaming()])(_model())
    assert [(r.name, r.round, r.modified, r.skipped) for r in records] == [
        ("test-peel-one", 1, True, False),
        ("test-peel-naming", 1, True, False),
        ("test-peel-one", 2, False, True),
        ("test-peel-naming", 2, False, False),
    ]
    named = PassManager([IdempotentPeel(), PeelNaming(enables=("test-peel-one",))])
    records = named(_model())
    assert [(r.round, r.skipped) for r in records] == [
        (1, False),
        (1, False),
        (2, False),
        (2, False),
    ]


def test_steps_limits_the_rounds() -> None:
    """The last round still changed the model: a warning says so in Python too (only the
    CLI said it, and a Python user took the model for converged)."""
    model = _model()
    with pytest.warns(NoFixpointWarning, match="did not reach a fixpoint in 1 rounds"):
        records = PassManager([PeelOne()], steps=1)(model)
    assert [r.round for r in records] == [1]
    assert [op.type for op in model.predict_net] == ["Relu", "Identity", "Sigmoid"]


def test_steps_must_be_positive_and_passes_instances() -> None:
    with pytest.raises(PipelineSpecError, match="steps"):
        PassManager([PeelOne()], steps=0)
    with pytest.raises(PipelineSpecError, match="instantiate"):
        PassManager([PeelOne])  # type: ignore[list-item]


# -- checks and rollback ------------------------------------------------------------------------


def _fails(manager: PassManager, model: Model) -> PassError:
    before = _bytes(model)
    revision = model.revision
    with pytest.raises(PassError) as info:
        manager(model)
    assert _bytes(model) == before
    assert model.revision == revision
    return info.value


def test_exception_in_pass_rolls_back_and_names_previous_passes() -> None:
    model = _model()
    PeelOne().call(model)
    expected = _bytes(model)
    model = _model()
    with pytest.raises(PassError) as info:
        PassManager([PeelOne(), Scripted(raise_error=RuntimeError("boom"))], steps=1)(model)
    error = info.value
    assert error.pass_name == "test-scripted"
    assert error.previous == ["test-peel-one"]
    assert "pass 'test-scripted' failed (after test-peel-one): RuntimeError: boom" in str(error)
    assert isinstance(error.__cause__, RuntimeError)
    assert any("rolled back" in note for note in error.__notes__)
    # The earlier pass's work stays: only the failing pass is undone.
    assert _bytes(model) == expected


def test_graphtools_errors_are_wrapped_with_their_cause() -> None:
    cause = IllegalRewriteError("op 3 (Relu): blob 'b'@1 has other consumers")
    error = _fails(PassManager([Scripted(raise_error=cause)]), _model())
    assert error.__cause__ is cause
    assert "has other consumers" in str(error)


def test_requires_and_ensures_failures() -> None:
    error = _fails(PassManager([Scripted(fail_requires=True)]), _model())
    assert isinstance(error.__cause__, PreconditionError)
    error = _fails(PassManager([Scripted(fail_ensures=True)]), _model())
    assert isinstance(error.__cause__, PostconditionError)


@pytest.mark.parametrize(
    ("claim", "mutate", "word"), [(False, True, "changed"), (True, False, "did not change")]
)
def test_lying_about_modified_fails(claim: bool, mutate: bool, word: str) -> None:
    error = _fails(PassManager([Scripted(claim_modified=claim, mutate=mutate)]), _model())
    assert f"reported modified={claim} but the model {word}" in str(error)
    assert "(" not in str(error)  # no revision tuples or object ids


def test_non_pass_result_fails() -> None:
    @dataclass(frozen=True)
    class ReturnsNone(Pass):
        name: ClassVar[str] = "test-returns-none"

        def call(self, model: Model) -> PassResult:
            return None  # type: ignore[return-value]

    error = _fails(PassManager([ReturnsNone()]), _model())
    assert "must return a PassResult" in str(error)


def test_new_verify_finding_fails_and_is_named() -> None:
    error = _fails(PassManager([Scripted(undefine=True)]), _model())
    assert "verify found a new problem" in str(error)
    assert "reads 'nowhere'" in str(error)
    assert any("new verify findings" in note for note in error.__notes__)


def test_a_finding_made_mid_round_is_pinned_on_its_pass_and_rolled_back_to_before_it() -> None:
    # verify runs once per round; a failing round is replayed pass by pass to find the culprit.
    model = _model()
    with pytest.raises(PassError) as info:
        PassManager([PeelOne(), Scripted(undefine=True), PeelOne()])(model)
    error = info.value
    assert error.pass_name == "test-scripted"
    assert error.previous == ["test-peel-one"]
    assert "reads 'nowhere'" in str(error)
    # The first pass's rewrite stands; the culprit's is undone.
    assert [op.type for op in model.predict_net] == ["Relu", "Identity", "Sigmoid"]


def test_a_pass_crashing_on_what_an_earlier_pass_broke_is_not_blamed() -> None:
    @dataclass(frozen=True)
    class CrashesOnUndefined(Pass):
        name: ClassVar[str] = "test-crashes-on-undefined"

        def call(self, model: Model) -> PassResult:
            if any("nowhere" in op.inputs for op in model.predict_net):
                raise RuntimeError("cannot handle an undefined input")
            return PassResult(model, False)

    error = _fails(PassManager([Scripted(undefine=True), CrashesOnUndefined()]), _model())
    assert error.pass_name == "test-scripted"
    assert "verify found a new problem" in str(error)


def test_verify_runs_once_per_round_that_changed_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphtools.pass_infra import manager as pass_infra

    calls = []
    real_verify = pass_infra.verify
    monkeypatch.setattr(pass_infra, "verify", lambda model: calls.append(1) or real_verify(model))
    records = PassManager([PeelOne(), PeelOne(op_type="Nothing"), PeelOne()])(_model())
    assert [r.round for r in records] == [1, 1, 1, 2, 2, 2]
    # After round 1 only: round 2 changed nothing, and the result has no finding, so the
    # model as given need not be checked to know that none is new.
    assert len(calls) == 1


def test_findings_present_before_the_pass_are_tolerated(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphtools.pass_infra import findings, manager

    checked: list[int] = []
    real_verify = manager.verify
    for module in (manager, findings):
        monkeypatch.setattr(
            module,
            "verify",
            lambda model: checked.append(len(model.predict_net)) or real_verify(model),
        )
    model = _model()
    model.predict_net.replace_op(3, Op("Add", ["b", "undeclared"], ["y"]))
    size = len(model.predict_net)
    records = PassManager([PeelOne()])(model)
    assert records[-1].modified is False
    # The result has the finding: the model as given (its ops, before any pass) is checked
    # then, once, to see that it had it too.
    assert checked.count(size) == 1


def test_interface_guard() -> None:
    error = _fails(PassManager([Scripted(new_outputs=("b",))]), _model())
    assert "external inputs or outputs" in str(error)
    assert any("external outputs: ['y'] -> ['b']" in note for note in error.__notes__)
    model = _model()
    PassManager([Renamer(new_outputs=("b",))], steps=1)(model)
    assert model.predict_net.external_outputs == ("b",)


def test_keyboard_interrupt_restores_and_propagates() -> None:
    model = _model()
    before = _bytes(model)
    with pytest.raises(KeyboardInterrupt):
        PassManager([Scripted(raise_error=KeyboardInterrupt())])(model)
    assert _bytes(model) == before


# -- pipeline specs -----------------------------------------------------------------------------


def test_parse_converts_options_by_field_type() -> None:
    manager = PassManager.parse(
        "test-peel-one, test-options{count=3, ratio=0.25, flag=true, label=hi, types=A;B}",
        steps=4,
    )
    assert manager.steps == 4
    assert manager.passes == (
        PeelOne(),
        Options(count=3, ratio=0.25, flag=True, label="hi", types=("A", "B")),
    )
    assert str(manager) == manager.spec
    assert (
        manager.spec
        == "test-peel-one,test-options{count=3,ratio=0.25,flag=true,label=hi,types=A;B}"
    )


@pytest.mark.parametrize(("text", "value"), [("1", True), ("0", False), ("FALSE", False)])
def test_bool_spellings(text: str, value: bool) -> None:
    assert PassManager.parse(f"test-options{{flag={text}}}").passes[0] == Options(flag=value)


def test_quoted_values_hold_special_characters() -> None:
    manager = PassManager.parse(r'test-options{label="a,b{c}=d \"q\"",types="X;Y"}')
    assert manager.passes == (Options(label='a,b{c}=d "q"', types=("X", "Y")),)


def test_an_unquoted_value_holds_commas_and_balanced_braces_up_to_the_next_option() -> None:
    # As in-branches{pipeline=remove-dead-ends{keep_side_effects=false},fold-constants}.
    manager = PassManager.parse("test-options{label=a{k=1,j=2},b, count=3},test-peel-one")
    assert manager.passes == (Options(label="a{k=1,j=2},b", count=3), PeelOne())
    assert PassManager.parse(manager.spec).passes == manager.passes
    nested = PassManager.parse("in-branches{pipeline=remove-dead-ends,fold-constants}")
    assert nested.passes[0].pipeline == "remove-dead-ends,fold-constants"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "options",
    [
        Options(),
        Options(label='with space, comma {} = "quote" \\ back', count=-2, ratio=1e-9),
        Options(label="", types=()),
        Options(types=("Print", "Save"), flag=True),
    ],
)
def test_spec_round_trips(options: Options) -> None:
    manager = PassManager([options, PeelOne(op_type="Relu")])
    assert PassManager.parse(manager.spec).passes == manager.passes


def test_default_expands_inside_a_larger_spec_for_the_models_dialect() -> None:
    manager = PassManager.parse("test-peel-one,default,test-options")
    for dialect, pipeline in DEFAULT_PIPELINES.items():
        expected = PassManager.parse(f"test-peel-one,{pipeline},test-options")
        assert manager.passes_for(dialect) == expected.passes
    assert [p.name for p in PassManager.parse("default").passes_for(CAFFE2)] == (
        DEFAULT_PIPELINE.split(",")
    )
    assert PassManager.parse("default").spec == "default"


def test_default_runs_the_pipeline_of_the_models_dialect() -> None:
    records = PassManager.parse("default")(_model())
    assert [r.name for r in records[:4]] == DEFAULT_PIPELINES[CAFFE2].split(",")
    onnx_model = Model(Net([Op("Identity", ["x"], ["y"])], ["x"], ["y"], dialect=ONNX))
    records = PassManager.parse("default")(onnx_model)
    assert [r.name for r in records[:3]] == DEFAULT_PIPELINES[ONNX].split(",")


def test_a_pass_refuses_a_model_of_another_dialect_by_name() -> None:
    onnx_model = Model(Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"], dialect=ONNX))
    with pytest.raises(PreconditionError, match=r"fuse-copy-ops.*caffe2.*onnx model"):
        FuseCopyOps()(onnx_model)
    with pytest.raises(PassError, match="fuse-copy-ops"):
        PassManager.parse("fuse-copy-ops")(onnx_model)


def test_a_misspelt_pass_or_pipeline_gets_a_suggestion() -> None:
    for spec, meant in [
        ("optimise", "optimize"),
        ("fuse_batchnorm", "fuse-batchnorm"),
        ("remove-dead-end", "remove-dead-ends"),
    ]:
        with pytest.raises(PipelineSpecError) as info:
            PassManager.parse(spec)
        assert f"unknown pass {spec!r} in pipeline spec {spec!r} (did you mean {meant!r}?)" in (
            str(info.value)
        )
    with pytest.raises(PipelineSpecError) as info:
        PassManager.parse("zzzz")
    assert "did you mean" not in str(info.value) and "'optimize'" in str(info.value)


def test_a_pass_without_its_required_option_says_how_to_give_it() -> None:
    """Not the dataclass's TypeError ("__init__() missing 1 required positional argument")."""
    with pytest.raises(PipelineSpecError) as info:
        PassManager.parse("convert-opset")
    assert str(info.value) == (
        "pass 'convert-opset' needs a value for opset: write convert-opset{opset=...} "
        "('graphtools list-passes convert-opset' describes its options)"
    )
    assert PassManager.parse("convert-opset{opset=17}").spec == "convert-opset{opset=17}"


def test_empty_spec_is_an_empty_pipeline() -> None:
    model = _model()
    assert PassManager.parse("").passes == ()
    assert PassManager.parse("")(model) == []


def test_unknown_pass_lists_known_ones() -> None:
    with pytest.raises(PipelineSpecError) as info:
        PassManager.parse("test-peel-one,no-such-pass")
    assert isinstance(info.value, GraphToolsError)
    assert "unknown pass 'no-such-pass'" in str(info.value)
    assert "remove-dead-ends" in str(info.value)
    assert "test-options" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("test-options{nope=1}", ["pass 'test-options'", "no option 'nope'", "count"]),
        ("test-options{count=many}", ["option count of pass 'test-options'", "int", "'many'"]),
        ("test-options{ratio=x}", ["option ratio", "float"]),
        ("test-options{flag=yes}", ["option flag", "true/false/1/0", "'yes'"]),
        ("test-options{count=1,count=2}", ["option count", "twice"]),
        ('test-options{label="open', ["unterminated"]),
        ("test-options{count}", ["expected '='"]),
        ("test-options{label=a{b}", ["expected ',' or '}'", "pass 'test-options'"]),
        ("test-options{label=a{{b}", ["'{'", "never closed"]),
        ("test-options{count=1,2}", ["option count", "int", "'1,2'"]),
        ("test-peel-one,,test-options", ["expected a pass name"]),
        ("test-peel-one test-options", ["expected ','"]),
        ("default{x=1}", ["'default' pipeline takes no options"]),
    ],
)
def test_bad_specs_say_what_is_wrong(spec: str, words: list[str]) -> None:
    with pytest.raises(PipelineSpecError) as info:
        PassManager.parse(spec)
    for word in words:
        assert word in str(info.value)


def test_option_of_unsupported_type_is_refused() -> None:
    with pytest.raises(PipelineSpecError, match="cannot set"):
        PassManager.parse("test-scripted-registered{raise_error=x}")


@register_pass
@dataclass(frozen=True)
class _ScriptedRegistered(Scripted):
    name: ClassVar[str] = "test-scripted-registered"


# -- registry and entry points ------------------------------------------------------------------


def test_builtin_and_registered_passes_are_available() -> None:
    passes = available_passes()
    assert passes["test-peel-one"] is PeelOne
    assert passes["remove-dead-ends"].__module__ == "graphtools.passes.remove_dead_ends"
    assert list(passes) == sorted(passes)


def test_register_pass_refuses_a_taken_name() -> None:
    @dataclass(frozen=True)
    class Impostor(Pass):
        name: ClassVar[str] = "test-peel-one"

    with pytest.raises(PipelineSpecError, match="taken"):
        register_pass(Impostor)


def test_register_pass_refuses_what_no_pipeline_could_run() -> None:
    """A built-in's name (which left every later parse failing), a name a spec cannot write
    or a named pipeline's, and a class that is no Pass dataclass are refused at once; the
    registry is as it was after each refusal."""

    @dataclass(frozen=True)
    class ShadowsRename(Pass):
        name: ClassVar[str] = "rename"

    @dataclass(frozen=True)
    class Spaced(Pass):
        name: ClassVar[str] = "two words"

    @dataclass(frozen=True)
    class Default(Pass):
        name: ClassVar[str] = "default"

    refusals = [
        (ShadowsRename, "'rename' is taken by graphtools.passes.rename.Rename"),
        (Spaced, "a pipeline spec cannot name"),
        (Default, "a pipeline spec cannot name"),
        (PassResult, "takes a Pass dataclass"),
    ]
    for cls, message in refusals:
        with pytest.raises(PipelineSpecError, match=message):
            register_pass(cls)  # type: ignore[type-var]
    assert PassManager.parse("rename{op=0,input=0,to=x},default").passes[0].name == "rename"


def test_manager_takes_any_iterable_of_passes() -> None:
    """A generator of passes is run, not read once by the type check and dropped."""
    manager = PassManager(p for p in [PeelOne()])
    assert manager.passes == (PeelOne(),)
    assert manager(_model())[0].name == "test-peel-one"


@dataclass(frozen=True)
class PluginPass(Pass):
    name: ClassVar[str] = "test-plugin"
    level: int = 0

    def call(self, model: Model) -> PassResult:
        return PassResult(model, False, {"level": self.level})


def _install_plugins(monkeypatch: pytest.MonkeyPatch, **targets: str) -> None:
    clash = type("Clash", (PluginPass,), {"name": "remove-dead-ends"})
    classes = {"PluginPass": PluginPass, "NotAPass": object, "Clash": clash}
    publish_passes(monkeypatch, classes, **targets)


def test_entry_point_passes_are_available_and_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_plugins(monkeypatch, plugin="graphtools_test_plugin:PluginPass")
    assert available_passes()["test-plugin"] is PluginPass
    manager = PassManager.parse("test-plugin{level=2},remove-dead-ends")
    assert manager.passes[0] == PluginPass(level=2)
    assert manager(_model())[0].stats == {"level": 2}


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("graphtools_no_such_module:Thing", ["cannot load entry point 'broken'", "ModuleNotFound"]),
        ("graphtools_test_plugin:NotAPass", ["entry point 'broken'", "does not name a Pass"]),
        ("graphtools_test_plugin:Clash", ["claims the name 'remove-dead-ends'"]),
    ],
)
def test_broken_entry_points_are_named(
    monkeypatch: pytest.MonkeyPatch, target: str, words: list[str]
) -> None:
    _install_plugins(monkeypatch, broken=target)
    with pytest.raises(PipelineSpecError) as info:
        available_passes()
    for word in words:
        assert word in str(info.value)


def test_rollback_covers_nested_nets() -> None:
    then_net = Net([Op("Relu", ["x"], ["t"]), Op("Sigmoid", ["t"], ["u"])], ["x"], ["u"])
    built = Net([Op("If", ["cond"], [], args={"then_net": then_net})], ["x", "cond"], ["u"])
    model = Model(net_from_netdef(net_to_netdef(built)))

    @dataclass(frozen=True)
    class BreaksNested(Pass):
        name: ClassVar[str] = "test-breaks-nested"

        def call(self, model: Model) -> PassResult:
            [(_, nested)] = model.predict_net[0].nested_nets()
            nested.remove_ops([0])
            nested.set_external_outputs(["v"])
            raise RuntimeError("halfway")

    before = net_to_netdef(model.predict_net).SerializeToString()
    revision = model.revision
    with pytest.raises(PassError, match="halfway"):
        PassManager([BreaksNested()])(model)
    assert net_to_netdef(model.predict_net).SerializeToString() == before
    assert model.revision == revision


def test_a_pipeline_reading_the_ssa_view_lets_verify_read_findings_off_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verify_module = sys.modules["graphtools.wellformed"]  # the package exports the function
    walked: list[str] = []
    walk = verify_module._check_flat_net

    def recording_walk(net: Net, path: str, *rest: object) -> object:
        walked.append(path)
        return walk(net, path, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(verify_module, "_check_flat_net", recording_walk)
    PassManager.parse("remove-dead-ends")(_model())
    assert "predict_net" not in walked and "init_net" in walked
    walked.clear()
    PassManager([PeelOne()])(_model())  # reads no view: verify walks the ops
    assert "predict_net" in walked


@pytest.mark.parametrize("error", [RuntimeError("verify crashed"), KeyboardInterrupt()])
def test_a_failure_inside_the_end_of_round_verify_rolls_the_round_back(
    monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    from graphtools.pass_infra import manager as pass_infra

    model = _model()
    size = len(model.predict_net)
    real_verify = pass_infra.verify

    def failing_after_the_pass(checked: Model) -> list:  # type: ignore[type-arg]
        if len(checked.predict_net) < size:  # every verify after the pass, the replay's too
            raise error
        return real_verify(checked)

    monkeypatch.setattr(pass_infra, "verify", failing_after_the_pass)
    before = _bytes(model)
    expected = PassError if isinstance(error, Exception) else KeyboardInterrupt
    with pytest.raises(expected):
        PassManager([PeelOne()])(model)
    assert _bytes(model) == before


# -- a pass called directly ---------------------------------------------------------------------


def test_calling_a_pass_runs_requires_before_the_work() -> None:
    model = _model()
    before = _bytes(model)
    with pytest.raises(PreconditionError):
        Scripted(fail_requires=True)(model)
    assert _bytes(model) == before


def test_calling_a_pass_checks_its_result_and_restores_the_model() -> None:
    model = _model()
    before, revision = _bytes(model), model.revision
    with pytest.raises(PassError, match="reported modified=False but the model changed"):
        Scripted(claim_modified=False, mutate=True)(model)
    assert _bytes(model) == before
    assert model.revision == revision


def test_calling_a_pass_runs_ensures_and_restores_on_failure() -> None:
    model = _model()
    before = _bytes(model)
    with pytest.raises(PostconditionError):
        Scripted(fail_ensures=True)(model)
    assert _bytes(model) == before


def test_calling_a_pass_refuses_an_interface_change_it_does_not_declare() -> None:
    model = _model()
    with pytest.raises(PassError, match="external inputs or outputs"):
        Scripted(new_outputs=("z",))(model)
    assert list(model.predict_net.external_outputs) == ["y"]
    assert Renamer(new_outputs=("b",))(model).modified


def test_calling_a_pass_refuses_a_result_verify_finds_broken() -> None:
    """A pass called by hand is held to verify as in a PassManager: an op reading a value
    nothing defines (or an output nothing writes) is a new finding, the pass fails naming it,
    and the model is as it was."""
    model = _model()
    before = model.copy()
    with pytest.raises(PassError, match=r"reads 'nowhere'.*undefined-blob"):
        Scripted(undefine=True)(model)
    assert model.predict_net.same_as(before.predict_net)
    with pytest.raises(PassError, match="external output 'z' is never produced"):
        Renamer(new_outputs=("z",))(model)
    assert model.predict_net.same_as(before.predict_net)


def test_calling_a_pass_returns_its_result() -> None:
    model = _model()
    result = PeelOne()(model)
    assert result.modified and result.model is model
    assert result.stats == {"peeled": 1}


def test_every_pass_class_in_the_passes_package_is_published() -> None:
    import importlib
    import pkgutil

    import graphtools.passes as package

    classes = set()
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Pass)
                and value is not Pass
                and value.__module__ == module.__name__
            ):
                classes.add(value)
    published = set(available_passes().values())
    missing = sorted(cls.__qualname__ for cls in classes - published)
    assert not missing, f"add these to [project.entry-points.'graphtools.passes']: {missing}"


def test_a_finding_of_the_model_as_given_is_judged_as_the_result_is() -> None:
    """The model as given is verified only when a round's result has a finding, and then
    through the SSA view as the result was (the op-by-op walk may word a finding otherwise,
    which would make an old finding look new)."""
    from onnx import TensorProto, helper

    from graphtools.serde.onnx_codec import model_from_onnx_bytes

    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["y"]),
            helper.make_node("Identity", ["y"], ["y2"]),
            helper.make_node("Relu", ["y2"], ["out"]),
        ],
        "g",
        [value("x", TensorProto.FLOAT, [2])],
        [value("out", TensorProto.FLOAT, [2]), value("", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    loaded = model_from_onnx_bytes(model.SerializeToString())
    records = PassManager.parse("remove-identity-ops")(loaded)
    assert records[0].stats["ops_removed"] == 1
    assert [op.type for op in loaded.predict_net] == ["Relu", "Relu"]


def test_what_a_porting_user_passes_by_mistake_is_refused_by_name(tmp_path: Path) -> None:
    """A NetDef or a Net where a Model belongs, a spec that is not a string, an option of the
    wrong type built in Python, a typo inside in-branches' pipeline, strings where ops belong
    and a pair given the wrong way round: typed errors saying what to do, where an
    AttributeError or a TypeError from deep inside used to be."""
    from graphtools.passes.rename import Rename
    from graphtools.serde import load_model, save_model

    net = Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"])
    manager = PassManager.parse("default")
    for wrong in (net, net_to_netdef(net)):
        with pytest.raises(InvalidArgumentError, match="rewrites a graphtools Model, not a"):
            manager(wrong)  # type: ignore[arg-type]
    for spec in (None, ["default"]):
        with pytest.raises(PipelineSpecError, match="a pipeline spec is a string"):
            PassManager.parse(spec)  # type: ignore[arg-type]
    model = Model(Net([Op("Relu", ["x"], ["y"]), Op("Relu", ["y"], ["z"])], ["x"], ["z"]))
    with pytest.raises(PassError, match=r"option op of pass 'rename' expects int, got str '1'"):
        PassManager([Rename(op="1", output=0, to="w")])(model)  # type: ignore[arg-type]
    with pytest.raises(PipelineSpecError, match="unknown pass 'fold-constantz'"):
        PassManager.parse("in-branches{pipeline=fold-constantz}")
    with pytest.raises(TypeError, match=r"op #0 of a Net must be a graphtools Op, not str"):
        Net(["x"], ["y"])  # type: ignore[list-item]
    init = Net([Op("GivenTensorFill", [], ["w"], args={"shape": [1], "values": [1.0]})])
    save_model(Model(Net([Op("Mul", ["x", "w"], ["y"])], ["x", "w"], ["y"]), init), tmp_path)
    with pytest.raises(SerdeError, match="the two files look swapped"):
        load_model(tmp_path / "init_net.pb", tmp_path / "predict_net.pb")
    # a net of fills alone with an init_net deriving one param from another is no swap
    derived = Net(
        [
            Op("ConstantFill", [], ["a"], args={"shape": [2], "value": 1.0}),
            Op("Cast", ["a"], ["b"], args={"to": 1}),
        ]
    )
    fills = Net([Op("GaussianFill", [], ["noise"], args={"shape": [2]})], [], ["noise"])
    save_model(Model(fills, derived), tmp_path / "gen")
    assert load_model(tmp_path / "gen" / "predict_net.pb", tmp_path / "gen" / "init_net.pb")


def test_a_user_pass_whose_annotations_cannot_be_resolved_still_runs() -> None:
    """The option type check reads annotations; one naming a type only imported for type
    checking (``NameError`` when resolved) leaves that pass's options unchecked."""
    namespace: dict[str, object] = {}
    exec(  # a module with postponed annotations naming what it never imports
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n"
        "from typing import ClassVar\n"
        "from graphtools.pass_infra import Pass, PassResult\n"
        "@dataclass(frozen=True)\n"
        "class Tagged(Pass):\n"
        "    name: ClassVar[str] = 'tagged'\n"
        "    mode: Mode | None = None\n"
        "    def call(self, model):\n"
        "        return PassResult(model, False, {})\n",
        namespace,
    )
    tagged = namespace["Tagged"]()  # type: ignore[operator]
    model = Model(Net([Op("Relu", ["x"], ["y"])], ["x"], ["y"]))
    (record,) = PassManager([tagged], steps=1)(model)
    assert not record.modified


def test_a_failed_pass_says_the_passes_before_it_keep_their_changes() -> None:
    """The note said 'the model was rolled back' while the identity removed by the pass
    before stayed removed: a script that caught the error and saved got it half-processed."""
    net = Net([Op("Identity", ["x"], ["i"]), Op("Relu", ["i"], ["y"])], ["x"], ["y"])
    model = Model(net)
    with pytest.raises(PassError) as failed:
        PassManager.parse("remove-identity-ops,rename{op=9,output=0,to=z}")(model)
    assert [op.type for op in model.predict_net] == ["Relu"]  # the first pass's change stays
    (note,) = [n for n in failed.value.__notes__ if "rolled back" in n]
    assert "rolled back to its state before this pass" in note
    assert "the changes of the passes run before it (remove-identity-ops) stay" in note


def test_a_list_of_names_given_in_python_is_taken_as_the_tuple_of_them() -> None:
    """``RemoveIdentityOps(types=["StopGradient"])`` failed: 'expects tuple, got list' (the
    pass list documents the option as a list of str); a lone string is still refused."""
    from graphtools.passes import RemoveIdentityOps

    net = Net([Op("StopGradient", ["x"], ["y"]), Op("Relu", ["y"], ["z"])], ["x"], ["z"])
    model = Model(net)
    PassManager([RemoveIdentityOps(types=["StopGradient"])])(model)  # type: ignore[arg-type]
    assert [op.type for op in model.predict_net] == ["Relu"]
    with pytest.raises(PassError, match="option types of pass 'remove-identity-ops' expects"):
        PassManager([RemoveIdentityOps(types="StopGradient")])(model)  # type: ignore[arg-type]


def test_an_option_out_of_its_range_is_refused_when_the_pipeline_is_parsed() -> None:
    """fold-constants{max_bytes=-5} was taken (every value is bigger than -5 bytes)."""
    with pytest.raises(PipelineSpecError, match=r"max_bytes=-5\}: a size is 0 or more bytes"):
        PassManager.parse("fold-constants{max_bytes=-5}")
