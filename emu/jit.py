"""The only numba decorator of the project.

Every kernel is compiled with ``cache=True`` (compile once per machine), ``fastmath=False``
(no reassociation, no FMA contraction: the arithmetic is the emulation),
``error_model="numpy"`` (no Python-style division checks in hot loops) and ``nogil=True``: a
kernel releases the GIL while it runs, so another thread of the process (the command line's
signal watcher, ``validation.engine.ending_on_signals``) can act within a second of SIGTERM or
SIGINT even while one call computes for minutes. Kernels touch no Python object, so releasing
the GIL changes no result.

Kernels are compiled serial, over a range of their tasks; :func:`run_tasks` runs the ranges on
threads of the process (``numba.get_num_threads()`` of them), so no kernel starts numba's own
threading layer: any thread may call any kernel, and one compile serves the serial and the
parallel call (a ``prange`` loop made numba compile a parallel copy, seconds per kernel and
argument types; and the OpenMP layer's threads, spinning after each loop, slowed the threads
that ran next on a 2-core machine by up to half).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numba

__all__ = ["jit", "specialise", "run_tasks", "ALL_TASKS", "CACHE", "default_cache_dir"]


def _writable(path) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _why_unsafe(path, st) -> str | None:
    """Why the entry ``path`` (its ``lstat`` is ``st``) cannot be trusted; None when it can: a
    real folder or regular file (no link), this user's, that nobody else can write."""
    if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return f"{path} is not a folder or a regular file (a link?)"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{path} can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _unsafe_tree(path: Path) -> str | None:
    """Why the folder ``path`` or anything in it cannot be trusted (:func:`_why_unsafe` of every
    folder and file, links never followed); None when all can."""
    st = os.lstat(path)
    why = _why_unsafe(path, st)
    if why is not None or not stat.S_ISDIR(st.st_mode):
        return why or f"{path} is not a folder"
    folders = [path]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    why = _why_unsafe(entry.path, entry.stat(follow_symlinks=False))
                    if why is not None:
                        return why
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(Path(entry.path))
        except OSError as exc:
            return f"{folder} cannot be read ({exc.strerror})"
    return None


def _replace(path: Path) -> str | None:
    """Move ``path`` (a folder, file or link) aside, remove it, and make a new empty folder 0700
    in its place; None when done, else why not. What was there is never read."""
    aside = path.with_name(f".{path.name}.unsafe.{secrets.token_hex(4)}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return f"{path} is unsafe and cannot be moved aside ({exc.strerror})"
    if os.path.isdir(aside) and not os.path.islink(aside):
        shutil.rmtree(aside, ignore_errors=True)  # never follows a link inside
    else:
        with contextlib.suppress(OSError):
            os.unlink(aside)
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)
    except OSError as exc:
        return f"{path} cannot be made ({exc.strerror})"
    return None


