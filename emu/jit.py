"""The only numba decorator of the project.

Every kernel is compiled with ``cache=True`` (compile once per machine), ``fastmath=False``
(no reassociation, no FMA contraction: the arithmetic is the emulation) and
``error_model="numpy"`` (no Python-style division checks in hot loops).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import time
import warnings
from pathlib import Path

import numba

__all__ = ["jit", "prange", "specialise", "CACHE", "default_cache_dir"]

prange = numba.prange


def _writable(path) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _private(path: Path, create: bool) -> str | None:
    """None when ``path`` is a folder numba may load from: a real folder (no link), owned by this
    user, that nobody else can write to (created 0700 when ``create``); else why not. Numba
    unpickles its index files, so a folder another user can write is code they can run as us."""
    try:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                pass
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be made ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder (a link or a file)"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        if create and hasattr(os, "getuid"):
            os.chmod(path, 0o700)  # ours, made too open by an old umask: close it
            return None
        return f"{path} can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def default_cache_dir() -> Path:
    """The per-user cache folder every entry point shares: ``$XDG_CACHE_HOME/fp16emu/numba``
    (``~/.cache/fp16emu/numba``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fp16emu" / "numba"


#: folders of other code versions kept beside the current one (the most recently used), and the
#: age in seconds below which none is removed (another process may be using it)
KEEP_VERSIONS = 3
KEEP_SECONDS = 86400


def source_digest() -> str:
    """16 hex digits of the sha256 of every ``emu`` source file (relative path and bytes).

    Numba checks a cached kernel against its own source file only, not the files whose functions
    it inlined: a changed helper in ``emu/kernels/_scalar.py`` would leave stale machine code in
    use. The cache therefore lives in a folder per version of the whole ``emu`` source."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _prune_versions(place: Path, current: str) -> None:
    """Remove cache folders of other source versions beyond the ``KEEP_VERSIONS`` most recently
    modified and older than ``KEEP_SECONDS`` (only 16-hex-digit folders this user owns; errors are
    ignored)."""
    try:
        others = [
            p
            for p in place.iterdir()
            if p.name != current and len(p.name) == 16 and all(ch in "0123456789abcdef" for ch in p.name)
        ]
        others = [p for p in others if p.is_dir() and not p.is_symlink() and p.stat().st_uid == os.getuid()]
        others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        now = time.time()
        for old in others[KEEP_VERSIONS:]:
            if now - old.stat().st_mtime > KEEP_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
    except (OSError, AttributeError):
        pass


def _choose_cache() -> bool:
    """Give numba one safe, writable cache folder before any kernel is decorated, the same for
    the command line, Python, ``make`` and notebooks: the user's ``NUMBA_CACHE_DIR`` when set,
    else :func:`default_cache_dir`, in a subfolder named by :func:`source_digest`. Both must be
    folders of this user's that nobody else can write (created 0700); otherwise the kernels are compiled in memory in every
    process, with a warning saying why (never a shared or predictable folder such as ``/tmp``)."""
    configured = numba.config.CACHE_DIR
    place = Path(configured) if configured else default_cache_dir()
    why = _private(place, create=not configured or not os.path.exists(configured))
    digest = source_digest()
    if why is None:  # one subfolder per version of the emu sources (source_digest says why)
        fresh = not (place / digest).exists()
        why = _private(place / digest, create=True)
        if why is None and fresh:
            _prune_versions(place, digest)
    if why is None and _writable(place / digest):
        numba.config.CACHE_DIR = str(place / digest)
        return True
    why = why or f"{place} is not writable"
    numba.config.CACHE_DIR = ""
    warnings.warn(
        f"fp16emu: numba's cache is off ({why}); kernels are compiled in every process", RuntimeWarning, stacklevel=3
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
