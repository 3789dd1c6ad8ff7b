"""What a pass must not do to a model's well-formedness, and the record of a broken promise.

``verify`` findings are compared before and after: a pass may leave the problems a model came
with (real exports often have some), never add one. A finding is "the same" when the same kind
of problem concerns the same blob in the same (nested) net, whatever the op indices a pass
shifted. The pass manager and a pass called by hand (``Pass.__call__``) hold a result to this.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass

from graphtools.ir import Model
from graphtools.wellformed import Finding, verify

__all__ = ["CheckFailure", "FindingsBefore", "Known", "finding_key", "new_findings"]


@dataclass(frozen=True)
class CheckFailure:
    """A broken pass contract: a one-line ``reason`` and optional multi-line ``details``."""

    reason: str
    details: str = ""


_OP_INDEX = re.compile(r"op\[\d+:")

Known = Container[tuple[str, str, str]]
"""Verify findings a model may keep (``finding_key`` of each): those it had before."""


def finding_key(finding: Finding) -> tuple[str, str, str]:
    """``(kind, net, blob)`` of ``finding``, its op indices left out (passes shift them)."""
    return (finding.kind, _OP_INDEX.sub("op[", finding.net), finding.blob)


class FindingsBefore:
    """The verify findings of a model as it was when this was made, worked out on the first
    question: a result is held to them, and a result with no finding asks none (checking the
    model before costs as much as checking it after). Holds a copy of the model (which shares
    its ops) until then, and checks it as the model would have been checked: through the SSA
    view when the model had one built."""

    __slots__ = ("_keys", "_model", "_with_view")

    def __init__(self, model: Model) -> None:
        self._model: Model | None = model.copy()
        self._with_view = model.predict_net.ssa_is_cheap()
        self._keys: set[tuple[str, str, str]] | None = None

    def work_out(self) -> set[tuple[str, str, str]]:
        """The findings' keys (verifying the copy the first time)."""
        if self._keys is None:
            assert self._model is not None
            if self._with_view:
                self._model.predict_net.ssa()
            self._keys = {finding_key(f) for f in verify(self._model)}
            self._model = None
        return self._keys

    def __contains__(self, key: object) -> bool:
        return key in self.work_out()


def new_findings(after: list[Finding], before: Known) -> CheckFailure | None:
    """The failure of a result whose findings ``after`` include one not in ``before``."""
    new = [finding for finding in after if finding_key(finding) not in before]
    if not new:
        return None
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    return CheckFailure(
        f"verify found a new problem: {new[0]}{more}",
        "new verify findings:\n" + "\n".join(f"  {finding}" for finding in new),
    )
