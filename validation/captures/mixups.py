"""The user's own mix-ups, and the likely cause of a real difference.

When no schedule reproduces a capture as written, the cause is more often the file than the
kernel: the output saved transposed, an operand saved transposed (a square one keeps its shape,
so the reader cannot tell), A and B swapped, a 16-bit result saved as float32, an NHWC buffer
labelled NCHW, or a ``gpu`` string naming another GPU than the one that ran (the kernel names
say which architecture ran: ``nvjet_sm90_…`` is Hopper). :func:`find_mixup` tries each such
transform as a modified :class:`Capture`, cheapest first: each is screened with the
candidates of the search's first tier (:func:`validation.captures.search.tiers`), and only one
that passes the screen is searched in full; the first that reproduces every output bit is the
answer. The screen asks one candidate to reproduce two samples: the outputs the nearest schedule
of the capture as written got wrong (at most :data:`MAX_WRONG`, spread over them, moved where
the transform moves them), and the search's first sample (a few dozen outputs near a rounding
boundary). A capture one output of which differs (a kernel bug, a flipped bit) is then screened
on that output: a transform that leaves it unexplained (another unit that rounds every other
output alike) is not searched in full.

When none does, :func:`likely_cause` tries the library bug mutants on the nearest schedule's
emulated output: one output tile missing the contribution of a k block (its last, its first, or
one split's range: :func:`emu.gemm` of that tile's sub-problem with the block's products left
out), one element's bits flipped, signs flipped, one row, column or channel scaled. The mutants
follow the failure modes tested by CUTLASS's and cuBLAS's own verifiers (a tile or k block
computed wrongly; github.com/NVIDIA/cutlass, tools/util/include/cutlass/util/reference).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import ml_dtypes
import numpy as np

import emu
import models

from .capture import Capture, CaptureError
from .gemms import SearchResult, batched, bits, gemm_dims, jobs_of, model_unit, resolve_unit
from .samples import Sample
from .search import STAGE1, STAGE1_FP32, search, tiers
from .space import candidates

__all__ = [
    "AXES",
    "ARCH_UNITS",
    "axes_of",
    "Mixup",
    "MixupFound",
    "arch_unit",
    "find_mixup",
    "likely_cause",
    "transforms",
    "wrong_outputs",
]

#: the unit of each architecture a kernel name spells (``sm90``, ``sm_80``, ``gfx90a``)
ARCH_UNITS = (
    (r"sm_?10\d", "b200"),
    (r"sm_?90", "h100"),
    (r"sm_?89", "ada"),
    (r"sm_?8[0-8]", "a100"),
    (r"sm_?75", "t4"),
    (r"sm_?7[02]", "v100"),
    (r"gfx94\d", "mi300"),
    (r"gfx90a", "mi200"),
    (r"gfx908", "mi100"),
)
#: axis names of each op's output, in torch's logical order
AXES = {
    "mm": ("m", "n"),
    "addmm": ("m", "n"),
    "scaled_mm": ("m", "n"),
    "bmm": ("batch", "m", "n"),
    "baddbmm": ("batch", "m", "n"),
    "conv2d": ("n", "k", "p", "q"),
    "conv2d_bwd_data": ("n", "c", "h", "w"),
    "conv2d_bwd_weight": ("k", "c", "r", "s"),
}


def axes_of(cap: Capture) -> tuple[str, ...]:
    """The names of the capture's output axes (a linear's leading axes ``d0``, ``d1``, …)."""
    if cap.op == "linear":
        return tuple(f"d{i}" for i in range(cap.out.ndim - 1)) + ("out_feature",)
    if cap.op == "matmul":
        return tuple(f"batch{i}" for i in range(cap.out.ndim - 2)) + ("m", "n")
    return AXES[cap.op]


#: the most first-tier candidates one transform is screened with
MAX_SCREEN = 3000
#: the most outputs the nearest schedule got wrong that a transform is screened on
MAX_WRONG = 64


def arch_unit(kernels) -> str | None:
    """The unit the kernel names' architecture names (``nvjet_sm90_…`` → ``h100``), or None."""
    for k in kernels:
        for pattern, name in ARCH_UNITS:
            if re.search(pattern, str(k).lower()):
                return name
    return None