def _private(path: Path, create: bool, replace: bool, deep: bool) -> str | None:
    """None when ``path`` is a folder numba may load from: a real folder (no link), this user's,
    that nobody else can write, and (``deep``) every folder and file in it the same; else why
    not. With ``create`` it is made 0700 when missing; with ``replace`` a folder that is not safe
    is moved aside, removed and made anew, empty: never adopted (numba unpickles its index files,
    so a file another user could plant or write is code run as us)."""
    try:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
        why = _unsafe_tree(path) if deep else _why_unsafe(path, os.lstat(path))
    except OSError as exc:
        return f"{path} cannot be made ({exc.strerror})"
    if why is None and not path.is_dir():
        why = f"{path} is not a folder"
    if why is not None and replace:
        warnings.warn(
            f"fp16emu: numba's cache: {why}; {path} is replaced by an empty folder", RuntimeWarning, stacklevel=4
        )
        return _replace(path)
    return why


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
    this user's folders that nobody else can write (created 0700), and so must every folder and
    file in the subfolder, checked now, before numba reads any; a subfolder (or the default
    folder) that is not is replaced by an empty one. A ``NUMBA_CACHE_DIR`` that is not safe is
    left alone: the kernels are compiled in memory in every process, with a warning saying why
    (never a shared or predictable folder such as ``/tmp``)."""
    configured = numba.config.CACHE_DIR
    place = Path(configured) if configured else default_cache_dir()
    ours = not configured or not os.path.exists(configured)  # made by us: replaced when unsafe
    why = _private(place, create=ours, replace=ours, deep=False)
    digest = source_digest()
    if why is None:  # one subfolder per version of the emu sources (source_digest says why)
        fresh = not os.path.lexists(place / digest)
        why = _private(place / digest, create=True, replace=True, deep=True)
        if why is None and fresh:
            _prune_versions(place, digest)
    if why is None and _writable(place / digest):
        numba.config.CACHE_DIR = str(place / digest)
        _private_writes(place / digest)
        return True
    why = why or f"{place} is not writable"
    numba.config.CACHE_DIR = ""
    warnings.warn(
        f"fp16emu: numba's cache is off ({why}); kernels are compiled in every process", RuntimeWarning, stacklevel=3
    )
    return False


def _private_writes(folder: Path) -> None:
    """Make numba create its cache folders 0700 and files 0600 under ``folder`` (it follows the
    umask: 0775 and 0664 under umask 002), each made with that mode, so that :func:`_choose_cache`
    never finds this user's own entries group-writable, even while another process writes them."""
    from numba.core import caching

    locator, files = getattr(caching, "_CacheLocator", None), getattr(caching, "IndexDataCacheFile", None)
    if locator is None or not hasattr(files, "_open_for_write") or getattr(files, "_fp16emu", False):
        return
    ensure, open_for_write, root = locator.ensure_cache_path, files._open_for_write, str(folder) + os.sep

    def ensure_cache_path(self):
        if str(self.get_cache_path()).startswith(root):
            os.makedirs(self.get_cache_path(), mode=0o700, exist_ok=True)
        ensure(self)

    @contextlib.contextmanager
    def _open_for_write(self, filepath):
        if not str(filepath).startswith(root):
            with open_for_write(self, filepath) as fh:
                yield fh
            return
        tmp = f"{filepath}.tmp.{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                yield fh
            os.replace(tmp, filepath)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    locator.ensure_cache_path, files._open_for_write, files._fp16emu = ensure_cache_path, _open_for_write, True
    _checked_reads(files, folder)


class _UnsafeCacheFile(OSError):
    """A cache file (or a folder above it) that is not this user's own and private when opened."""


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _check_fd(fd: int, path: str, folder: bool) -> None:
    """_UnsafeCacheFile unless the open ``fd`` (of ``path``) is a folder (``folder``) or a
    regular file, this user's (the effective uid), that nobody else can write: the checks of
    :func:`_why_unsafe` made on the descriptor that is then read, not on a path that another
    process could swap between the check and the read."""
    st = os.fstat(fd)
    if not (stat.S_ISDIR if folder else stat.S_ISREG)(st.st_mode):
        raise _UnsafeCacheFile(f"{path} is not a {'folder' if folder else 'regular file'}")
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise _UnsafeCacheFile(f"{path} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o022:
        raise _UnsafeCacheFile(f"{path} can be written by others (mode {stat.S_IMODE(st.st_mode):o})")


def _open_private(root, path) -> int:
    """A read-only descriptor of the regular file ``path`` inside the folder ``root``, opened one
    folder at a time from ``root`` down (each folder by a descriptor, links never followed) and
    checked with :func:`_check_fd` at every step: ``root``, every folder between, the file. Raises
    :class:`_UnsafeCacheFile` (an OSError) when one is not private, FileNotFoundError when missing."""
    root, path = os.path.abspath(root), os.path.abspath(path)
    parts = os.path.relpath(path, root).split(os.sep)
    if parts[0] in (os.pardir, os.curdir) or not parts[-1]:
        raise _UnsafeCacheFile(f"{path} is not inside {root}")
    dfd = os.open(root, _DIR_FLAGS)
    try:
        _check_fd(dfd, root, True)
        where = root
        for name in parts[:-1]:
            where = os.path.join(where, name)
            nfd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
            _check_fd(dfd, where, True)
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dfd)
    except OSError as exc:  # ELOOP / ENOTDIR: a link or a file where a folder should be
        if isinstance(exc, (_UnsafeCacheFile, FileNotFoundError)):
            raise
        raise _UnsafeCacheFile(f"{path} cannot be opened safely ({exc.strerror})") from None
    finally:
        os.close(dfd)
    try:
        _check_fd(fd, path, False)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _checked_reads(files, folder: Path) -> None:
    """numba's index and data loads (``IndexDataCacheFile._load_index`` / ``_load_data``, both
    unpickled) of files under ``folder`` read through :func:`_open_private`: the owner and mode of
    the file and of every folder from the cache root (``folder``'s parent) down are checked on
    the descriptors that are read, so a file swapped after :func:`_choose_cache` checked the tree
    (another user's, or one others can write) is refused, never unpickled. A refused index is an
    empty one (the kernel is compiled, and its fresh entry replaces the file); a refused data file
    is a missing one (numba compiles)."""
    import pickle

    load_index, load_data = files._load_index, files._load_data
    root, inside = str(folder.parent), str(folder) + os.sep

    def _load_index(self):
        if not str(self._index_path).startswith(inside):
            return load_index(self)
        try:
            fd = _open_private(root, self._index_path)
        except FileNotFoundError:
            return {}
        except _UnsafeCacheFile as exc:
            warnings.warn(f"fp16emu: numba's cache: {exc}; not loaded, compiled again", RuntimeWarning, stacklevel=2)
            return {}
        with os.fdopen(fd, "rb") as f:
            version = pickle.load(f)
            data = f.read()
        if version != self._version:
            return {}
        stamp, overloads = pickle.loads(data)
        return overloads if stamp == self._source_stamp else {}

    def _load_data(self, name):
        path = self._data_path(name)
        if not str(path).startswith(inside):
            return load_data(self, name)
        try:
            fd = _open_private(root, path)
        except _UnsafeCacheFile as exc:
            warnings.warn(f"fp16emu: numba's cache: {exc}; not loaded, compiled again", RuntimeWarning, stacklevel=2)
            raise
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        return pickle.loads(data)

    files._load_index, files._load_data = _load_index, _load_data


