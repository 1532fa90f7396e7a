"""Reading measured dot products for identification: :class:`Rows` and :func:`load_rows`.

Inputs (:func:`load_rows`): a probe-output ``.npz`` (a, b (R, K) bit patterns of its operand
format, named by its ``input`` entry (fp16 when absent): uint16 for fp16 and bf16, uint32 for
tf32, uint8 for fp8; c (R,) uint32, or uint16 for an fp16 accumulator; d (R,) uint32, or uint16
for fp16 outputs), a CSV of rows (columns a, b: K space-separated hex words; c, d: hex or
32-character binary words), or a directory in the layout of
north-numerical-computing/MATLAB-tensor-core ``model_validation/`` (a_*.txt, b_*.txt,
c_*_fp32.txt, d_*_fp32.txt and d_*_fp16.txt; for fp16 outputs C is rounded to fp16 with RNE
first, as those measurements did on the GPU). CSV and directory words of a and b may be fp32
patterns of the format's values (as MATLAB-tensor-core writes fp16 and bf16 operands).
"""

from __future__ import annotations

import csv
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from emu.operands import input_name, value_dtype
from emu.units import Format

from ..files import load_npz_file, read_text
from .probes import FP16_ACCUMULATOR_INPUTS, INSTRUCTION_K, file_input, pattern_dtype

__all__ = ["Rows", "load_rows"]