@dataclass(frozen=True)
class Mixup:
    """One transform of a capture: the field it changes, how (``{field: transform}`` is its
    match), and the capture (and unit) as they would be without the mix-up."""

    field: str
    transform: str
    capture: Capture
    hw: str | None = None
    text: str = ""
    #: what the transform does to an array of the capture's output shape (the output moved:
    #: saved transposed, an NHWC buffer); None where the outputs keep their places
    moved: Callable[[np.ndarray], np.ndarray] | None = dataclasses.field(default=None, repr=False, compare=False)

    def match(self) -> dict:
        return {self.field: self.transform}

    def describe(self) -> str:
        return self.text or f"{self.field} {self.transform}"

    def outputs_at(self, outputs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Where the outputs at ``outputs`` (flat indices into an output of ``shape``) lie in the
        transformed capture's output (flat indices, ascending)."""
        if self.moved is None:
            return np.unique(np.asarray(outputs, np.int64))
        origin = self.moved(np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)).reshape(-1)
        return np.flatnonzero(np.isin(origin, outputs))


@dataclass(frozen=True)
class MixupFound:
    """A transform that reproduces every output bit, and the search result on the transformed capture."""

    mixup: Mixup
    result: SearchResult
    screened: int


def _with_out(cap: Capture, out: np.ndarray, **kw) -> Capture:
    return replace(cap, out=np.ascontiguousarray(out), **kw)


def _with_operands(cap: Capture, **ops) -> Capture:
    return replace(cap, operands={**cap.operands, **{k: np.ascontiguousarray(v) for k, v in ops.items()}})


def _exact_in(out: np.ndarray, dtype) -> bool:
    v = out[np.isfinite(out)]
    with np.errstate(over="ignore"):  # a value beyond the format's range casts to inf: not exact in it
        return bool(v.size) and bool((v.astype(dtype).astype(np.float32) == v).all())


def _transposed(out: np.ndarray) -> np.ndarray:
    return np.swapaxes(out, -1, -2)


def _nhwc_read(out: np.ndarray) -> np.ndarray:
    """An (N, C, H, W) array read as the NHWC buffer it holds, in logical (N, C, H, W) order."""
    n, c, h, w = out.shape
    return out.reshape(n, h, w, c).transpose(0, 3, 1, 2)


