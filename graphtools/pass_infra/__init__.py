"""Passes and pipelines: the ``Pass`` base and its checks (``base``), which passes exist
(``registry``), how pipelines are spelt (``spec``) and how they run (``manager``).

A pass is a small frozen dataclass whose fields are its options; ``PassManager.parse(spec)``
builds a pipeline from the passes ``available_passes`` finds, and runs it to a fixpoint.
"""

from graphtools.errors import PipelineSpecError
from graphtools.pass_infra.base import Pass, PassResult
from graphtools.pass_infra.manager import (
    DEFAULT_STEPS,
    NoFixpointWarning,
    PassManager,
    PassRecord,
)
from graphtools.pass_infra.registry import ENTRY_POINT_GROUP, available_passes, register_pass
from graphtools.pass_infra.spec import (
    DEFAULT_PIPELINE,
    DEFAULT_PIPELINES,
    NAMED_PIPELINES,
    OPTIMIZE_PIPELINES,
    DefaultPipeline,
    OptimizePipeline,
    parse_pipeline,
    pass_spec,
)

__all__ = [
    "DEFAULT_PIPELINE",
    "DEFAULT_PIPELINES",
    "DEFAULT_STEPS",
    "ENTRY_POINT_GROUP",
    "NAMED_PIPELINES",
    "OPTIMIZE_PIPELINES",
    "DefaultPipeline",
    "NoFixpointWarning",
    "OptimizePipeline",
    "Pass",
    "PassManager",
    "PassRecord",
    "PassResult",
    "PipelineSpecError",
    "available_passes",
    "parse_pipeline",
    "pass_spec",
    "register_pass",
]
