"""Input generators of a validation function: the harness's float and integer modes, ranges away
from zero, benchdnn-style integer-exact inputs and cuDNN-frontend-style sparse integers.

A generator is named by text: ``float:-1:1`` (the harness's float mode in [-1, 1], the 2022
study's r0), ``int:-5:5`` (its integer mode), ``away:1:3`` (the float mode in [1, 3], each
value's sign drawn apart: ±[1, 3], the 2022 study's proposal), ``float:1:5`` (the study's r4),
and ``exact`` (benchdnn-style: integers in [-2, 2] with a nonzero fraction chosen from the
reduction length K so that every fp32 partial sum is an exact integer and the result needs only
its final rounding; oneDNN ``tests/benchdnn`` fills conv data this way and then asks for exact
equality), and ``sparse`` (cuDNN-frontend-style sparse integers: each value drawn uniformly
from {−2, …, 2}, as the int8 ``initImage`` of NVIDIA/cudnn-frontend's samples fills
(``2 − (int8_t)(5·u)``, ``samples/legacy_samples/helpers.cpp``), and kept one time in five, as its
int32 ``initImage`` draws a 1 (``(int)(5·u) / 4``), else 0: about 84 % zeros whatever K is.
Every product is an integer of magnitude ≤ 4, so every fp32 partial sum of K ≤ 2^22 products
(|sum| ≤ 4K ≤ 2^24) is an exact integer in any order: the kernel and the validation round the
same exact value and an exact comparison is right. Larger K is refused).

Every generator makes the tensors of the test's format: fp16 (``fmt="fp16"``, the harness's
truncating table conversion) or bf16 (``fmt="bf16"``, the float's top 16 bits, as the harness's
``float_to_bfloat16``); signs and zeros are set on the bit patterns, whose sign bit (0x8000) and
+0 (0x0000) the two formats share. The integers of ``exact`` and ``sparse`` (|x| ≤ 2) are exact
in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from models import harness

__all__ = ["InputGenerator", "parse_generator", "DEFAULT_GENERATORS", "GENERATOR_KINDS"]

GENERATOR_KINDS = ("float", "int", "away", "exact", "sparse")
#: The ranges a design sweep uses when none are given.
DEFAULT_GENERATORS = ("float:-1:1", "away:1:3", "float:1:5", "exact")
#: exact: at most this many nonzero products of magnitude ≤ 4 per output on average (2^11 · 4
#: stays an integer in fp16's exact range; far below fp32's 2^24).
EXACT_SAFE_TERMS = 512
_SIGN_SEED_OFFSET = 7919
_MASK_SEED_OFFSET = 104729
#: sparse: a value is kept one time in five (cuDNN frontend's int32 fill, ``(int)(5·u) / 4``).
SPARSE_KEEP = 5
#: sparse: the longest reduction whose fp32 sums stay exact in the worst case (4·K ≤ 2^24).
SPARSE_MAX_K = 1 << 22
#: The tensor formats a generator makes: (harness dtype, numpy dtype of the values).
FORMATS = {"fp16": ("f16", np.dtype(np.float16)), "bf16": ("bf16", np.dtype(ml_dtypes.bfloat16))}


@dataclass(frozen=True)
class InputGenerator:
    """``kind`` one of :data:`GENERATOR_KINDS`; ``lo``, ``hi`` the harness range (whole numbers)."""

    kind: str
    lo: int = -1
    hi: int = 1

    def __post_init__(self):
        if self.kind not in GENERATOR_KINDS:
            raise ValueError(f"generator: {self.kind!r} is not one of {', '.join(GENERATOR_KINDS)}")
        if self.kind not in ("exact", "sparse") and not self.lo < self.hi:
            raise ValueError(f"generator {self.kind}: range [{self.lo}, {self.hi}] needs lo < hi")
        if self.kind == "away" and self.lo <= 0:
            raise ValueError(f"generator away: lo must be > 0 (values ±[lo, hi]), got {self.lo}")

    @property
    def name(self) -> str:
        return self.kind if self.kind in ("exact", "sparse") else f"{self.kind}:{self.lo}:{self.hi}"

    def describe(self, fmt: str = "fp16") -> str:
        """The generator in words, for tensors of ``fmt`` (fp16 or bf16)."""
        if self.kind == "float":
            return f"harness float mode in [{self.lo}, {self.hi}], {fmt} by truncation"
        if self.kind == "int":
            return f"harness integer mode in [{self.lo}, {self.hi})"
        if self.kind == "away":
            return f"harness float mode in ±[{self.lo}, {self.hi}] (sign drawn apart), {fmt} by truncation"
        if self.kind == "sparse":
            return (
                f"integers in [-2, 2], each kept 1 time in {SPARSE_KEEP} (cuDNN-frontend-style sparse; "
                f"exact fp32 sums for K ≤ 2^22)"
            )
        return f"integers in [-2, 2], nonzero fraction min(1, {EXACT_SAFE_TERMS}/K) (benchdnn-style, exact sums)"

    def inputs(self, problem, seed: int, k: int, fmt: str = "fp16") -> dict[str, np.ndarray]:
        """The tensors the direction reads, as :func:`models.harness.harness_inputs` returns
        them, for ``seed`` (≥ 1), values of ``fmt`` ("fp16" or "bf16"); ``k`` the reduction
        length (exact mode's density)."""
        if fmt not in FORMATS:
            raise ValueError(f"fmt: {fmt!r} is not one of {', '.join(FORMATS)}")
        dtype, values = FORMATS[fmt]
        if self.kind in ("float", "int"):
            return harness.harness_inputs(problem, seed, self.lo, self.hi, self.kind, dtype=dtype)
        if self.kind == "away":
            base = harness.harness_inputs(problem, seed, self.lo, self.hi, "float", dtype=dtype)
            out = {}
            for i, (name, arr) in enumerate(base.items()):
                sign = harness.harness_int_values(arr.size, seed + _SIGN_SEED_OFFSET + i, 0, 2)
                bits = arr.view(np.uint16).reshape(-1).copy()
                bits[sign.astype(np.int64) == 1] ^= np.uint16(0x8000)  # the sign bit: ±[lo, hi]
                out[name] = bits.view(values).reshape(arr.shape)
            return out
        if self.kind == "sparse":
            if k > SPARSE_MAX_K:
                raise ValueError(f"generator sparse: K = {k} > 2^22, fp32 sums of products ≤ 4 may round")
            base = harness.harness_inputs(problem, seed, -2, 3, "int", dtype=dtype)
            out = {}
            for i, (name, arr) in enumerate(base.items()):
                draw = harness.harness_int_values(arr.size, seed + _MASK_SEED_OFFSET + i, 0, SPARSE_KEEP)
                bits = arr.view(np.uint16).reshape(-1).copy()
                bits[draw != SPARSE_KEEP - 1] = 0
                out[name] = bits.view(values).reshape(arr.shape)
            return out
        base = harness.harness_inputs(problem, seed, -2, 3, "int", dtype=dtype)
        density = min(1.0, EXACT_SAFE_TERMS / max(1, k))
        out = {}
        for i, (name, arr) in enumerate(base.items()):
            keep = harness.harness_float_values(arr.size, seed + _MASK_SEED_OFFSET + i, 0, 1) < density
            bits = arr.view(np.uint16).reshape(-1).copy()
            bits[~keep] = 0
            out[name] = bits.view(values).reshape(arr.shape)
        return out


def parse_generator(text) -> InputGenerator:
    """``KIND[:LO:HI]`` (module docstring); ValueError naming the field and accepted forms."""
    if isinstance(text, InputGenerator):
        return text
    parts = str(text).strip().lower().split(":")
    kind = parts[0]
    if kind not in GENERATOR_KINDS:
        raise ValueError(
            f"range: {text!r} is not KIND:LO:HI with KIND one of {', '.join(GENERATOR_KINDS)} ('exact' and 'sparse' alone)"
        )
    if kind in ("exact", "sparse"):
        if len(parts) != 1:
            raise ValueError(f"range: {kind!r} takes no bounds, got {text!r}")
        return InputGenerator(kind, -2, 2)
    if len(parts) != 3:
        raise ValueError(f"range: {text!r} needs KIND:LO:HI, e.g. float:-1:1 or away:1:3")
    try:
        lo, hi = int(parts[1]), int(parts[2])
    except ValueError:
        raise ValueError(f"range: bounds of {text!r} must be whole numbers") from None
    return InputGenerator(kind, lo, hi)