def transforms(cap: Capture, unit_name: str, hw: str | None = None) -> list[Mixup]:
    """The transforms that apply to ``cap`` (searched with ``hw``, the user's unit, or the one
    its ``gpu`` names: ``unit_name``), cheapest (and likeliest) first."""
    out: list[Mixup] = []
    o = cap.operands
    # a 16-bit result saved as float32: every value exactly a float16 (bfloat16) one
    if cap.out.dtype == np.float32 and cap.input != "tf32":
        formats = [("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16)]
        if cap.input == "bf16":
            formats.reverse()
        for name, dt in formats:
            if _exact_in(cap.out, dt):
                out.append(
                    Mixup(
                        "out_dtype",
                        name,
                        _with_out(cap, cap.out.astype(dt)),
                        text=f"the float32 array holds {name} values: the {name} result saved as float32",
                    )
                )
    # the output saved transposed (square: the shape does not tell)
    if cap.out.ndim in (2, 3) and cap.conv is None and cap.out.shape[-1] == cap.out.shape[-2]:
        out.append(
            Mixup(
                "out",
                "transposed",
                _with_out(cap, _transposed(cap.out)),
                text="the output saved transposed",
                moved=_transposed,
            )
        )
    # an NHWC buffer labelled NCHW (or read back in the wrong order)
    if cap.conv is not None and cap.out.ndim == 4:
        logical = _nhwc_read(cap.out)
        if cap.memory_format != "channels_last":
            out.append(
                Mixup(
                    "memory_format",
                    "channels_last",
                    _with_out(cap, logical, memory_format="channels_last"),
                    text="the output is an NHWC (channels_last) buffer labelled NCHW",
                    moved=_nhwc_read,
                )
            )
        else:
            out.append(
                Mixup(
                    "out",
                    "NHWC buffer",
                    _with_out(cap, logical),
                    text="the output saved as its NHWC buffer",
                    moved=_nhwc_read,
                )
            )
    # operands transposed (square) or swapped
    if cap.op in ("mm", "addmm", "bmm", "baddbmm", "matmul"):
        A, B = o["A"], o["B"]
        if B.shape[-1] == B.shape[-2]:
            out.append(
                Mixup("B", "transposed", _with_operands(cap, B=np.swapaxes(B, -1, -2)), text="B saved transposed")
            )
        if A.shape[-1] == A.shape[-2]:
            out.append(
                Mixup("A", "transposed", _with_operands(cap, A=np.swapaxes(A, -1, -2)), text="A saved transposed")
            )
        if A.shape == B.shape:
            out.append(Mixup("operands", "swapped", _with_operands(cap, A=B, B=A), text="A and B swapped"))
    if cap.op == "linear" and o["weight"].shape[0] == o["weight"].shape[1]:
        out.append(
            Mixup(
                "weight",
                "transposed",
                _with_operands(cap, weight=o["weight"].T),
                text="the weight saved transposed (in, out)",
            )
        )
    # another unit than ``gpu`` names: the kernel names' architecture first, then every unit
    named = arch_unit(cap.kernels)
    units = ([named] if named else []) + [u for u in models.UNIT_NAMES if u not in ("fma32", "fp64")]
    seen = {unit_name}
    for u in units:
        if u in seen:
            continue
        seen.add(u)
        try:
            models.unit(u, input=cap.input)
        except ValueError:
            continue
        why = f"the kernels are {named}'s ({cap.kernels[0][:40]}…)" if u == named and cap.kernels else "another unit"
        out.append(
            Mixup("unit", u, cap, hw=u, text=f"computed on unit {u}, not the {unit_name} that gpu names ({why})")
        )
    return [m if m.field == "unit" else replace(m, hw=hw) for m in out]


def wrong_outputs(cap: Capture, result: SearchResult | None, most: int = MAX_WRONG) -> np.ndarray | None:
    """The outputs (flat indices into ``cap.out``) the nearest schedule of ``result`` got wrong,
    at most ``most`` of them spread evenly over them all; None where the result has no output."""
    if result is None or result.emulated is None or result.emulated.size != cap.out.size:
        return None
    got = bits(np.ascontiguousarray(cap.out)).reshape(-1)
    want = bits(np.ascontiguousarray(np.asarray(result.emulated).astype(cap.out.dtype))).reshape(-1)
    wrong = np.flatnonzero(got != want)
    if wrong.size > most:
        wrong = wrong[np.unique(np.linspace(0, wrong.size - 1, most).round().astype(np.int64))]
    return wrong


def _screen(m: Mixup, wrong: np.ndarray | None = None, shape: tuple[int, ...] | None = None) -> bool:
    """Whether some candidate of the transformed capture's first tier reproduces every output of
    the search's first sample and, where ``wrong`` is given (outputs the nearest schedule got
    wrong, flat indices into an output of ``shape``: the capture as written), every one of those
    outputs where the transform moves them."""
    if m.capture.op == "scaled_mm":  # the fp8 search has its own stages: searched in full, the kernels' unit alone
        return m.field != "unit" or m.transform == arch_unit(m.capture.kernels)
    try:
        unit = resolve_unit(m.capture, m.hw)
    except CaptureError:
        return False
    cands, _ = candidates(m.capture, unit)
    tl = tiers(m.capture, unit, cands)
    if not tl:
        return False
    group = tl[0][1][:MAX_SCREEN]
    s1 = Sample(m.capture, *(STAGE1_FP32 if m.capture.out_format == "fp32" else STAGE1), seed=1)
    sw = None
    if wrong is not None and wrong.size and shape is not None:
        sw = Sample.of_outputs(m.capture, m.outputs_at(wrong, shape))
        if not sw.size:  # none of them found in the capture's GEMMs: the first sample alone
            sw = None
    for lo in range(0, len(group), 500):
        block = group[lo : lo + 500]
        if sw is not None:  # the outputs that tell first: few candidates get past them
            sw.prepare(block)
            block = [c for c, n in zip(block, sw.counts(block)) if n == sw.size]
            if not block:
                continue
        s1.prepare(block)
        if any(n == s1.size for n in s1.counts(block)):
            return True
    return False


def find_mixup(
    cap: Capture, unit_name: str, hw: str | None = None, progress=None, result: SearchResult | None = None
) -> tuple[MixupFound | None, int]:
    """The first transform (:func:`transforms`) under which some schedule reproduces every output
    bit, and how many transforms were screened. ``result``: the search of ``cap`` as written;
    where given, each transform is screened on the outputs its nearest schedule got wrong too
    (:func:`wrong_outputs`)."""
    screened = 0
    tries = transforms(cap, unit_name, hw)
    wrong = wrong_outputs(cap, result)
    for m in tries:
        screened += 1
        if progress:
            progress("mix-ups of the file", screened, len(tries))
        if not _screen(m, wrong, cap.out.shape):
            continue
        r = search(m.capture, hw=m.hw)
        if r.answer in ("identical", "inside-ensemble"):
            return MixupFound(m, r, screened), screened
    return None, screened


# --- the likely cause of a difference ----------------------------------------------------------

#: output tile sizes (rows = columns) and k block widths the mutants try
TILES = (64, 128, 256, 32, 16, 8)
K_BLOCKS = (32, 64, 128, 256, 16)


def _u(x: np.ndarray) -> np.ndarray:
    return bits(np.ascontiguousarray(x))


def _gemm_view(cap: Capture, arr: np.ndarray):
    """``arr`` (the capture's output shape) as (pieces, M, N) in GEMM order, when the capture's
    GEMMs lay its output out plainly (mm, addmm, bmm, linear); else None."""
    if cap.op in ("mm", "addmm"):
        return arr[None]
    if batched(cap):
        return arr.reshape(-1, *arr.shape[-2:])
    if cap.op in ("linear", "matmul"):
        return arr.reshape(1, -1, arr.shape[-1])
    return None


def _span(lo: int, hi: int, size: int):
    """The smallest aligned tile (of :data:`TILES`) holding [lo, hi], clipped to ``size``."""
    for t in sorted(TILES):
        if lo // t == hi // t:
            start = lo // t * t
            return start, min(start + t, size)
    return 0, size


def _k_ranges(cand, K: int):
    """(name, start, stop) of the k ranges a lost block may be: the last and first blocks of each
    width, each split's range."""
    out = []
    for b in K_BLOCKS:
        if b < K:
            out.append(("k block lost", K - b, K))
    for b in K_BLOCKS:
        if b < K:
            out.append(("k block lost", 0, b))
    if cand is not None and cand.schedule.splits > 1:
        ranges = sorted({(c.start, c.stop) for c in cand.schedule.chains(K) if c.step == 1})
        out.extend(("split lost", a, b) for a, b in ranges)
    return out


def likely_cause(cap: Capture, result: SearchResult) -> dict | None:
    """The library bug mutant of the nearest schedule's output that reproduces the GPU's output
    (see the module docstring): ``{"mutant": …, "where": {…}}`` with GEMM coordinates (m, n, k
    as inclusive ranges; ``batch`` for bmm), or None when none does."""
    if result.emulated is None or result.best is None:
        return None
    got = np.ascontiguousarray(cap.out)
    want = np.ascontiguousarray(result.emulated.astype(cap.out.dtype))
    differ = _u(got) != _u(want)
    idx = np.argwhere(differ)
    if not idx.size:
        return None
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    # one element (or a few) with bits flipped
    if len(idx) <= 4:
        x = (_u(got) ^ _u(want))[differ]
        if all(bin(int(v)).count("1") == 1 for v in x):
            where = [dict(zip(axes_of(cap), map(int, i))) for i in idx]
            bit_no = [int(v).bit_length() - 1 for v in x]
            return {"mutant": "bits flipped", "where": where[0] if len(where) == 1 else where, "bits": bit_no}
    gd, wd = g64[differ], w64[differ]
    if (gd == -wd).all():
        return {"mutant": "sign flipped", "where": _box(cap, idx)}
    # one row, column or channel scaled, by a factor told apart from 1 (a common ratio within 4e-3
    # of 1 is another order's rounding, not a scale: "tile scaled by 0.999998" misled)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = gd / wd
    alike = np.isfinite(ratio).all() and ratio.size and np.allclose(ratio, ratio[0], rtol=2e-3, atol=0)
    if alike and not np.isclose(ratio[0], 1.0, rtol=0, atol=4e-3):
        for ax, name in enumerate(axes_of(cap)):
            if len(np.unique(idx[:, ax])) == 1:
                return {"mutant": f"{name} scaled", "where": _box(cap, idx), "factor": float(ratio[0])}
        return {"mutant": "tile scaled", "where": _box(cap, idx), "factor": float(ratio[0])}
    return _k_block_lost(cap, result, got, want, differ)


def _box(cap: Capture, idx: np.ndarray) -> dict:
    return {a: [int(idx[:, i].min()), int(idx[:, i].max())] for i, a in enumerate(axes_of(cap))}


def _k_block_lost(cap: Capture, result: SearchResult, got, want, differ) -> dict | None:
    """A tile of the nearest schedule's output with the products of one k range left out."""
    gv, dv = _gemm_view(cap, got), _gemm_view(cap, differ)
    if gv is None:
        return None
    cand = result.best
    if cand.variant.lanes is not None:
        return None  # k dealt to lanes: a block of the lanes' sequence is no k range of the user's GEMM
    pieces = np.unique(np.argwhere(dv)[:, 0])
    if pieces.size != 1:
        return None
    p = int(pieces[0])
    rows, cols = np.nonzero(dv[p])
    M, N, _ = gemm_dims(cap, cand.variant)
    m0, m1 = _span(int(rows.min()), int(rows.max()), M)
    n0, n1 = _span(int(cols.min()), int(cols.max()), N)
    unit = model_unit(cand.unit, cap.input)
    (job,) = jobs_of(cap, cand.variant, np.arange(m0, m1), np.arange(n0, n1), [p] if batched(cap) else None)
    target = _u(gv[p, m0:m1, n0:n1])
    K = job.A.shape[1]  # the gemmK the schedule walks: with channel padding longer than the GEMM's own
    for name, k0, k1 in _k_ranges(cand, K):
        A = np.array(job.A, copy=True)
        A[:, k0:k1] = 0  # +0 products: the accumulator is left as it was
        tile = emu.gemm(A, job.B, job.C, unit, cand.schedule).astype(cap.out.dtype)
        if (_u(tile) == target).all():
            where = {"m": [m0, m1 - 1], "n": [n0, n1 - 1], "k": [k0, k1 - 1]}
            if batched(cap):
                where = {"batch": p, **where}
            return {"mutant": name, "where": where, "tile": [m1 - m0, n1 - n0]}
    return None
