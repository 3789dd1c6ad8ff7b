"""The numpy reference executor: runs Caffe2 NetDefs op by op on the host.

``run_model(model, feeds)`` runs an init_net/predict_net pair the way a Caffe2 predictor does;
``run_net(net, workspace)`` runs one net over a ``Workspace``. Kernels are registered by op type
with ``@kernel("FC")`` in the family modules (``kernels_nn``, ``kernels_math``,
``kernels_tensor``, ``kernels_fill``, ``kernels_int8``, ``kernels_detection``, ``kernels_image``,
``kernels_misc``, ``kernels_sparse``, ``kernels_aten``, ``kernels_io``, ``kernels_control``,
``kernels_logic``, ``kernels_train``, ``kernels_grad``, ``kernels_recurrent``); ``KERNELS`` maps
each type to its kernel.
An op without a kernel raises ``UnsupportedOpError``; a kernel that rejects its inputs raises
``ExecutionError`` naming the op and the input shapes.
"""

from __future__ import annotations

from graphtools.executor import (  # noqa: F401  (importing registers the kernels)
    kernels_aten,
    kernels_control,
    kernels_detection,
    kernels_fill,
    kernels_grad,
    kernels_image,
    kernels_int8,
    kernels_io,
    kernels_logic,
    kernels_math,
    kernels_misc,
    kernels_nn,
    kernels_recurrent,
    kernels_sparse,
    kernels_tensor,
    kernels_train,
)
from graphtools.executor.interpreter import ExecutionError, run_model, run_net, run_op
from graphtools.executor.registry import KERNELS, Kernel, OpContext, kernel
from graphtools.executor.workspace import Int8Tensor, Workspace

__all__ = [
    "KERNELS",
    "ExecutionError",
    "Int8Tensor",
    "Kernel",
    "OpContext",
    "Workspace",
    "kernel",
    "run_model",
    "run_net",
    "run_op",
]
