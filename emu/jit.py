"""The only numba decorator of the project.

Every kernel is compiled with ``cache=True`` (compile once per machine), ``fastmath=False``
(no reassociation, no FMA contraction: the arithmetic is the emulation) and
``error_model="numpy"`` (no Python-style division checks in hot loops).
"""

from __future__ import annotations

import numba

__all__ = ["jit", "prange"]

prange = numba.prange


def jit(*args, parallel: bool = False, inline: str = "never"):
    """``numba.njit`` with the project's fixed options; usable bare or with ``parallel=True``."""
    options = dict(cache=True, fastmath=False, error_model="numpy", parallel=parallel, inline=inline)
    if args and callable(args[0]):
        return numba.njit(**options)(args[0])
    return numba.njit(**options)
