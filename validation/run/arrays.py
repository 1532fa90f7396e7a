"""Reading the user's arrays safely: one loader for ``run --gpu-output``, ``run --inputs`` and
``compare``.

Accepted:

* ``FILE.npy``: numpy's format, read without pickles. The header is checked before anything is
  allocated: a malformed header, an object, structured or big-endian dtype, a type other than
  float16, float32, float64 or uint16 (fp16 bit patterns), or a header whose claimed data size
  exceeds the file's size is refused.
* ``FILE.npz:KEY``: one array of an ``.npz`` (``FILE.npz`` alone when it holds a single array);
  the member's header is checked the same way.
* A raw binary dump (the bytes of the tensor in memory order, little-endian, as a GPU harness
  writes them with ``hipMemcpy`` and ``fwrite``) when its element format (``fp16``, ``fp32``,
  ``bf16``) is given; its size must be that format's width times the number of elements.

Every refusal is an :class:`ArrayFileError` (a ``ValueError``) naming the file and what is
accepted; the command line prints it as one line with exit code 2. Empty files and non-regular
files (``/dev/null``, a directory, a pipe) are refused the same way.
"""

from __future__ import annotations

import io
import math
import os
import stat
import struct
import tokenize
import zipfile
import zlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..metrics import resolve_dtype

__all__ = [
    "ArrayFileError",
    "LoadedArray",
    "ArrayPair",
    "load_array",
    "load_pair",
    "kernel_format",
    "RAW_FORMATS",
    "ACCEPTED",
    "parse_shape",
    "convert_exactly",
]

#: Element formats of a raw dump, and their numpy types.
RAW_FORMATS = {"fp16": np.dtype("<f2"), "fp32": np.dtype("<f4"), "bf16": None}  # bf16: ml_dtypes
#: What the loader accepts, for error messages.
ACCEPTED = (
    ".npy (float16, float32, float64, or uint16 fp16 bit patterns), FILE.npz:KEY, "
    "or a raw little-endian dump with its format (fp16, fp32, bf16) and the tensor's size"
)
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"
#: what zipfile, zlib and numpy raise on a damaged archive or member (none of them all ValueErrors)
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    NotImplementedError,
    RuntimeError,
    ValueError,
    struct.error,
    OverflowError,
)
_ALLOWED = {np.dtype("<f2"), np.dtype("<f4"), np.dtype("<f8"), np.dtype("<u2")}


class ArrayFileError(ValueError):
    """A file that is not an array this tool reads (the message names the file and what is accepted)."""


@dataclass(frozen=True)
class LoadedArray:
    """An array read from ``path`` (``key``: the .npz member; ``raw_format``: the raw dump's format)."""

    array: np.ndarray
    path: str
    key: str | None = None
    raw_format: str | None = None

    @property
    def source(self) -> str:
        if self.key is not None:
            return f"{self.path}:{self.key}"
        return self.path + (f" (raw {self.raw_format})" if self.raw_format else "")


def parse_shape(text: str, what: str = "--shape") -> tuple[int, ...]:
    """``"2,8,4,4"`` or ``"2x8x4x4"`` as a shape of positive integers."""
    parts = [p for p in str(text).replace("x", ",").split(",") if p.strip()]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise ArrayFileError(f"{what}: {text!r} is not a comma-separated list of positive integers") from None
    if not shape or any(s < 1 for s in shape):
        raise ArrayFileError(f"{what}: {text!r} is not a comma-separated list of positive integers")
    return shape


def _fail(what: str, path: str, why: str) -> ArrayFileError:
    return ArrayFileError(f"{what}: {path!r} {why}; accepted: {ACCEPTED}")


