"""One numba kernel per arithmetic family; all share the signature
``kernel(A, B, C, out, params)`` (see ``_tiles`` for the layouts)."""

from ..jit import specialise
from ..units import Family
from ._tiles import LANES
from .fma import fma32
from .fp64 import fp64_acc
from .fused_exact import fused_exact
from .pairwise import pairwise
from .truncated import truncated_fused, two_stage

KERNELS = {
    Family.FUSED_EXACT: fused_exact,
    Family.PAIRWISE: pairwise,
    Family.TRUNCATED_FUSED: truncated_fused,
    Family.TWO_STAGE: two_stage,
    Family.FMA: fma32,
    Family.FP64: fp64_acc,
}

#: the serial twin of each kernel: the same code on one thread (``prange`` runs as ``range``; each
#: output is still computed by exactly one task), compiled and cached apart. The rows driver runs
#: it per chunk (``emu.rows``), and small batched launches run it directly (``emu.dot.run_kernel``):
#: a parallel kernel's own compile (numba's parallel passes and the gufunc around the task) costs a
#: third to a half of its task's, a serial one's a tenth
SERIAL = {family: specialise(k.py_func, f"{k.__name__}_serial") for family, k in KERNELS.items()}

__all__ = ["KERNELS", "SERIAL", "LANES"]
