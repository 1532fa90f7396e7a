"""Bug or rounding: the user's GPU output against the emulated kernel, element by element, bit for bit.

The emulated kernel computes what the GPU's kernel computes, bit for bit, from the same inputs.
So where the GPU's output equals the emulation everywhere, the difference from the validation is
the kernel's arithmetic (rounding), nothing else; an element that differs is a bug suspect (or a
wrong model: inputs, kernel, tuning). For a kernel whose split-K partial sums are added with fp32
atomics the GPU's result depends on the add order, so an element passes when some add order of
its partials gives the GPU's value: the closest outcome to the GPU's value over the ensemble's
orders (:class:`emu.atomics.SplitPartials`) must equal it.

Suspects are listed with named coordinates (the letters of the result tensor's normalised layout:
n, g, k, h, w for a forward output; g, k, c, y, x for a weight gradient; n, g, c, h, w for an input
gradient), and summarised by where they cluster: axes on which every suspect shares one or two
indices (one channel, one border row), and whether they sit on the first or last index of a
spatial axis.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from emu.conv import normalize_layout
from models.kernels import ATOMIC_ORDERS

from ..configs.records import n_out_elements
from .arrays import LoadedArray, as_typed, convert_exactly, load_array

__all__ = ["GpuComparison", "compare_gpu_output", "gpu_values", "from_layout", "load_gpu_output", "ANSWERS"]

#: The three answers: every element equal to the emulation, every element reachable by some
#: atomic add order, or some element that no modelled order gives.
ANSWERS = ("identical", "inside-ensemble", "differs")
#: Suspects listed in full (all are counted).
MAX_SUSPECTS = 20
_SPATIAL = ("h", "w", "y", "x")


@dataclass
class GpuComparison:
    """The GPU's output against the emulated kernel (see the module docstring)."""

    n: int
    n_identical: int
    n_differ: int
    n_outside_ensemble: int
    answer: str
    axes: tuple[str, ...]
    suspects: list[dict] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    ensemble_orders: int = 0

    def to_dict(self) -> dict:
        return {
            "n": self.n,
            "n_identical": self.n_identical,
            "n_differ": self.n_differ,
            "n_outside_ensemble": self.n_outside_ensemble,
            "answer": self.answer,
            "ensemble_orders": self.ensemble_orders,
            "suspects": self.suspects,
            "clusters": self.clusters,
        }

    def __repr__(self) -> str:
        extra = f", {self.n_outside_ensemble} outside the ensemble" if self.ensemble_orders else ""
        return (
            f"<GpuComparison {self.answer}: {self.n_identical}/{self.n} identical, {self.n_differ} differ{extra}"
            f"{', ' + self.clusters[0] if self.clusters else ''}>"
        )

    def _repr_html_(self) -> str:
        body = "<br>".join(html.escape(line) for line in self.format_text().splitlines())
        return f"<p><b>{html.escape(self.answer)}</b></p><p style='font-family:monospace'>{body}</p>"

    def format_text(self) -> str:
        if self.answer == "identical":
            head = (
                f"GPU output: all {self.n} elements identical to the emulated kernel, bit for bit: any "
                f"difference from the validation is the kernel's arithmetic (rounding), not a bug "
                f"(`fp16emu explain CONFIG` attributes it to its sources)"
            )
        elif self.answer == "inside-ensemble":
            head = (
                f"GPU output: {self.n_identical} of {self.n} elements identical to the emulated kernel's ascending "
                f"add order; every element is an outcome of some atomic add order of its split-K partials "
                f"(searched {self.ensemble_orders} orders): rounding, not a bug"
            )
        else:
            what = (
                f"{_count(self.n_outside_ensemble, 'element is', 'elements are')} no outcome of the "
                f"{self.ensemble_orders} atomic add orders searched"
                if self.ensemble_orders
                else f"{_count(self.n_differ, 'element differs', 'elements differ')}"
            )
            head = (
                f"GPU output: {what} (of {self.n}): bug suspects (or the emulation's inputs, kernel or tuning "
                f"are not the GPU's)"
            )
        lines = [head]
        for s in self.suspects:
            coords = " ".join(f"{k}={v}" for k, v in s["coords"].items())
            lines.append(f"  {coords}: emulated {s['emulated']!r}, GPU {s['gpu']!r}")
        if self.answer == "differs" and len(self.suspects) < max(self.n_differ, self.n_outside_ensemble):
            lines.append(f"  … {max(self.n_differ, self.n_outside_ensemble) - len(self.suspects)} more")
        lines += [f"  cluster: {c}" for c in self.clusters]
        return "\n".join(lines)