def _regular_size(what: str, path: str) -> int:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ArrayFileError(f"{what}: no such file {path!r}") from None
    except OSError as err:
        raise ArrayFileError(f"{what}: cannot read {path!r} ({err.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise _fail(what, path, f"is {kind}")
    if st.st_size == 0:
        raise _fail(what, path, "is empty (0 bytes)")
    return st.st_size


def _check_dtype(what: str, path: str, dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise _fail(what, path, "holds Python objects (a pickle), which are never loaded")
    if dtype.names is not None or dtype.subdtype is not None:
        raise _fail(what, path, f"has a structured dtype {dtype}")
    if dtype.byteorder == ">" and dtype.itemsize > 1:
        raise _fail(
            what, path, f"is big-endian ({dtype.str}); save it little-endian (arr.astype(arr.dtype.newbyteorder('<')))"
        )
    if dtype.newbyteorder("<") not in _ALLOWED:
        raise _fail(what, path, f"has dtype {dtype.name}")


def _read_header(fh, what: str, path: str):
    """(shape, fortran_order, dtype, data offset) of an .npy stream, checked."""
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except (ValueError, OSError, SyntaxError, TypeError, tokenize.TokenError, RecursionError, MemoryError) as err:
        # numpy tokenizes and literal_evals the header dict: an unbalanced bracket is a TokenError,
        # a deeply nested one a RecursionError or MemoryError, none of them a ValueError
        raise _fail(what, path, f"has a malformed .npy header ({' '.join(str(err).split())[:120]})") from None
    return shape, fortran, dtype, fh.tell()


def _count(what: str, path: str, shape: tuple) -> int:
    """The elements a header's shape claims, in Python integers (no int64 wrap-around)."""
    if any(d < 0 for d in shape):
        raise _fail(what, path, f"has a .npy header with a negative dimension {shape}")
    return math.prod(shape)


def _load_npy(what: str, path: str, size: int) -> np.ndarray:
    with open(path, "rb") as fh:
        shape, fortran, dtype, offset = _read_header(fh, what, path)
    _check_dtype(what, path, dtype)
    n = _count(what, path, shape)
    need = offset + n * dtype.itemsize
    if need > size:
        raise _fail(
            what,
            path,
            f"is truncated: its header claims {n} elements of {dtype.name} ({need} bytes), the file has {size}",
        )
    try:
        a = np.load(path, allow_pickle=False)
    except (ValueError, OSError, TypeError) as err:  # a header numpy itself cannot parse (fuzz)
        raise _fail(what, path, f"cannot be read ({' '.join(str(err).split())[:120]})") from None
    return a.astype(dtype.newbyteorder("="), copy=False)


def _load_npz(what: str, path: str, key: str | None) -> tuple[np.ndarray, str]:
    try:
        zf = zipfile.ZipFile(path)
    except _ZIP_ERRORS as err:
        raise _fail(what, path, f"is not a readable .npz ({' '.join(str(err).split())[:120]})") from None
    with zf:
        members = {n[:-4]: n for n in zf.namelist() if n.endswith(".npy")}
        if not members:
            raise _fail(what, path, "is a zip file with no .npy member")
        if key is None:
            if len(members) != 1:
                raise ArrayFileError(
                    f"{what}: {path!r} holds {len(members)} arrays ({', '.join(members)}); name one as {path}:KEY"
                )
            key = next(iter(members))
        if key not in members:
            raise ArrayFileError(f"{what}: {path!r} has no array {key!r}; it holds {', '.join(members)}")
        info = zf.getinfo(members[key])
        member = f"{path}:{key}"
        try:
            with zf.open(info) as fh:
                head = fh.read(1 << 16)
            bio = io.BytesIO(head)
            shape, _, dtype, offset = _read_header(bio, what, member)
            _check_dtype(what, member, dtype)
            n = _count(what, member, shape)
            if offset + n * dtype.itemsize > info.file_size:
                raise _fail(what, member, f"is truncated: its header claims {n} elements of {dtype.name}")
            with zf.open(info) as fh:
                a = np.lib.format.read_array(fh, allow_pickle=False)
        except ArrayFileError:
            raise
        except _ZIP_ERRORS as err:  # a damaged member: bad CRC, bad deflate data, a cut-short stream
            raise _fail(what, member, f"cannot be read from the archive ({' '.join(str(err).split())[:120]})") from None
    return a.astype(dtype.newbyteorder("="), copy=False), key


def _load_raw(what: str, path: str, size: int, fmt: str, count: int | None) -> np.ndarray:
    if fmt not in RAW_FORMATS:
        raise ArrayFileError(f"{what}: raw format {fmt!r} is not one of {', '.join(RAW_FORMATS)}")
    if fmt == "bf16":
        dtype = np.dtype(ml_dtypes.bfloat16)
    else:
        dtype = RAW_FORMATS[fmt]
    if size % dtype.itemsize:
        raise _fail(what, path, f"has {size} bytes, not a whole number of {fmt} elements ({dtype.itemsize} bytes each)")
    if count is not None and size != count * dtype.itemsize:
        raise _fail(
            what,
            path,
            f"has {size} bytes = {size // dtype.itemsize} {fmt} elements; the tensor has {count} "
            f"({count * dtype.itemsize} bytes)",
        )
    return np.fromfile(path, dtype=dtype).astype(dtype.newbyteorder("="), copy=False)


def load_array(
    spec: str,
    what: str,
    *,
    raw_format: str | None = None,
    count: int | None = None,
    raw_hint: str | None = None,
) -> LoadedArray:
    """Read ``spec`` (``FILE.npy``, ``FILE.npz[:KEY]``, or a raw dump when ``raw_format`` is
    given; ``count``: the elements a raw dump must hold) as the module docstring says. ``what``
    names the option in messages (``--gpu-output``); ``raw_hint``: the options that describe a
    raw dump, named when a file is neither .npy nor .npz and no ``raw_format`` was given."""
    spec = str(spec)
    path, key = spec, None
    if not os.path.exists(spec) and ":" in spec:
        head, _, tail = spec.rpartition(":")
        if os.path.exists(head):
            path, key = head, tail
    size = _regular_size(what, path)
    with open(path, "rb") as fh:
        magic = fh.read(8)
    if magic.startswith(_ZIP_MAGIC):
        a, key = _load_npz(what, path, key)
        return LoadedArray(a, path, key)
    if key is not None:
        raise _fail(what, path, f"is not an .npz file, so {':' + key!r} names no array")
    if magic.startswith(_NPY_MAGIC):
        return LoadedArray(_load_npy(what, path, size), path)
    if raw_format is not None:
        return LoadedArray(_load_raw(what, path, size, raw_format, count), path, raw_format=raw_format)
    raise _fail(
        what,
        path,
        "is neither .npy nor .npz (for a raw binary dump, give its element format"
        + (f", e.g. {raw_hint}" if raw_hint else "")
        + ")",
    )


def convert_exactly(a: np.ndarray, target) -> tuple[np.ndarray, int | None]:
    """``a`` converted to the dtype ``target``, and the flat index of the first element that is
    not a ``target`` value (the conversion changed it; NaN stays NaN), or None where none is."""
    with np.errstate(over="ignore", invalid="ignore"):
        t = a.astype(target)
    back = t.astype(a.dtype)
    same = (back == a) | (np.isnan(back) & np.isnan(a))
    return t, (None if np.all(same) else int(np.flatnonzero(~same.reshape(-1))[0]))


@dataclass(frozen=True)
class ArrayPair:
    """A validation array and a kernel array read for comparison, in one shape: ``dtype`` is the
    kernel's format (given, or its array's type: ``dtype_given``); ``warnings`` what the reading
    noticed."""

    validation: np.ndarray
    kernel: np.ndarray
    dtype: str
    dtype_given: bool
    warnings: tuple[str, ...] = ()


_RAW_HINT = "--dtype fp16 --shape N,C,H,W, with --validation-dtype fp32 for an fp32 validation dump"


def load_pair(
    validation: str,
    kernel: str,
    *,
    dtype: str | None = None,
    validation_dtype: str | None = None,
    shape: str | None = None,
) -> ArrayPair:
    """Read the two arrays of ``fp16emu compare``: files as :func:`load_array` reads them (a raw dump
    needs its element format ``dtype``, or ``validation_dtype`` for the validation, and ``shape``
    its size), brought to one shape (``shape``; or a flat array to the other's shape), uint16 read as
    fp16 patterns, the kernel in its format ``dtype`` when every value is one of that format's."""
    dims = parse_shape(shape) if shape is not None else None
    count = math.prod(dims) if dims is not None else None
    raw = {  # a file that is neither .npy nor .npz is a raw dump: its format and --shape must be given
        "VALIDATION": (validation_dtype or dtype) if dims is not None else None,
        "KERNEL": dtype if dims is not None else None,
    }
    if validation_dtype is not None and dtype is None:
        raise ValueError("--validation-dtype: give the kernel's --dtype too")
    v = load_array(validation, "VALIDATION", raw_format=raw["VALIDATION"], count=count, raw_hint=_RAW_HINT).array
    k = load_array(kernel, "KERNEL", raw_format=raw["KERNEL"], count=count, raw_hint=_RAW_HINT).array
    if dims is not None:
        for name, a in (("VALIDATION", v), ("KERNEL", k)):
            if a.size != count:
                raise ValueError(f"--shape {shape}: {name} has {a.size} elements, the shape {count}")
        v, k = v.reshape(dims), k.reshape(dims)
    elif v.shape != k.shape:
        if v.size == k.size and (v.ndim == 1 or k.ndim == 1):
            same = k.shape if v.ndim == 1 else v.shape
            v, k = v.reshape(same), k.reshape(same)
        else:
            raise ValueError(f"arrays: shapes differ, {v.shape} vs {k.shape} (give --shape for flat dumps)")
    warnings: list[str] = []
    if k.dtype == np.uint16:
        k = k.view(np.float16)
    if v.dtype == np.uint16:
        v = v.view(np.float16)
    if dtype is not None:
        k = kernel_format(k, dtype, "KERNEL")
        fmt = dtype
    else:
        fmt = resolve_dtype(k.dtype)
        if k.dtype.itemsize > 2 and convert_exactly(k, np.float16)[1] is None:
            warnings.append(
                f"KERNEL is {fmt} but every value is an fp16 value: if the kernel wrote fp16, give --dtype fp16 "
                f"(judged in {fmt} ulps now)"
            )
    return ArrayPair(v, k, fmt, dtype is not None, tuple(warnings))


def kernel_format(a: np.ndarray, dtype: str, what: str) -> np.ndarray:
    """``a`` as the kernel's format ``dtype`` (fp16, bf16 or fp32) when every value is one of that
    format's values; else a ``ValueError`` naming the first element that is not."""
    target = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}[dtype]
    if a.dtype == np.dtype(target):
        return a
    t, i = convert_exactly(a, target)
    if i is not None:
        raise ValueError(
            f"--dtype {dtype}: {what} element {i} = {np.float64(a.reshape(-1)[i])!r} is not a {dtype} value; give the "
            f"kernel's own output format (fp16, bf16 or fp32)"
        )
    return t
