"""The hardware a 2022 rocMLIR kernel model runs on: the one list of accepted names.

The xdlops kernels of Aug 2022 ran on the AMD GPUs named here by their matrix unit (MI100, MI200,
MI300; :mod:`models.units`). Other names of the same GPUs are accepted as aliases (``mi250x`` is an
MI200: the same CDNA2 matrix unit, :data:`models.units.ALIASES`). :func:`check_hardware` is the one
check: the kernel registry (:func:`models.kernels.kernel`) and the command line's ``--hw`` both
use it, and the command line derives its help from :data:`HW_NAMES` and :data:`HW_ALIASES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .units import ALIASES

__all__ = ["HW_NAMES", "HW_ALIASES", "accepted_hardware", "check_hardware"]

#: The GPUs of the 2022 xdlops kernels, by the name of their matrix unit.
HW_NAMES = ("mi100", "mi200", "mi300")

#: Other accepted names and the GPU each stands for (the aliases of :mod:`models.units` that name one
#: of :data:`HW_NAMES`).
HW_ALIASES: Mapping[str, str] = MappingProxyType({a: n for a, n in ALIASES.items() if n in HW_NAMES})


def accepted_hardware() -> tuple[str, ...]:
    """Every accepted name: :data:`HW_NAMES`, then the aliases."""
    return HW_NAMES + tuple(HW_ALIASES)


def check_hardware(name: str) -> str:
    """The canonical name of the GPU ``name`` (case-insensitive; an alias gives the name it stands for).

    Raises ``ValueError`` naming the accepted values when ``name`` is none of them.
    """
    key = str(name).strip().lower()
    key = HW_ALIASES.get(key, key)
    if key not in HW_NAMES:
        raise ValueError(
            f"hw: {name!r} is not an AMD GPU with the 2022 xdlops kernels; valid: {', '.join(HW_NAMES)} "
            f"(aliases: {', '.join(HW_ALIASES)})"
        )
    return key
