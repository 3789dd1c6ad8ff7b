"""What the command line keeps off its reports, in the main process and in a batch's workers.

Made-up data makes NaNs and overflows on purpose (the log of a negative input): numpy's
floating-point errors and Python's ``RuntimeWarning`` would only bury the report; a pipeline
that did not converge is said in the report's own words (``report_records``).
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator

__all__ = ["numpy_quiet", "reports_quiet"]


@contextlib.contextmanager
def reports_quiet() -> Iterator[None]:
    """Inside: the warnings above ignored (the filters as they were after)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.filterwarnings("ignore", "pipeline .* did not reach a fixpoint")
        yield


def numpy_quiet() -> contextlib.AbstractContextManager[object]:
    """numpy's floating-point errors ignored, when numpy is imported already (``show`` of a
    Caffe2 pair does not import it)."""
    numpy = sys.modules.get("numpy")
    return contextlib.nullcontext() if numpy is None else numpy.errstate(all="ignore")