def load_gpu_output(spec: str, problem, what: str, *, raw_format: str | None = None) -> LoadedArray:
    """Read the GPU's output file (:func:`validation.run.arrays.load_array`; ``what`` names it in
    messages) and check that it holds the result tensor's element count, before any emulation."""
    count = n_out_elements(problem)
    try:
        loaded = load_array(
            spec, what, raw_format=raw_format, count=count, raw_hint="--gpu-output-format fp16", bf16_void=True
        )
    except ValueError as err:
        raise type(err)(f"{err}{_other_reading(spec, raw_format, count)}") from None
    if loaded.array.size != count:
        raise ValueError(
            f"{what}: {loaded.source} holds {loaded.array.size} elements; the "
            f"{problem.result_role} tensor of this config has {count}"
        )
    return loaded


#: bytes per element of the raw formats a GPU output is dumped in
_WIDTHS = {"fp16": 2, "bf16": 2, "fp32": 4}


def _other_reading(spec: str, raw_format: str | None, count: int) -> str:
    """For a raw dump refused for its size: the reading (fp16 or fp32) under which it holds exactly
    the result tensor's ``count`` elements, as a hint ("" when none does)."""
    if raw_format not in _WIDTHS:
        return ""
    try:
        size = os.stat(spec).st_size
    except (OSError, ValueError):
        return ""
    for fmt, width in _WIDTHS.items():
        if fmt != raw_format and size == count * width:
            return f"; read as {fmt} it holds exactly the tensor's {count} elements: --gpu-output-format {fmt}"
    return ""


def gpu_values(gpu, size: int, shape: tuple[int, ...], fmt: str = "fp16") -> np.ndarray:
    """The GPU's output as flat values of the kernel's output format ``fmt`` (float16 for fp16,
    ``ml_dtypes.bfloat16`` for bf16): those values or their uint16 patterns, or float32 values
    the format holds exactly (its output saved as fp32), in the result tensor's shape or flat."""
    a = as_typed(np.asarray(gpu))
    target = np.dtype(ml_dtypes.bfloat16) if fmt == "bf16" else np.dtype(np.float16)
    if a.size != size:
        raise ValueError(
            f"gpu output: {a.size} elements (shape {a.shape}); the result tensor has {size} (shape {shape}, or flat)"
        )
    if a.shape not in (tuple(shape), (size,)):
        raise ValueError(
            f"gpu output: shape {a.shape} is neither the result tensor's {tuple(shape)} nor flat ({size},)"
        )
    a = a.reshape(-1)
    if a.dtype == np.uint16:
        return a.view(target)
    if a.dtype == target:
        return a
    if a.dtype in (np.float32, np.float64):
        h, i = convert_exactly(a, target)
        if i is not None:
            raise ValueError(
                f"gpu output: element {i} = {a[i]!r} is not an {fmt} value; the kernel writes {fmt} "
                f"(save its output as {target.name}, or the fp32 copy of it)"
            )
        return h
    raise ValueError(
        f"gpu output: dtype {a.dtype} is not {target.name}, uint16 ({fmt} patterns), float32 or float64 "
        f"(the kernel writes {fmt})"
    )


def check_layout(problem, layout: str, what: str = "layout") -> str:
    """``layout`` as the result tensor's five letters in memory order (:func:`from_layout`'s
    reading of it), or ValueError naming ``what`` and the tensor's own layout."""
    role = problem.result_role
    try:
        got = normalize_layout(str(layout).strip().lower(), role)
    except ValueError as err:
        raise ValueError(f"{what}: {str(layout)[:40]!r} is not a layout of the {role} tensor ({err})") from None
    if sorted(got) != sorted(problem.layout5(role)):
        raise ValueError(
            f"{what}: {str(layout)[:40]!r} does not name the {role} tensor's letters (its layout is "
            f"{problem.layout(role)!r})"
        )
    return got


def from_layout(gpu, problem, layout: str, what: str = "layout") -> np.ndarray:
    """A GPU output stored in ``layout`` (the result tensor's letters in the dump's memory order,
    e.g. ``nchw`` or ``ngkhw``), rearranged into the result tensor's own memory order (flat);
    ``what`` names the layout in messages."""
    role = problem.result_role
    want = problem.layout5(role)
    got = check_layout(problem, layout, what)
    sizes = problem.letter_sizes(role)
    a = np.asarray(gpu).reshape(-1)
    if a.size != problem.tensor_size(role):
        raise ValueError(f"gpu output: {a.size} elements; the result tensor has {problem.tensor_size(role)}")
    a = a.reshape(tuple(sizes[d] for d in got))
    return np.ascontiguousarray(a.transpose(tuple(got.index(d) for d in want))).reshape(-1)


