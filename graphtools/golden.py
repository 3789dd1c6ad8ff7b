"""Golden text tests for pipelines, in the style of xDSL's text tests.

A case is a folder holding ``predict_net.pbtxt`` (optionally ``init_net.pbtxt``) and
``pipeline.txt``: its first line is the pipeline spec, the following ``#`` lines say what the
case covers, and an optional ``shapes: name=1x3x8x8 ...`` line gives input shapes for the numeric
check. ``render_case`` runs the pipeline and renders the canonical dump before and after, the
``modified`` flag and the stats (or the error, for refusal cases), then a second run to show the
fixpoint; the result is compared with ``expected.txt`` beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from graphtools.errors import GraphToolsError
from graphtools.ir import Model
from graphtools.printer import print_model
from graphtools.serde import load_model

EXPECTED = "expected.txt"


@dataclass
class GoldenCase:
    """One golden case folder, parsed."""

    folder: Path
    pipeline: str
    comments: list[str]
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> GoldenCase:
        """Read ``pipeline.txt`` of ``folder``."""
        lines = (folder / "pipeline.txt").read_text().splitlines()
        if not lines or not lines[0].strip():
            raise GraphToolsError(f"{folder / 'pipeline.txt'}: first line must be a pipeline spec")
        comments = [line for line in lines[1:] if line.startswith("#")]
        shapes: dict[str, tuple[int, ...]] = {}
        for line in lines[1:]:
            if line.startswith("shapes:"):
                for item in line.removeprefix("shapes:").split():
                    name, dims = item.split("=", 1)
                    shapes[name] = tuple(int(d) for d in dims.split("x") if d)
        return cls(folder, lines[0].strip(), comments, shapes)

    def load_model(self) -> Model:
        """The case's input model."""
        init = self.folder / "init_net.pbtxt"
        return load_model(self.folder / "predict_net.pbtxt", init if init.exists() else None)


def find_cases(root: Path) -> list[Path]:
    """Every case folder under ``root`` (folders that hold a ``pipeline.txt``), sorted."""
    return sorted(p.parent for p in root.rglob("pipeline.txt"))


def render_case(case: GoldenCase, relative_to: Path) -> tuple[str, Model | None, Model]:
    """Run the case; returns ``(golden text, model after or None on refusal, model before)``."""
    from graphtools.pass_infra import PassManager

    before = case.load_model()
    model = case.load_model()
    folder = case.folder.relative_to(relative_to)
    inputs = "predict_net.pbtxt" + (" + init_net.pbtxt" if model.init_net is not None else "")
    lines = [f"// pipeline: {case.pipeline}", f"// input: {folder}/{inputs}"]
    lines += [f"// {comment}" for comment in case.comments]
    lines += ["// ---- before", print_model(model).rstrip("\n")]
    try:
        records = PassManager.parse(case.pipeline)(model)
    except GraphToolsError as exc:
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        lines += ["// ---- refused", f"// {type(cause).__name__}: {cause}"]
        unchanged = print_model(model) == print_model(before)
        lines.append(f"// model unchanged: {unchanged}")
        return "\n".join(lines) + "\n", None, before
    lines += ["// ---- after", print_model(model).rstrip("\n")]
    modified = any(record.modified for record in records)
    lines.append(f"// modified: {modified}")
    for record in records:
        if record.modified or record.stats:
            lines.append(f"// stats {record.name} (round {record.round}): {record.stats}")
    again = PassManager.parse(case.pipeline)(model)
    lines.append(f"// second run modified: {any(record.modified for record in again)}")
    return "\n".join(lines) + "\n", model, before
