"""The only numba decorator of the project.

Every kernel is compiled with ``cache=True`` (compile once per machine), ``fastmath=False``
(no reassociation, no FMA contraction: the arithmetic is the emulation) and
``error_model="numpy"`` (no Python-style division checks in hot loops).
"""

from __future__ import annotations

import numba

__all__ = ["jit", "prange", "specialise"]

prange = numba.prange


def jit(*args, parallel: bool = False, inline: str = "never"):
    """``numba.njit`` with the project's fixed options; usable bare or with ``parallel=True``."""
    options = dict(cache=True, fastmath=False, error_model="numpy", parallel=parallel, inline=inline)
    if args and callable(args[0]):
        return numba.njit(**options)(args[0])
    return numba.njit(**options)


def specialise(func, name: str, *, parallel: bool = False, **names):
    """A separately compiled (and separately cached) copy of the plain Python function ``func``
    under the new name ``name``, with the global ``names`` bound as given: how one source gets a
    serial twin of a parallel kernel, or a driver per kernel it calls. Each copy has its own
    qualified name, so numba's cache never mixes the copies up."""
    import types

    copy = types.FunctionType(func.__code__, {**func.__globals__, **names}, name, func.__defaults__)
    copy.__qualname__ = name
    copy.__doc__ = func.__doc__
    return jit(copy, parallel=parallel)