@dataclass(frozen=True)
class Rows:
    """Measured dot products: row i is ``d[i] = c[i] + Σ_k a[i,k]·b[i,k]``.

    ``a``, ``b``: (R, K) bit patterns of the operand format ``input_format`` (uint16 for fp16
    and bf16, uint32 for tf32, uint8 for fp8); ``c``: (R,) uint32 fp32 patterns (uint16 fp16
    patterns for an fp16 accumulator); ``d``: (R,) uint32 (uint16 for fp16 outputs);
    ``source``: where they came from; ``notes``: conversions made while reading;
    ``input_format``: the operand format's name (fp16, bf16, tf32, e4m3, e5m2, e4m3fnuz,
    e5m2fnuz)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    source: str = ""
    notes: tuple[str, ...] = ()
    input_format: str = "fp16"

    def __post_init__(self):
        a, b, c, d = self.a, self.b, self.c, self.d
        for name, v in (("a", a), ("b", b), ("c", c), ("d", d)):
            if not isinstance(v, np.ndarray):
                raise TypeError(f"Rows: {name} must be a numpy array of bit patterns, got {type(v).__name__}")
        try:
            fmt = input_name(self.input_format)
        except ValueError:
            raise ValueError(f"input_format: {self.input_format!r} is not one of {', '.join(INSTRUCTION_K)}") from None
        object.__setattr__(self, "input_format", fmt)
        want = pattern_dtype(fmt)
        if a.dtype != want or b.dtype != want or a.ndim != 2 or a.shape != b.shape:
            raise ValueError(
                f"a, b: expected two (R, K) {want} arrays of one shape ({fmt} bit patterns), "
                f"got {a.shape} {a.dtype}, {b.shape} {b.dtype}"
            )
        R = a.shape[0]
        if d.dtype not in (np.uint32, np.uint16) or d.shape != (R,):
            raise ValueError(
                f"d: expected ({R},) uint32 (fp32 outputs) or uint16 (fp16 outputs), got {d.shape} {d.dtype}"
            )
        want = np.uint16 if d.dtype == np.uint16 else np.uint32
        if c.dtype != want or c.shape != (R,):
            raise ValueError(
                f"c: expected ({R},) {np.dtype(want).name} (the accumulator of "
                f"{'fp16' if want == np.uint16 else 'fp32'} outputs), got {c.shape} {c.dtype}"
            )
        if a.shape[1] < 1:
            raise ValueError("a, b: K must be at least 1")
        if R < 1:
            raise ValueError("rows: no rows to identify from")

    def __len__(self) -> int:
        return self.a.shape[0]

    @property
    def k(self) -> int:
        return self.a.shape[1]

    @property
    def output_format(self) -> Format:
        return Format.FP16 if self.d.dtype == np.uint16 else Format.FP32

    def take(self, rows) -> Rows:
        return Rows(self.a[rows], self.b[rows], self.c[rows], self.d[rows], self.source, self.notes, self.input_format)


# --- reading results ----------------------------------------------------------------------------


def _words(text: str, what: str, path) -> list[int]:
    """The words of ``text``: hex, or 32-character binary; each a bit pattern of at most 32 bits
    (no sign: ``-1`` is refused, and so is a wider word, never cut)."""
    out = []
    for w in text.split():
        try:
            if w.startswith(("-", "+")) or "_" in w:
                raise ValueError
            out.append(int(w, 2) if len(w) == 32 and set(w) <= {"0", "1"} else int(w, 16))
        except ValueError:
            raise ValueError(f"{path}: {what}: {w[:40]!r} is not a hex or 32-bit binary word") from None
        if out[-1] > 0xFFFFFFFF:
            raise ValueError(f"{path}: {what}: {w[:40]!r} is wider than 32 bits (an fp16 or fp32 bit pattern)")
    return out


def _fp16_from_words(words: np.ndarray, what: str, path, fp32: bool | None = None) -> np.ndarray:
    """uint16 fp16 patterns from words that are fp16 patterns or fp32 patterns of fp16 values
    (as the MATLAB-tensor-core files write them). ``fp32`` None: fp32 patterns when any word
    exceeds 0xffff (every non-zero fp16 value's fp32 pattern does, and so does −0)."""
    words = np.asarray(words, np.uint64)
    if fp32 is None:
        fp32 = bool(words.size) and int(words.max()) > 0xFFFF
    if not fp32:
        return words.astype(np.uint16)
    if words.size and int(words.max()) > 0xFFFFFFFF:
        raise ValueError(f"{path}: {what}: a word is wider than 32 bits")
    as32 = words.astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        as16 = as32.astype(np.float16)
    if not np.array_equal(as16.astype(np.float32).view(np.uint32), words.astype(np.uint32)):
        raise ValueError(f"{path}: {what}: a value is not an fp16 value")
    return as16.view(np.uint16)


def _operand_from_words(words: np.ndarray, what: str, path, fmt: str) -> np.ndarray:
    """Bit patterns of operand format ``fmt`` (:func:`validation.identify.probes.pattern_dtype`)
    from words that are its patterns or fp32 patterns of its values (any word wider than the
    format's patterns marks fp32 patterns; tf32 words are fp32 containers either way)."""
    if fmt == "fp16":
        return _fp16_from_words(words, what, path)
    words = np.asarray(words, np.uint64)
    want = pattern_dtype(fmt)
    if words.size and int(words.max()) > 0xFFFFFFFF:
        raise ValueError(f"{path}: {what}: a word is wider than 32 bits")
    if fmt == "tf32" or not (words.size and int(words.max()) > np.iinfo(want).max):
        return words.astype(want)
    as32 = words.astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = as32.astype(value_dtype(fmt))
    if not np.array_equal(narrow.astype(np.float32).view(np.uint32), words.astype(np.uint32)):
        raise ValueError(f"{path}: {what}: a value is not a {fmt} value")
    return narrow.view(want)


def _rne16(c32: np.ndarray) -> np.ndarray:
    return c32.view(np.float32).astype(np.float16).view(np.uint16)


def _finish(
    a, b, c_words, d_words, output: str | None, path, notes: list[str], *, c16: bool, d16: bool, fmt: str = "fp16"
) -> Rows:
    """Rows from parsed words. ``c16``/``d16``: the c/d words are fp16 patterns (else fp32
    patterns; fp32 d words of an fp16 output must be fp16 values). ``output`` (None: fp16 when
    ``d16``): with fp16 outputs an fp32 c is rounded to fp16 (RNE), noted in ``notes``."""
    c_words = np.asarray(c_words, np.uint64)
    d_words = np.asarray(d_words, np.uint64)
    if output is None:
        output = "fp16" if d16 else "fp32"
    if output == "fp16":
        d = d_words.astype(np.uint16) if d16 else _fp16_from_words(d_words, "d", path, fp32=True)
        if c16:
            c = c_words.astype(np.uint16)
        else:
            c = _rne16(c_words.astype(np.uint32))
            notes.append("c given as fp32: rounded to fp16 (RNE) for the fp16 accumulator")
    else:
        if d16 or c16:
            raise ValueError(
                f"{path}: fp32 outputs asked (--output fp32) but {'d' if d16 else 'c'} holds fp16 patterns"
            )
        c = c_words.astype(np.uint32)
        d = d_words.astype(np.uint32)
    if output == "fp16" and fmt not in FP16_ACCUMULATOR_INPUTS:
        raise ValueError(
            f"{path}: fp16 outputs of {fmt} operands: no unit accumulates {fmt} in fp16 "
            f"(fp16 outputs take {', '.join(FP16_ACCUMULATOR_INPUTS)})"
        )
    return Rows(np.ascontiguousarray(a), np.ascontiguousarray(b), c, d, str(path), tuple(notes), fmt)


def _fail(path):
    return lambda why: ValueError(f"{path}: {why}")


def _load_npz(path, output, input):
    data = load_npz_file(path, "rows", fail=_fail(path))
    fmt = file_input(data, path, input)
    want = pattern_dtype(fmt)
    missing = [n for n in ("a", "b", "c", "d") if n not in data]
    if missing:
        raise ValueError(
            f"{path}: no array {', '.join(missing)} (has {', '.join(data) or 'none'}); "
            "a probe file needs its outputs d (run it on the device first)"
        )
    a, b, c, d = (data[n] for n in ("a", "b", "c", "d"))
    for name, arr in (("a", a), ("b", b)):
        if arr.dtype != want or arr.ndim != 2:
            raise ValueError(
                f"{path}: {name} must be an (R, K) {want} array of {fmt} bit patterns, got {arr.shape} {arr.dtype}"
                + ("" if input is not None or "input" in data else " (a file of other operands names them: input)")
            )
    if a.shape != b.shape:
        raise ValueError(f"{path}: a is {a.shape}, b is {b.shape}")
    for name, arr in (("c", c), ("d", d)):
        if arr.dtype not in (np.uint16, np.uint32) or arr.shape != (a.shape[0],):
            raise ValueError(
                f"{path}: {name} must be an ({a.shape[0]},) uint32 or uint16 array of bit patterns, "
                f"got {arr.shape} {arr.dtype}"
            )
    return _finish(a, b, c, d, output, path, [], c16=c.dtype == np.uint16, d16=d.dtype == np.uint16, fmt=fmt)


def _load_csv(path, output, input):
    fmt = file_input({}, path, input)
    text = read_text(path, "rows", fail=_fail(path))
    # a row's a and b hold K words each: a field may be as long as the file (csv's default
    # limit, 131,072 characters, would refuse K above about 26,000 with a _csv.Error)
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    reader = csv.DictReader(text.splitlines())
    try:
        fields = reader.fieldnames or []
    except csv.Error as err:
        raise ValueError(f"{path}: line 1: not a readable CSV header ({' '.join(str(err).split())[:80]})") from None
    missing = [n for n in ("a", "b", "c", "d") if n not in fields]
    if missing:
        raise ValueError(
            f"{path}: CSV needs columns a, b, c, d (a, b: K space-separated hex words); missing {', '.join(missing)}"
        )
    A, B, C, D, widths, c_widths, d_widths = [], [], [], [], set(), set(), set()
    for line_no, rec in _csv_rows(reader, path, len(fields)):
        try:
            A.append(_words(rec["a"] or "", "a", path))
            B.append(_words(rec["b"] or "", "b", path))
            C.append(_words(rec["c"] or "", "c", path))
            D.append(_words(rec["d"] or "", "d", path))
        except ValueError as err:
            raise ValueError(f"{err} (line {line_no})") from None
        if len(C[-1]) != 1 or len(D[-1]) != 1:
            raise ValueError(f"{path}: line {line_no}: c and d must be one word each")
        widths.add((len(A[-1]), len(B[-1])))
        c_widths.add(_digits(rec["c"]))
        d_widths.add(_digits(rec["d"]))
    if not A:
        raise ValueError(f"{path}: no rows")
    if len(widths) != 1 or next(iter(widths))[0] != next(iter(widths))[1] or next(iter(widths))[0] < 1:
        raise ValueError(f"{path}: every row needs the same number K ≥ 1 of a and b words, got {sorted(widths)}")
    a = _operand_from_words(np.array(A, np.uint64), "a", path, fmt)
    b = _operand_from_words(np.array(B, np.uint64), "b", path, fmt)
    return _finish(
        a, b, [c[0] for c in C], [d[0] for d in D], output, path, [], c16=c_widths == {4}, d16=d_widths == {4}, fmt=fmt
    )


def _csv_rows(reader, path, n_fields: int):
    """(line number, record) of each CSV row; ValueError naming the line for a row with more
    fields than the header (``DictReader`` would keep them aside, unread) or one csv cannot read."""
    line_no = 1
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise ValueError(
                f"{path}: line {line_no + 1}: not a readable CSV row ({' '.join(str(err).split())[:80]})"
            ) from None
        line_no = reader.line_num
        if rec.get(None):
            raise ValueError(
                f"{path}: line {line_no}: {n_fields + len(rec[None])} fields, the header names {n_fields} (a, b, c, d)"
            )
        yield line_no, rec


def _digits(word: str) -> int:
    """Hex digits of a word (32 for a binary word): 4 marks an fp16 pattern in a CSV."""
    w = word.strip()
    if len(w) == 32 and set(w) <= {"0", "1"}:
        return 32
    return len(w[2:] if w.lower().startswith("0x") else w)


def _read_matrix(path: Path) -> list[list[int]]:
    text = read_text(path, path.name, fail=_fail(path))
    return [_words(line, path.name, path) for line in text.splitlines() if line.strip()]


def _load_directory(path: Path, output, input):
    def one(pattern):
        found = sorted(path.glob(pattern))
        if len(found) != 1:
            raise ValueError(
                f"{path}: expected one file {pattern}, found {len(found)}"
                + (
                    " (a directory of the study's verifier lines is not supported: see docs/identify.md)"
                    if not found and pattern == "a_*.txt"
                    else ""
                )
            )
        return found[0]

    output = output or "fp32"
    a_path = one("a_*.txt")
    named = a_path.stem.rsplit("_", 1)[-1].lower()  # a_<GPU>_<format>.txt
    fmt = file_input({}, path, input, named if named in INSTRUCTION_K else None)
    a_words = _read_matrix(a_path)
    b_words = _read_matrix(one("b_*.txt"))
    c_words = [r[0] for r in _read_matrix(one("c_*_fp32.txt"))]
    d_words = [r[0] for r in _read_matrix(one(f"d_*_{output}.txt"))]
    if len({len(r) for r in a_words + b_words}) != 1:
        raise ValueError(f"{path}: a and b rows must all hold K words")
    R = len(a_words)
    if not (len(b_words) == len(c_words) == len(d_words) == R):
        raise ValueError(f"{path}: a, b, c, d have {R}, {len(b_words)}, {len(c_words)}, {len(d_words)} rows")
    a = _operand_from_words(np.array(a_words, np.uint64), "a", path, fmt)
    b = _operand_from_words(np.array(b_words, np.uint64), "b", path, fmt)
    notes = []
    if output == "fp16":
        notes.append("fp16 outputs: C rounded to fp16 (RNE) first, as on the GPU side of these measurements")
    return _finish(a, b, c_words, d_words, output, path, notes, c16=False, d16=False, fmt=fmt)


def load_rows(path, output: str | None = None, input: str | None = None) -> Rows:
    """Measured rows from ``path`` (module docstring: .npz, .csv or a directory). ``output``:
    "fp32" or "fp16" to say which outputs the file holds (default: from the data; a directory
    defaults to fp32). ``input``: the operand format (default: an .npz's ``input`` entry, a
    directory's a_<GPU>_<format>.txt name, else fp16). ValueError naming the file and what is
    wrong."""
    if output not in (None, "fp32", "fp16"):
        raise ValueError(f"output: {output!r} is not one of 'fp32', 'fp16'")
    if input is not None:
        file_input({}, path, input)  # an unknown name: the accepted ones, before reading anything
    p = Path(path)
    try:
        st = os.stat(p)  # one stat: ENAMETOOLONG, ELOOP, EACCES are one line too
    except FileNotFoundError:
        raise ValueError(f"{str(path)[:200]}: no such file or directory") from None
    except OSError as err:
        raise ValueError(f"{str(path)[:200]}: cannot be read ({err.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        return _load_directory(p, output, input)
    if p.suffix.lower() == ".csv":
        return _load_csv(p, output, input)
    return _load_npz(p, output, input)
