"""Reading the user's arrays safely for ``run --gpu-output``, ``run --inputs`` and ``compare``,
through the one checked loader of user files (:mod:`validation.files`: one open descriptor,
checked with ``fstat`` and read from, headers checked before allocation).

Accepted:

* ``FILE.npy``: numpy's format, read without pickles. The header is checked before anything is
  allocated: a malformed header, an object, structured or big-endian dtype, a type other than
  float16, float32, float64 or uint16 (fp16 bit patterns), or a header whose claimed data size
  exceeds the file's size is refused. ``compare`` also reads ``ml_dtypes.bfloat16`` arrays
  (``np.save`` writes them as plain 2-byte voids) and, when their format is given (``--dtype
  e4m3`` …), fp8 arrays (1-byte voids, or uint8 bit patterns): a 1-byte void does not say which
  of the four fp8 formats it holds.
* ``FILE.npz:KEY``: one array of an ``.npz`` (``FILE.npz`` alone when it holds a single array);
  the member's header is checked the same way.
* A raw binary dump (the bytes of the tensor in memory order, little-endian, as a GPU harness
  writes them with ``hipMemcpy`` and ``fwrite``) when its element format (``fp16``, ``fp32``,
  ``bf16``, or for ``compare`` an fp8 format) is given; its size must be that format's width times the number of elements. A dump
  whose first bytes happen to be an npz's or npy's magic is read as the dump it is when the
  container cannot be read and its size is exactly the tensor's in the given format.

Every refusal is an :class:`ArrayFileError` (a ``ValueError``) naming the file and what is
accepted; the command line prints it as one line with exit code 2. Empty files and non-regular
files (``/dev/null``, a directory, a pipe) are refused the same way.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from emu.formats import FP8_FORMATS, resolve_format
from emu.rounding import cast_rne, fp32_to_fp16

from ..files import NPY_MAGIC, ZIP_MAGIC, UserFileError, open_user_file, read_npy, read_npz
from ..metrics import resolve_dtype

__all__ = [
    "ArrayFileError",
    "LoadedArray",
    "ArrayPair",
    "load_array",
    "load_pair",
    "kernel_format",
    "RAW_FORMATS",
    "FP8_NAMES",
    "ACCEPTED",
    "parse_shape",
    "convert_exactly",
    "as_typed",
    "round_output",
]

#: the fp8 formats ``compare`` reads (their ml_dtypes types: e4m3fn, e5m2, e4m3fnuz, e5m2fnuz)
FP8_NAMES = tuple(f.short_name for f in FP8_FORMATS)
#: Element formats of a raw dump, and their numpy types.
RAW_FORMATS = {
    "fp16": np.dtype("<f2"),
    "fp32": np.dtype("<f4"),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    **{f.short_name: f.float_dtype for f in FP8_FORMATS},
}
#: What the loader accepts, for error messages.
ACCEPTED = (
    ".npy (float16, float32, float64, or uint16 fp16 bit patterns; compare also bfloat16, and fp8 with its "
    f"--dtype: {', '.join(FP8_NAMES)}), FILE.npz:KEY, or a raw little-endian dump with its format "
    "(fp16, fp32, bf16; compare also fp8) and the tensor's size"
)
_ALLOWED = {np.dtype("<f2"), np.dtype("<f4"), np.dtype("<f8"), np.dtype("<u2")}


class ArrayFileError(UserFileError):
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


#: the plain void dtype ``np.save`` writes for an ``ml_dtypes`` array (its bytes, no type)
_BF16_VOID = np.dtype("V2")
_FP8_VOID = np.dtype("V1")


def _dtype_refusal(dtype: np.dtype, bf16_void: bool = False, fp8: str | None = None) -> str | None:
    """Why a header's dtype is refused (None: accepted). ``bf16_void``: a plain 2-byte void
    (how ``np.save`` writes an ``ml_dtypes.bfloat16`` array) is accepted, read as bf16. ``fp8``:
    the fp8 format the caller was told the array holds; 1-byte voids and uint8 patterns are then
    accepted."""
    if dtype.names is not None or dtype.subdtype is not None:
        return f"has a structured dtype {dtype}"
    if dtype == _BF16_VOID and bf16_void:
        return None
    if dtype in (_FP8_VOID, np.dtype(np.uint8)) and fp8 is not None:
        return None
    if dtype == _FP8_VOID:
        if not bf16_void:
            return "has 1-byte void elements (an ml_dtypes float8 array?): this option reads no fp8 arrays"
        return f"has 1-byte void elements (an ml_dtypes float8 array?): give its format with --dtype ({', '.join(FP8_NAMES)})"
    if dtype.byteorder == ">" and dtype.itemsize > 1:
        return f"is big-endian ({dtype.str}); save it little-endian (arr.astype(arr.dtype.newbyteorder('<')))"
    if dtype.newbyteorder("<") not in _ALLOWED:
        return f"has dtype {dtype.name}"
    return None


def _native(a: np.ndarray) -> np.ndarray:
    return a.astype(a.dtype.newbyteorder("="), copy=False)


def _load_npz(
    what: str, path: str, fh, key: str | None, bf16_void: bool = False, fp8: str | None = None
) -> tuple[np.ndarray, str]:
    chosen = []

    def select(names: list[str]) -> set[str]:
        members = [n[:-4] for n in names if n.endswith(".npy")]
        if not members:
            raise _fail(what, path, "is a zip file with no .npy member")
        if key is None and len(members) != 1:
            raise ArrayFileError(
                f"{what}: {path!r} holds {len(members)} arrays ({', '.join(members)}); name one as {path}:KEY"
            )
        name = key if key is not None else members[0]
        if name not in members:
            raise ArrayFileError(f"{what}: {path!r} has no array {name!r}; it holds {', '.join(members)}")
        chosen.append(name)
        return {name}

    arrays = read_npz(
        fh,
        lambda why: _fail(what, path, why),
        check=lambda name, dtype: _dtype_refusal(dtype, bf16_void, fp8),
        select=select,
        member_fail=lambda name, why: _fail(what, f"{path}:{name}", why),
    )
    return _native(arrays[chosen[0]]), chosen[0]


def _load_raw(what: str, path: str, fh, size: int, fmt: str, count: int | None) -> np.ndarray:
    if fmt not in RAW_FORMATS:
        raise ArrayFileError(f"{what}: raw format {fmt!r} is not one of {', '.join(RAW_FORMATS)}")
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
    fh.seek(0)
    data = fh.read(size + 1)
    if len(data) != size:
        raise _fail(what, path, f"changed while read ({len(data)} bytes read, {size} expected)")
    return np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("="))


def load_array(
    spec: str,
    what: str,
    *,
    raw_format: str | None = None,
    count: int | None = None,
    raw_hint: str | None = None,
    bf16_void: bool = False,
    fp8: str | None = None,
) -> LoadedArray:
    """Read ``spec`` (``FILE.npy``, ``FILE.npz[:KEY]``, or a raw dump when ``raw_format`` is
    given; ``count``: the elements a raw dump must hold) as the module docstring says. ``what``
    names the option in messages (``--gpu-output``); ``raw_hint``: the options that describe a
    raw dump, named when a file is neither .npy nor .npz and no ``raw_format`` was given;
    ``bf16_void``: an .npy or .npz member of plain 2-byte voids (``np.save`` of an
    ``ml_dtypes.bfloat16`` array) is read as bfloat16; ``fp8``: the fp8 format (one of
    :data:`FP8_NAMES`) that 1-byte voids and uint8 bit patterns are read as."""
    spec = str(spec)
    path, key = spec, None
    if not os.path.exists(spec) and ":" in spec:
        head, _, tail = spec.rpartition(":")
        if os.path.exists(head):
            path, key = head, tail

    def fail(why):
        if why.startswith("does not exist"):
            return ArrayFileError(f"{what}: no such file {path!r}")
        return _fail(what, path, why)

    with open_user_file(path, what, fail=fail) as (fh, size):
        magic = fh.read(8)
        fh.seek(0)
        if key is not None and not magic.startswith(ZIP_MAGIC):
            raise _fail(what, path, f"is not an .npz file, so {':' + key!r} names no array")
        try:
            if magic.startswith(ZIP_MAGIC):
                a, key = _load_npz(what, path, fh, key, bf16_void, fp8)
                return LoadedArray(as_typed(a, fp8), path, key)
            if magic.startswith(NPY_MAGIC):
                check = lambda dtype: _dtype_refusal(dtype, bf16_void, fp8)  # noqa: E731
                a = read_npy(fh, size, lambda why: _fail(what, path, why), check=check)
                return LoadedArray(as_typed(_native(a), fp8), path)
        except ArrayFileError:
            # a raw dump whose first bytes happen to be an .npz or .npy magic: read as the format
            # given (only when its size is exactly the tensor's in that format)
            if not _raw_fits(raw_format, size, count) or key is not None:
                raise
        if raw_format is not None:
            return LoadedArray(_load_raw(what, path, fh, size, raw_format, count), path, raw_format=raw_format)
    raise _fail(
        what,
        path,
        "is neither .npy nor .npz (for a raw binary dump, give its element format"
        + (f", e.g. {raw_hint}" if raw_hint else "")
        + ")",
    )


def as_typed(a: np.ndarray, fp8: str | None = None) -> np.ndarray:
    """A plain 2-byte void array (an ``ml_dtypes.bfloat16`` array as ``np.save`` writes it) as
    bfloat16, a 1-byte void or uint8 array as the fp8 format ``fp8``; any other array as it is."""
    if a.dtype == _BF16_VOID:
        return a.view(ml_dtypes.bfloat16)
    if fp8 is not None and a.dtype in (_FP8_VOID, np.dtype(np.uint8)):
        return a.view(RAW_FORMATS[fp8])
    return a


def _raw_fits(fmt: str | None, size: int, count: int | None) -> bool:
    """Whether a file of ``size`` bytes is a raw dump of ``count`` elements of ``fmt``."""
    if fmt not in RAW_FORMATS or count is None:
        return False
    return size == count * RAW_FORMATS[fmt].itemsize


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
    opts = {"count": count, "raw_hint": _RAW_HINT, "bf16_void": True}
    v_fp8 = next((f for f in (validation_dtype, dtype) if f in FP8_NAMES), None)
    v = load_array(validation, "VALIDATION", raw_format=raw["VALIDATION"], fp8=v_fp8, **opts).array
    k_fp8 = dtype if dtype in FP8_NAMES else None
    k = load_array(kernel, "KERNEL", raw_format=raw["KERNEL"], fp8=k_fp8, **opts).array
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
    """``a`` as the kernel's format ``dtype`` (fp16, bf16, fp32 or an fp8 format) when every
    value is one of that format's values; else a ``ValueError`` naming the first element that is
    not."""
    target = resolve_format(dtype).float_dtype
    if a.dtype == target:
        return a
    t, i = convert_exactly(a, target)  # exact values convert exactly through any rounding
    if i is not None:
        raise ValueError(
            f"--dtype {dtype}: {what} element {i} = {np.float64(a.reshape(-1)[i])!r} is not a {dtype} value; give the "
            f"kernel's own output format ({', '.join(RAW_FORMATS)})"
        )
    return t


def round_output(values: np.ndarray, fmt: str) -> np.ndarray:
    """A kernel's fp32 results as it writes them in ``fmt``: fp16 (``v_cvt_f16_f32``) or bf16,
    each rounded once to nearest even, overflow to ±inf (the bf16 value through float64, which
    holds every float32 exactly: one rounding)."""
    if fmt == "fp16":
        return fp32_to_fp16(values)
    return cast_rne(np.asarray(values, np.float32).astype(np.float64), fmt)
