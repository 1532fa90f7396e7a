"""One numba kernel per arithmetic family; all share the signature
``kernel(A, B, C, out, params)`` (see ``_tiles`` for the layouts)."""

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

__all__ = ["KERNELS", "LANES"]
