"""The user's files, read and written safely.

Reading (:func:`open_user_file`, :func:`read_npy`, :func:`read_npz`, :func:`read_text`): the one
checked loader of every file a user hands in (``run --gpu-output``/``--inputs``, ``compare``,
``identify``'s rows, library captures, probe files). A file is opened once, without blocking
(``O_NONBLOCK``: a FIFO never hangs), checked with ``fstat`` on that same descriptor (a regular
file, not empty, not over the size limit) and read from that descriptor only, so a file swapped
or replaced after the check is never read unchecked. ``.npy`` headers, and every ``.npz``
member's header, are checked before anything is allocated: no pickles, the dtype the caller
accepts, a declared size within the file (or the archive's declared member size, itself within
deflate's largest ratio of the stored bytes) and within the memory limit
(:func:`validation.configs.limits.memory_limit`); two members of one name are refused. Every
refusal is a ``ValueError`` (:class:`UserFileError` unless the caller asks for its own kind).

Writing (:func:`write_atomically`, :func:`write_files_atomically`, :func:`check_output_file`):
the one writer of every output. A temporary file of a random name, made exclusively in the
target's folder with the user's umask, then renamed over the target: never through a link,
never onto something that is not a regular file (a FIFO is never opened), the folder checked
before any work, and the files of one output written all before any is renamed."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import secrets
import stat
import struct
import tokenize
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

__all__ = [
    "check_output_file",
    "write_atomically",
    "write_files_atomically",
    "append_text",
    "UserFileError",
    "open_user_file",
    "read_npy",
    "read_npz",
    "read_text",
    "read_json",
    "parse_json",
    "json_depth",
    "MAX_JSON_DEPTH",
    "load_npz_file",
    "ZIP_ERRORS",
    "NPY_MAGIC",
    "ZIP_MAGIC",
    "DEFLATE_MAX_RATIO",
]

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
#: deflate cannot expand data more than about 1032 times; a member claiming more is a lie
DEFLATE_MAX_RATIO = 1100
#: what zipfile, zlib and numpy raise on a damaged archive or member (not all of them ValueErrors)
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    NotImplementedError,
    RuntimeError,
    ValueError,
    struct.error,
    OverflowError,
    KeyError,
)


class UserFileError(ValueError):
    """A file handed in that cannot be read (one line naming the file and why)."""


def _short(err) -> str:
    return " ".join(str(err).split())[:120]


def _default_fail(what: str, path) -> Callable[[str], Exception]:
    return lambda why: UserFileError(f"{what}: {str(path)!r} {why}")


@contextlib.contextmanager
def open_user_file(
    path, what: str, *, max_bytes: int | None = None, follow_links: bool = True, fail=None, allow_empty=False
) -> Iterator[tuple]:
    """``(binary file object, size)`` of the regular file ``path``, opened once without blocking
    and checked on that descriptor: not a FIFO, device or folder, not empty (unless
    ``allow_empty``), at most ``max_bytes``; ``follow_links`` False refuses a symbolic link
    (``O_NOFOLLOW``). ``fail(why)`` makes the exception raised (default :class:`UserFileError`
    naming ``what`` and the path)."""
    fail = fail or _default_fail(what, path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise fail("does not exist (no such file)") from None
    except OSError as err:
        if not follow_links and os.path.islink(path):
            raise fail("is a symbolic link, which is not followed") from None
        raise fail(f"cannot be opened ({err.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISCHR: "a device"}
            name = next((v for k, v in kind.items() if k(st.st_mode)), "not a regular file")
            raise fail(f"is {name}, not a regular file")
        if st.st_size == 0 and not allow_empty:
            raise fail("is empty (0 bytes)")
        if max_bytes is not None and st.st_size > max_bytes:
            raise fail(f"is {st.st_size} bytes, over the limit of {max_bytes} bytes")
        with contextlib.suppress(AttributeError, OSError):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    try:
        yield io.BufferedReader(fh), st.st_size
    finally:
        fh.close()


def read_text(path, what: str, *, max_bytes: int = 1 << 30, fail=None) -> str:
    """The UTF-8 text of the regular file ``path`` (:func:`open_user_file`'s checks; may be empty)."""
    fail = fail or _default_fail(what, path)
    with open_user_file(path, what, max_bytes=max_bytes, fail=fail, allow_empty=True) as (fh, _):
        data = fh.read(max_bytes + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise fail(f"is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None


#: a JSON string literal (escapes included): skipped when brackets are counted
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
#: the deepest nesting a JSON input may have (a plan, a validators file: a few levels)
MAX_JSON_DEPTH = 64


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in the JSON ``text``, counted in linear time without
    parsing (brackets inside strings skipped), so a 100,000-deep document is measured, not
    recursed into."""
    depth = deepest = 0
    for c in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if c in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _no_constant(word):
    raise ValueError(f"{word} is not a JSON number (give a finite number)")


def parse_json(text: str, what: str, *, max_depth: int = MAX_JSON_DEPTH, fail=None):
    """The JSON value of ``text``, checked: nested at most ``max_depth`` deep (measured before
    parsing: no RecursionError), no ``NaN``/``Infinity`` (not JSON); every refusal one
    :class:`UserFileError` (or ``fail(why)``) naming ``what``."""
    fail = fail or (lambda why: UserFileError(f"{what}: {why}"))
    if not isinstance(text, str):
        raise fail(f"expected JSON text, got {type(text).__name__}")
    depth = json_depth(text)
    if depth > max_depth:
        raise fail(f"is nested {depth} levels deep, over the limit of {max_depth}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as err:  # JSONDecodeError is a ValueError
        raise fail(f"is not valid JSON ({_short(err)})") from None


def read_json(path, what: str, *, max_bytes: int = 1 << 20, max_depth: int = MAX_JSON_DEPTH, fail=None):
    """The JSON value of the regular file ``path`` through the checked loader: opened once without
    blocking (a FIFO or a device is refused, never read), at most ``max_bytes`` (default 1 MiB),
    UTF-8, nested at most ``max_depth`` deep, no ``NaN``/``Infinity``. Every refusal is one
    :class:`UserFileError` (or ``fail(why)``) naming ``what`` and the path; the numbers inside
    are the caller's to range-check."""
    fail = fail or _default_fail(what, path)
    text = read_text(path, what, max_bytes=max_bytes, fail=fail)
    if not text.strip():
        raise fail("is empty (no JSON value)")
    return parse_json(text, what, max_depth=max_depth, fail=fail)


def _limit(limit: int | None) -> int:
    if limit is not None:
        return limit
    from .configs.limits import memory_limit

    return memory_limit()[0]


#: np.save writes ml_dtypes.float8_e5m2 (a kind-"f" type) as "<f1", which numpy cannot read
#: back; it is read as what the other fp8 types write, plain 1-byte voids (same length)
_FP8_DESCR = (b"'descr': '<f1'", b"'descr': '|V1'")


def _read_header(fh):
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    if version in ((2, 0), (3, 0)):
        return np.lib.format.read_array_header_2_0(fh)
    raise ValueError(f"unknown .npy version {version}")


def npy_header(fh, fail) -> tuple:
    """(shape, fortran_order, dtype, element count) of an .npy stream at its start, checked:
    a header numpy can parse, no Python objects, no negative dimension (counted in Python
    integers: no int64 wrap-around). A 1-byte ``"<f1"`` (``np.save`` of an
    ``ml_dtypes.float8_e5m2`` array) is read as a 1-byte void, as the other fp8 types are saved."""
    start = fh.tell()
    try:
        try:
            shape, fortran, dtype = _read_header(fh)
        except ValueError as first:
            if "'<f1'" not in str(first):
                raise
            fh.seek(start)
            head = fh.read(12)
            prefix = 10 if head[6:7] == b"\x01" else 12  # version 1.0: a 2-byte header length, else 4
            length = int.from_bytes(head[8:prefix], "little")
            fh.seek(start)
            raw = fh.read(prefix + min(length, 1 << 16)).replace(*_FP8_DESCR)
            stream = io.BytesIO(raw)
            shape, fortran, dtype = _read_header(stream)
            fh.seek(start + stream.tell())
    except (ValueError, OSError, SyntaxError, TypeError, tokenize.TokenError, RecursionError, MemoryError) as err:
        # numpy tokenizes and literal_evals the header dict: an unbalanced bracket is a TokenError,
        # a deeply nested one a RecursionError or MemoryError, none of them a ValueError
        raise fail(f"has a malformed .npy header ({_short(err)})") from None
    if dtype.hasobject:
        raise fail("holds Python objects (pickles are never loaded)")
    if any(d < 0 for d in shape):
        raise fail(f"has a .npy header with a negative dimension {shape}")
    return shape, fortran, dtype, math.prod(shape)


def _claim(fail, n: int, dtype, have: int, limit: int, where: str) -> None:
    need = n * dtype.itemsize
    if need > have:
        raise fail(f"is truncated: its header claims {n} elements of {dtype.name} ({need} bytes), {where} {have}")
    if need > limit:
        raise fail(
            f"claims {n} elements of {dtype.name} ({need} bytes), over the memory limit of {limit} bytes "
            "(FP16EMU_MAX_MEMORY_GIB, ulimit -v)"
        )


def _read_body(stream, start: int, shape, fortran: bool, dtype, n: int) -> np.ndarray:
    """The array after a header :func:`npy_header` read (``stream`` just past it): numpy's reader
    from ``start``, except for 1-byte voids (fp8 arrays; a "<f1" header numpy cannot read), whose
    ``n`` bytes are read here."""
    if dtype != np.dtype("V1"):
        stream.seek(start)
        return np.lib.format.read_array(stream, allow_pickle=False)
    data = stream.read(n)
    if len(data) != n:
        raise ValueError(f"{len(data)} bytes of data, the header claims {n}")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C").copy()


def read_npy(fh, size: int, fail, check=None, limit: int | None = None) -> np.ndarray:
    """The array of the .npy file open as ``fh`` (``size`` bytes, from :func:`open_user_file`),
    its header checked (:func:`npy_header`, then ``check(dtype)``: a reason to refuse, or None)
    and its claimed size against the file and ``limit`` bytes before anything is allocated; read
    from ``fh`` itself."""
    start = fh.tell()
    shape, fortran, dtype, n = npy_header(fh, fail)
    why = check(dtype) if check is not None else None
    if why:
        raise fail(why)
    _claim(fail, n, dtype, size - fh.tell(), _limit(limit), "the file has")
    try:
        return _read_body(fh, start, shape, fortran, dtype, n)
    except (ValueError, OSError, TypeError, EOFError) as err:  # changed while read, or numpy disagrees
        raise fail(f"cannot be read ({_short(err)})") from None


def read_npz(fh, fail, *, check=None, select=None, limit: int | None = None, member_fail=None) -> dict[str, np.ndarray]:
    """The arrays of the .npz open as ``fh`` ({name without .npy: array}; ``select(file names)``:
    the names to read, or raise), each member's header checked before anything is allocated
    (:func:`npy_header`, ``check(name, dtype)``: a reason to refuse or None, the size the archive
    declares for it, deflate's largest ratio, and the members' total against ``limit`` bytes). ``fail(why)`` makes the exception; a damaged
    archive or member, or two members of one name, is refused; ``member_fail(name, why)`` makes
    the exception about one member (default: ``fail`` naming it)."""
    limit = _limit(limit)
    try:
        zf = zipfile.ZipFile(fh)
    except ZIP_ERRORS as err:
        raise fail(f"is not a readable .npz ({_short(err)})") from None
    out: dict[str, np.ndarray] = {}
    with zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):  # counted once each, in linear time
            twice = sorted(n for n, c in Counter(names).items() if c > 1)
            raise fail(f"holds two members of one name ({', '.join(twice)[:80]}): which one is meant is unclear")
        wanted = select(names) if select is not None else None
        total = 0
        for info in infos:
            name = info.filename.removesuffix(".npy")
            if wanted is not None and name not in wanted:
                continue
            if not info.filename.endswith(".npy"):
                raise fail(f"holds a member {info.filename!r} that is not an .npy array")

            def mfail(why, name=name):
                err = member_fail(name, why) if member_fail else fail(f"member {name!r} {why}")
                err.checked = True  # raised by the checks, not by zipfile: passed on as it is
                return err

            if info.compress_type != zipfile.ZIP_STORED and info.file_size > DEFLATE_MAX_RATIO * (
                info.compress_size + 64
            ):
                raise mfail(
                    f"declares {info.file_size} bytes from {info.compress_size} compressed ones, more than "
                    "compression can give: a damaged or crafted archive"
                )
            try:
                with zf.open(info) as member:
                    shape, fortran, dtype, n = npy_header(member, mfail)
                    why = check(name, dtype) if check is not None else None
                    if why:
                        raise mfail(why)
                    _claim(mfail, n, dtype, info.file_size - member.tell(), limit - total, "the archive declares")
                    total += n * dtype.itemsize
                    out[name] = _read_body(member, 0, shape, fortran, dtype, n)
            except ZIP_ERRORS as err:
                if getattr(err, "checked", False):
                    raise  # a damaged member: bad CRC, bad deflate data, a cut-short stream
                raise mfail(f"cannot be read from the archive ({_short(err)})") from None
    return out


_KINDS = {
    stat.S_ISDIR: "a folder",
    stat.S_ISFIFO: "a FIFO (named pipe)",
    stat.S_ISCHR: "a device",
    stat.S_ISBLK: "a device",
}


def _temporary(path: Path) -> tuple[int, str]:
    """(descriptor, name) of a new temporary file beside ``path``: a random name, made
    exclusively (``O_EXCL``, ``O_NOFOLLOW``: never an existing file or link), its mode the
    user's umask applied to 0666 (what ``open(path, "w")`` would give)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = str(path.parent / f".{path.name[:80]}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def check_output_file(path, option: str = "output") -> Path:
    """``path`` as a file :func:`write_atomically` can write, checked before any work: a name
    that is missing, a regular file or a link (replaced, never followed), in a folder that exists
    and takes a new file (tried: a temporary file is made and removed). ValueError naming
    ``option`` otherwise (a folder, FIFO or device at the name, a missing or read-only folder)."""
    if path is None or not str(path).strip():
        raise ValueError(f"{option}: give a file name (got an empty path)")
    path = Path(path)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as err:  # a folder on the way this user cannot search, a name too long
        raise ValueError(f"{option}: {str(path)!r} cannot be written ({err.strerror})") from None
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        kind = next((v for k, v in _KINDS.items() if k(st.st_mode)), "not a regular file")
        raise ValueError(f"{option}: {str(path)!r} is not a regular file ({kind}); give a file name")
    parent = path.parent
    if not parent.is_dir():
        why = "is not a folder" if os.path.lexists(parent) else "does not exist"
        raise ValueError(f"{option}: the folder {str(parent)!r} {why}")
    try:
        fd, tmp = _temporary(path)
    except OSError as err:
        raise ValueError(f"{option}: the folder {str(parent)!r} is not writable ({err.strerror})") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return path


def write_atomically(path, write: Callable, option: str = "output") -> Path:
    """Write ``path`` through ``write(binary file object)``: into a temporary file beside it
    (:func:`write_files_atomically`), then renamed over it, so a failed or cut-short write (a
    full disk, ``ulimit -f``) leaves the old file intact and a link at ``path`` is replaced, not
    followed (a dangling one creates nothing where it points). ValueError naming ``option`` when
    ``path`` is empty, lies in a folder that does not exist or cannot be written, or is a device,
    a folder or a FIFO (``/dev/null`` included); the write's own OSError otherwise."""
    return write_files_atomically({path: write}, option)[0]


def write_files_atomically(files: dict, option: str = "output") -> list[Path]:
    """Write every ``{path: write}`` as :func:`write_atomically` does, all or none: each into its
    own temporary file first, and only when all of them are complete, each renamed over its
    target; a refusal or a failed write leaves every target as it was. The one writer of every
    output file (plots, saves, reports, probe files, study logs and cache entries)."""
    paths = [check_output_file(p, option) for p in files]
    temps: list[str] = []
    try:
        for path, write in zip(paths, files.values()):
            try:
                fd, tmp = _temporary(path)
            except OSError as err:
                raise ValueError(f"{option}: cannot write in {str(path.parent)!r} ({err.strerror})") from None
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                write(fh)
        for path in paths:  # checked again: something put at a name while the files were written
            check_output_file(path, option)
        for path, tmp in zip(paths, list(temps)):
            os.replace(tmp, path)
            temps.remove(tmp)
    finally:
        for tmp in temps:  # not renamed: removed
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return paths


def append_text(path, text: str, option: str = "output") -> None:
    """Append ``text`` to the log file ``path`` (created with the user's umask when missing):
    opened without following a link and without blocking, and written only when that
    descriptor is a regular file. ValueError naming ``option`` for a link, FIFO, folder or
    device at ``path``; the write's own OSError otherwise (a full disk, ``ulimit -f``)."""

    def refuse(st):
        if not stat.S_ISREG(st.st_mode):
            kind = next((v for k, v in _KINDS.items() if k(st.st_mode)), "a symbolic link (not followed)")
            raise ValueError(f"{option}: {str(path)!r} is not a regular file ({kind})")

    with contextlib.suppress(FileNotFoundError):
        refuse(os.lstat(path))
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as err:
        raise ValueError(f"{option}: cannot append to {str(path)!r} ({err.strerror})") from None
    with os.fdopen(fd, "ab") as fh:
        refuse(os.fstat(fd))  # what was opened, whatever the name held a moment before
        fh.write(text.encode("utf-8"))


def load_npz_file(
    path, what: str, *, fail=None, check=None, limit: int | None = None, max_bytes=None, member_fail=None
):
    """Every array of the ``.npz`` file ``path`` ({name: array}): :func:`open_user_file`, then
    :func:`read_npz` on that descriptor; a file that is not a zip archive is refused."""
    fail = fail or _default_fail(what, path)
    with open_user_file(path, what, max_bytes=max_bytes, fail=fail) as (fh, _):
        head = fh.read(len(ZIP_MAGIC))
        if head != ZIP_MAGIC:
            why = "is a single .npy array" if head == NPY_MAGIC[: len(head)] and head else "is not a zip archive"
            raise fail(f"cannot read as .npz ({why})")
        fh.seek(0)
        return read_npz(fh, fail, check=check, limit=limit, member_fail=member_fail)