def _same(a16: np.ndarray, b16: np.ndarray) -> np.ndarray:
    """Equal bit patterns (fp16 or bf16), NaN payloads aside (a NaN equals any NaN)."""
    nan = np.isnan(a16.astype(np.float32)) & np.isnan(b16.astype(np.float32))
    return (a16.view(np.uint16) == b16.view(np.uint16)) | nan


def _coords(index: int, axes: tuple[str, ...], dims: tuple[int, ...]) -> dict:
    return {a: int(i) for a, i in zip(axes, np.unravel_index(index, dims))}


def _clusters(where: np.ndarray, axes: tuple[str, ...], dims: tuple[int, ...]) -> list[str]:
    """Where the suspects concentrate: axes on which they take one or two of more indices, and
    first/last indices of spatial axes (padding borders, edge tiles)."""
    if where.size == 0:
        return []
    idx = np.unravel_index(where, dims)
    out = []
    for axis, size, values in zip(axes, dims, idx):
        if size < 2:
            continue
        distinct = np.unique(values)
        if distinct.size <= 2 and distinct.size < size:
            out.append(f"all {where.size} on {axis} = {', '.join(map(str, distinct.tolist()))} (of 0..{size - 1})")
        elif axis in _SPATIAL and size > 2:
            border = np.isin(values, (0, size - 1))
            if border.all():
                out.append(f"all {where.size} on the first or last {axis} (a border)")
    # a block (a tile, a K block's outputs): the bounding box, where it is smaller than the tensor
    box = [(a, int(v.min()), int(v.max()), n) for a, n, v in zip(axes, dims, idx) if n > 1]
    narrow = [(a, lo, hi, n) for a, lo, hi, n in box if hi - lo + 1 < n]
    if any(hi - lo + 1 > 2 for _, lo, hi, _ in narrow):
        volume = int(np.prod([hi - lo + 1 for _, lo, hi, _ in box])) if box else 1
        total = int(np.prod(dims))
        out.append(
            f"all {where.size} inside the block "
            + ", ".join(f"{a} = {lo}..{hi}" for a, lo, hi, _ in narrow)
            + f" ({volume} of {total} elements: a tile or block)"
        )
    return out


def compare_gpu_output(result, gpu) -> GpuComparison:
    """``result`` (a :class:`validation.run.RunResult`) against the GPU's output ``gpu``."""
    problem = result.problem
    role = problem.result_role
    axes = tuple(problem.layout5(role))
    sizes = problem.letter_sizes(role)
    dims = tuple(sizes[a] for a in axes)
    gemm = getattr(result.config, "gemm", None)
    if gemm is not None:  # a GEMM's suspects by C's indices (same memory order: h = w = 1 trail)
        axes, dims = gemm.c_axes, gemm.c_shape
    emulated = np.asarray(result.kernel_output).reshape(-1)
    g16 = gpu_values(gpu, emulated.size, result.shape, result.format)
    identical = _same(emulated, g16)
    n_identical = int(identical.sum())
    n = int(emulated.size)
    orders = 0
    outside = ~identical
    if result.ensemble is not None and not identical.all():
        # the closest outcome to the GPU's value over the ensemble's orders: inside iff equal
        orders = ATOMIC_ORDERS.envelope_order_count(ATOMIC_ORDERS.members, result.ensemble.parts.size)
        ref = g16.astype(np.float64)
        near, _ = result.ensemble.envelope(np.where(np.isnan(ref), 0.0, ref), orders, ATOMIC_ORDERS.granularity)
        reached = _same(near, g16)
        outside = ~(identical | reached)
    where = np.flatnonzero(outside)
    if where.size == 0:
        answer = "identical" if n_identical == n else "inside-ensemble"
    else:
        answer = "differs"
    suspects = [
        {"coords": _coords(int(i), axes, dims), "emulated": float(emulated[i]), "gpu": float(g16[i])}
        for i in where[:MAX_SUSPECTS]
    ]
    return GpuComparison(
        n=n,
        n_identical=n_identical,
        n_differ=n - n_identical,
        n_outside_ensemble=int(where.size) if result.ensemble is not None else 0,
        answer=answer,
        axes=axes,
        suspects=suspects,
        clusters=_clusters(where, axes, dims),
        ensemble_orders=min(orders, math.factorial(min(result.ensemble.n_split, 20))) if orders else 0,
    )


def _count(n: int, one: str, many: str) -> str:
    """``n`` and the words that agree with it."""
    return f"{n} {one if n == 1 else many}"
