"""One numba kernel per arithmetic family; all share the signature
``kernel(A, B, C, out, params, t0, t1)``: tasks t0 … min(t1, the task count) − 1 of the output,
one after another (see ``_tiles`` for the layouts and tasks). :data:`KERNELS` runs every task,
in parallel; :data:`SERIAL` runs them on the calling thread. Both call the same compiled code."""

from ..jit import run_tasks
from ..units import Family
from ._tiles import LANES, task_count
from .fma import fma32
from .fp64 import fp64_acc
from .fused_exact import fused_exact
from .pairwise import pairwise
from .truncated import truncated_fused, two_stage

#: the compiled kernel of each family (serial over the task range it is given)
TASKS = {
    Family.FUSED_EXACT: fused_exact,
    Family.PAIRWISE: pairwise,
    Family.TRUNCATED_FUSED: truncated_fused,
    Family.TWO_STAGE: two_stage,
    Family.FMA: fma32,
    Family.FP64: fp64_acc,
}


def _launch(kernel, parallel: bool, name: str):
    def run(A, B, C, out, prm):
        run_tasks(lambda t0, t1: kernel(A, B, C, out, prm, t0, t1), task_count(*out.shape), parallel)

    run.__name__ = run.__qualname__ = name
    where = "``numba.get_num_threads()`` threads" if parallel else "the calling thread"
    run.__doc__ = f"Every task of ``{kernel.__name__}`` on {where}."
    return run


#: each family's kernel over every task of ``out``, in parallel: ``KERNELS[family](A, B, C, out, prm)``
KERNELS = {family: _launch(k, True, k.__name__) for family, k in TASKS.items()}

#: the same on the calling thread (small batched launches, :func:`emu.dot.run_kernel`), the same
#: compiled code: a launch of a few tasks gains nothing from threads
SERIAL = {family: _launch(k, False, f"{k.__name__}_serial") for family, k in TASKS.items()}

__all__ = ["KERNELS", "SERIAL", "TASKS", "LANES", "task_count"]