#: whether compiled kernels are cached on disk (see :func:`_choose_cache`)
CACHE = _choose_cache()


def jit(*args):
    """``numba.njit`` with the project's fixed options; usable bare or called. Never parallel:
    kernels run in parallel through :func:`run_tasks`."""
    options = dict(cache=CACHE, fastmath=False, error_model="numpy", nogil=True)
    if args and callable(args[0]):
        return numba.njit(**options)(args[0])
    return numba.njit(**options)


def specialise(func, name: str, **names):
    """A separately compiled (and separately cached) copy of the plain Python function ``func``
    under the new name ``name``, with the global ``names`` bound as given: how one source gets a
    driver task per family kernel it calls. Each copy has its own qualified name, so numba's cache
    never mixes the copies up."""
    import types

    copy = types.FunctionType(func.__code__, {**func.__globals__, **names}, name, func.__defaults__)
    copy.__qualname__ = name
    copy.__doc__ = func.__doc__
    return jit(copy)


#: the end of "every task" for a kernel taking a task range (t0, t1): it runs tasks t0 … min(t1,
#: its task count) − 1
ALL_TASKS = 1 << 62

_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    """The process's worker threads for :func:`run_tasks` (made on first use, anew after a fork)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max(1, numba.config.NUMBA_NUM_THREADS - 1), thread_name_prefix="fp16emu-task")
        return _POOL


def _forget_pool() -> None:
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()  # a forked child has none of the parent's threads


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def run_tasks(call, n_tasks: int, parallel: bool = True) -> None:
    """Run ``call(t0, t1)`` over ``[0, n_tasks)`` cut into contiguous ranges, one per thread of
    ``numba.get_num_threads()`` (the calling thread runs the first): how the kernels run in
    parallel. Each ``call`` is a compiled serial function over its tasks (``nogil``, so the
    threads run at once), and each output belongs to exactly one task, so the results are the
    same for any thread count. A ``prange`` loop would do the same, but numba compiles a parallel
    copy of the loop for it (seconds per kernel and argument types, a third of a cold first
    call); here one serial compile serves the parallel and the serial uses. An exception in any
    range is raised here, after every range has ended. ``parallel=False`` runs ``call(0, n_tasks)``
    on the calling thread (a launch too small to gain from threads)."""
    n = min(numba.get_num_threads(), n_tasks) if parallel else 1
    if n <= 1:
        if n_tasks > 0:
            call(0, n_tasks)
        return
    bounds = [n_tasks * i // n for i in range(n + 1)]
    futures = [_pool().submit(call, bounds[i], bounds[i + 1]) for i in range(1, n)]
    try:
        call(bounds[0], bounds[1])
    finally:
        errors = [f.exception() for f in futures]
    for error in errors:
        if error is not None:
            raise error
