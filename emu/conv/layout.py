"""Tensor layouts: the letters of each tensor, miopen-gen's (2022) insertion of a missing g, and
flat bit patterns of tensors given in any of the accepted shapes (see :mod:`emu.conv`)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["LETTERS", "LAYOUT_FIELD", "FORMATS", "PATTERNS", "normalize_layout", "tensor_bits", "tensor_format"]

#: The three tensors and the letters of their normalised (5-letter) layouts.
LETTERS = {"input": "ngchw", "filter": "gkcyx", "output": "ngkhw"}
#: The layout fields of ConvProblem, per tensor.
LAYOUT_FIELD = {"input": "in_layout", "filter": "fil_layout", "output": "out_layout"}
#: The element formats a convolution's tensors may have, and the dtype of their values. fp32
#: tensors are what fp32 kernels read: the unit decides what is multiplied (the fp32 FMA unit the
#: whole values, a tf32 unit their tf32 roundings; :class:`emu.conv.ConvArithmetic`).
FORMATS = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}
#: The dtype of each format's bit patterns.
PATTERNS = {"fp16": np.dtype(np.uint16), "bf16": np.dtype(np.uint16), "fp32": np.dtype(np.uint32)}
#: miopen-gen 2022 ``correctParameters``: the 4-letter layouts whose g goes next to the channel.
_G_INSERTED = {"nchw": "ngchw", "nhwc": "nhwgc", "nkhw": "ngkhw", "nhwk": "nhwgk"}


def normalize_layout(layout: str, role: str) -> str:
    """The 5-letter layout (with g) of a tensor's layout string, as miopen-gen (2022) made it.

    ``role`` is "input", "filter" or "output". A layout with g is returned unchanged; see
    :mod:`emu.conv` for the rule that inserts a missing g.
    """
    letters = LETTERS[role]
    if len(layout) == 5:
        if sorted(layout) != sorted(letters):
            raise ValueError(f"{role} layout {layout!r}: expected a permutation of {letters!r}")
        return layout
    if len(layout) != 4 or sorted(layout) != sorted(letters.replace("g", "")):
        raise ValueError(f"{role} layout {layout!r}: expected a permutation of {letters!r}, with or without g")
    return _G_INSERTED.get(layout, "g" + layout)


def tensor_format(arrays, fmt: str | None = None) -> str:
    """The element format ("fp16", "bf16" or "fp32") of a convolution's tensors: ``fmt`` when
    given, else what their values' dtype says (float16, ``ml_dtypes.bfloat16``, float32; uint32
    patterns are fp32's; uint16 patterns say nothing, and alone mean fp16). ValueError when the
    tensors' dtypes disagree with each other or with ``fmt``, or ``fmt`` is not one of
    :data:`FORMATS`."""
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"fmt: {fmt!r} is not one of {', '.join(FORMATS)}")
    seen = {name for name, dt in FORMATS.items() for a in arrays if a is not None and np.asarray(a).dtype == dt}
    if any(a is not None and np.asarray(a).dtype == np.uint32 for a in arrays):
        seen.add("fp32")
    if any(a is not None and np.asarray(a).dtype == np.uint16 for a in arrays) and "fp32" in seen:
        seen.add("fp16")  # 16-bit patterns beside fp32 tensors: a mix
    if fmt is not None:
        seen.add(fmt)
    if len(seen) > 1:
        raise ValueError(f"tensors: mixed element formats {', '.join(sorted(seen))}; give all of one format")
    return seen.pop() if seen else "fp16"


def tensor_bits(problem, role: str, arr, name: str, fmt: str = "fp16") -> np.ndarray:
    """Flat bit patterns of a tensor of format ``fmt`` (:data:`PATTERNS`: uint16 for fp16 and
    bf16, uint32 for fp32) given as values of its format or as patterns (:mod:`emu.conv` for
    the accepted shapes)."""
    if arr is None:
        raise ValueError(f"{name}: the {problem.direction} convolution needs the {role} tensor")
    arr = np.asarray(arr)
    patterns = PATTERNS[fmt]
    if arr.dtype == FORMATS[fmt]:
        arr = arr.view(patterns)
    elif arr.dtype != patterns:
        accepted = "float16 or bfloat16 values or uint16" if patterns == np.uint16 else "float32 values or uint32"
        raise TypeError(f"{name}: expected {accepted} bit patterns ({fmt} tensors), got dtype {arr.dtype}")
    shapes = {(problem.tensor_size(role),), problem.tensor_shape(role)}
    shapes.add(tuple(problem.letter_sizes(role)[d] for d in problem.layout5(role)))
    if arr.shape not in shapes:
        raise ValueError(
            f"{name}: shape {arr.shape} does not fit the {role} layout {problem.layout(role)!r}; "
            f"expected {problem.tensor_shape(role)} or flat ({problem.tensor_size(role)},)"
        )
    return np.ascontiguousarray(arr).reshape(-1)
