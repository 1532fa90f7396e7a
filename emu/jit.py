"""The only numba decorator of the project.

Every kernel is compiled with ``cache=True`` (compile once per machine), ``fastmath=False``
(no reassociation, no FMA contraction: the arithmetic is the emulation) and
``error_model="numpy"`` (no Python-style division checks in hot loops).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import numba

__all__ = ["jit", "prange", "specialise", "CACHE"]

prange = numba.prange


def _writable(path) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _choose_cache() -> bool:
    """Make sure numba has a writable cache directory before any kernel is decorated: numba fails
    the import ("no locator available") when none of its places is writable. Order: the user's
    ``NUMBA_CACHE_DIR``, this package's ``__pycache__``, then ``$XDG_CACHE_HOME/fp16emu/numba``
    (``~/.cache``) and the temporary directory, with a warning naming the one taken; with none,
    the kernels are compiled in every process (a warning says so)."""
    configured = numba.config.CACHE_DIR
    if configured:
        if _writable(configured):
            return True
        reason = f"NUMBA_CACHE_DIR={configured} is not writable"
    else:
        if _writable(Path(__file__).resolve().parent / "__pycache__"):
            return True
        reason = f"the package folder {Path(__file__).resolve().parent} is not writable"
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fp16emu" / "numba"
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    for fallback in (user, Path(tempfile.gettempdir()) / f"fp16emu-numba-{uid}"):
        if _writable(fallback):
            numba.config.CACHE_DIR = str(fallback)
            warnings.warn(f"fp16emu: {reason}; numba's cache is in {fallback}", RuntimeWarning, stacklevel=3)
            return True
    warnings.warn(
        f"fp16emu: {reason} and no fallback is; kernels are compiled in every process", RuntimeWarning, stacklevel=3
    )
    return False


#: whether compiled kernels are cached on disk (see :func:`_choose_cache`)
CACHE = _choose_cache()


def jit(*args, parallel: bool = False, inline: str = "never"):
    """``numba.njit`` with the project's fixed options; usable bare or with ``parallel=True``."""
    options = dict(cache=CACHE, fastmath=False, error_model="numpy", parallel=parallel, inline=inline)
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
