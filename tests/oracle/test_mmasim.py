"""Differential tests: every named unit against MMA-Sim, bit for bit.

MMA-Sim (Xie et al., arXiv 2511.10909; PyPI ``mmasim`` 2.1.1, CPU, needs torch) is an independent
bit-accurate model of the same matrix units. The oracle is MMA-Sim's own per-instruction
configuration: its public ISA classes (``mmasim.amd.MFMA(arch, suffix)``,
``mmasim.nv_ptx.MMA(arch, shape_and_type)``) pick the arithmetic and its parameters, and their
``dpa(a, b, c)`` evaluates one dot-add per leading index; the fp32 FMA chain is
``mmasim.arithmetic.fma.MMA_FMA`` on float32 copies of the fp16 inputs.

Per unit (and output format, for NVIDIA) at least 100,000 vectors of the instruction's K, in named
categories: ``uniform`` and ``bits`` (random), and the adversarial ``span`` (wide exponent
spans), ``subnormal`` (subnormal inputs and c), ``cancel`` (exact cancellation), ``ties``
(rounding ties and near-ties, fp32 and fp16), ``tiny`` (products at the bottom of the range, where
the exponent of zero terms matters), ``signed_zero`` and ``overflow``; plus ``chained``
vectors of K = 64 (several instructions in a row). Results must agree in every bit; NaN results
compare as a class (any NaN equals any NaN), since MMA-Sim writes one canonical NaN. Inputs with
infinities and NaNs are a separate test, ``test_special_values``.

Run with ``make test-oracle``. ``FP16EMU_ORACLE_SCALE`` (default 1) scales the vector counts.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

import numpy as np
import pytest
import reference_data as ref  # noqa: E402  (registered by conftest.py)

import emu
import models

pytestmark = pytest.mark.oracle

SCALE = float(os.environ.get("FP16EMU_ORACLE_SCALE", "1"))
CHUNK = 1 << 16  # rows per MMA-Sim call (bounds torch's temporaries)
SHOW = 6  # mismatching vectors printed per failure
CHAINED_K = 64

# vectors per category at the instruction's K (125,000 in all), and of the chained K
COUNTS = {
    "uniform": 20_000,
    "bits": 20_000,
    "span": 15_000,
    "subnormal": 15_000,
    "cancel": 15_000,
    "ties": 20_000,
    "tiny": 10_000,
    "signed_zero": 5_000,
    "overflow": 5_000,
}
CHAINED_COUNTS = {"uniform": 5_000, "bits": 5_000, "subnormal": 5_000, "cancel": 5_000, "ties": 5_000}
SPECIAL_COUNT = 10_000


# ---------------------------------------------------------------------------------------------
# The oracle


@dataclass(frozen=True)
class Target:
    """A named unit and the MMA-Sim instruction that is its oracle."""

    unit: str
    output: str  # "fp32" or "fp16"
    isa: str  # "MFMA", "MMA" or "FMA"
    arch: str = ""
    instruction: str = ""
    k: int = 8  # the instruction's K

    @property
    def id(self) -> str:
        return f"{self.unit}-{self.output}"

    def oracle(self, mm):
        if self.isa == "MFMA":
            return mm.amd.MFMA(self.arch, self.instruction)
        if self.isa == "MMA":
            return mm.nv_ptx.MMA(self.arch, self.instruction)
        return mm.arithmetic.fma.MMA_FMA()

    def describe(self) -> str:
        if self.isa == "FMA":
            return "mmasim.arithmetic.fma.MMA_FMA().dpa on float32 copies"
        mod = "amd" if self.isa == "MFMA" else "nv_ptx"
        return f"mmasim.{mod}.{self.isa}({self.arch!r}, {self.instruction!r}).dpa"


def _nv(unit: str, arch: str, shape: str, k: int) -> list[Target]:
    return [
        Target(unit, "fp32", "MMA", arch, f"{shape}.f32.f16.f16.f32", k),
        Target(unit, "fp16", "MMA", arch, f"{shape}.f16.f16.f16.f16", k),
    ]


TARGETS = [
    Target("mi100", "fp32", "MFMA", "CDNA1", "f32_32x32x8f16", 8),  # MMA_E_FDPA(4): 2 groups
    Target("mi200", "fp32", "MFMA", "CDNA2", "f32_32x32x8f16", 8),  # MMA_FTZ_MUL_ADD(4)
    Target("mi300", "fp32", "MFMA", "CDNA3", "f32_32x32x8_f16", 8),  # MMA_TR_FDPA(24, 31, RNE, 8)
    *_nv("v100", "Volta", "m8n8k4", 4),  # MMA_T_FDPA(F=23, L=4)
    *_nv("t4", "Turing", "m16n8k8", 8),  # F=24, L=8
    *_nv("a100", "Ampere", "m16n8k16", 16),  # F=24, L=8: 2 groups
    *_nv("ada", "Ada Lovelace", "m16n8k16", 16),  # F=24, L=8: 2 groups
    *_nv("h100", "Hopper", "m16n8k16", 16),  # F=25, L=16
    *_nv("b200", "Blackwell", "m16n8k16", 16),  # F=25, L=16
    Target("fma32", "fp32", "FMA", k=8),
]


def run_oracle(target: Target, mm, a_bits, b_bits, c) -> np.ndarray:
    """MMA-Sim's d for every row: float32 (float16 for fp16 output), in chunks of CHUNK rows."""
    import torch

    op = target.oracle(mm)
    out = []
    for s in range(0, a_bits.shape[0], CHUNK):
        a = torch.from_numpy(np.array(a_bits[s : s + CHUNK]).view(np.float16))
        b = torch.from_numpy(np.array(b_bits[s : s + CHUNK]).view(np.float16))
        cc = torch.from_numpy(np.array(c[s : s + CHUNK]))
        if target.isa == "FMA":
            a, b = a.float(), b.float()  # fp16·fp16 is exact in fp32: one rounding per FMA
        out.append(op.dpa(a, b, cc).numpy())
    return np.concatenate(out)


# ---------------------------------------------------------------------------------------------
# Inputs. Values are built in float64 and narrowed exactly; c is fp32 (fp16 for fp16 output).


class Inputs:
    """Vector generators for one target; every method returns (a, b, c) bit patterns."""

    def __init__(self, target: Target, seed_tag: str):
        self.fp16_c = target.output == "fp16"
        self.rng = np.random.default_rng(zlib.crc32(f"{target.id}/{seed_tag}".encode()))

    # -- scalars of a format --------------------------------------------------------------------
    def sign(self, shape):
        return np.where(self.rng.random(shape) < 0.5, -1.0, 1.0)

    def f16_normal(self, shape, lo=-14, hi=15):
        e = self.rng.integers(lo, hi + 1, shape)
        m = self.rng.integers(0, 1024, shape)
        return self.sign(shape) * np.ldexp(1024.0 + m, e - 10)

    def f16_subnormal(self, shape):
        return self.sign(shape) * np.ldexp(self.rng.integers(1, 1024, shape).astype(np.float64), -24)

    def f32_normal(self, shape, lo=-126, hi=127):
        e = self.rng.integers(lo, hi + 1, shape)
        m = self.rng.integers(0, 1 << 23, shape)
        return self.sign(shape) * np.ldexp((1 << 23) + m.astype(np.float64), e - 23)

    def f32_subnormal(self, shape):
        return self.sign(shape) * np.ldexp(self.rng.integers(1, 1 << 23, shape).astype(np.float64), -149)

    def c_normal(self, shape, lo, hi):
        """A normal accumulator value of the c format with exponent in [lo, hi] (clipped)."""
        if self.fp16_c:
            return self.f16_normal(shape, max(lo, -14), min(max(hi, -14), 15))
        return self.f32_normal(shape, max(lo, -126), min(hi, 127))

    def c_subnormal(self, shape):
        return self.f16_subnormal(shape) if self.fp16_c else self.f32_subnormal(shape)

    def pick(self, shape, *choices):
        """Elementwise choice among (probability, values) pairs."""
        probs = np.array([p for p, _ in choices], np.float64)
        idx = self.rng.choice(len(choices), size=shape, p=probs / probs.sum())
        out = np.zeros(shape)
        for i, (_, v) in enumerate(choices):
            out = np.where(idx == i, v, out)
        return out

    def shuffle_k(self, a, b):
        """The same random permutation of k for a and b in each row."""
        perm = np.argsort(self.rng.random(a.shape), axis=1)
        return np.take_along_axis(a, perm, 1), np.take_along_axis(b, perm, 1)

    @staticmethod
    def pow2_factors(e):
        """fp16 factors x, y with x·y = 2^e (normal where possible), and where that is possible."""
        x = np.clip(e // 2, -14, 15)
        y = np.clip(e - x, -24, 15)
        x = np.clip(e - y, -24, 15)
        return np.ldexp(1.0, x), np.ldexp(1.0, y), (x + y == e)

    def pack(self, a, b, c):
        a16 = np.asarray(a, np.float64).astype(np.float16)
        b16 = np.asarray(b, np.float64).astype(np.float16)
        cdt = np.float16 if self.fp16_c else np.float32
        cc = np.asarray(c, np.float64).astype(cdt)
        for name, x, y in (("a", a16, a), ("b", b16, b), ("c", cc, c)):
            assert np.array_equal(x.astype(np.float64), np.asarray(y, np.float64)), f"{name} not exact"
        return a16.view(np.uint16), b16.view(np.uint16), cc

    # -- categories -----------------------------------------------------------------------------
    def uniform(self, n, k):
        a = self.rng.uniform(-1, 1, (n, k)).astype(np.float16).astype(np.float64)
        b = self.rng.uniform(-1, 1, (n, k)).astype(np.float16).astype(np.float64)
        c = self.rng.uniform(-1, 1, n).astype(np.float16 if self.fp16_c else np.float32)
        return self.pack(a, b, c)

    def bits(self, n, k):
        """Random finite bit patterns; for fp32 c, in the products' exponent range half the time;
        for fp16 output, a and b below 2^9 in half the rows."""
        rng = self.rng
        a = (rng.integers(0, 0x7C00, (n, k)) | (rng.integers(0, 2, (n, k)) << 15)).astype(np.uint16)
        b = (rng.integers(0, 0x7C00, (n, k)) | (rng.integers(0, 2, (n, k)) << 15)).astype(np.uint16)
        if self.fp16_c:
            c = (rng.integers(0, 0x7C00, n) | (rng.integers(0, 2, n) << 15)).astype(np.uint16).view(np.float16)
            small = rng.random(n) < 0.5  # |a|, |b| < 2^9 in half the rows, so not every sum overflows
            a[small] &= 0xDFFF
            b[small] &= 0xDFFF
        else:
            raw = (rng.integers(0, 0x7F800000, n) | (rng.integers(0, 2, n) << 31)).astype(np.uint32)
            near = self.f32_normal(n, -60, 40).astype(np.float32).view(np.uint32)
            c = np.where(rng.random(n) < 0.5, raw, near).view(np.float32)
        return a, b, c

    def span(self, n, k):
        """Normal inputs with independent exponents over the whole fp16 range."""
        hi = 7 if self.fp16_c else 15  # fp16 output: products up to 2^16, some overflow
        a = self.f16_normal((n, k), -14, hi)
        b = self.f16_normal((n, k), -14, hi)
        c = self.pick(n, (0.6, self.c_normal(n, -60, 35)), (0.2, self.c_normal(n, -126, 127)), (0.2, 0.0))
        return self.pack(a, b, c)

    def subnormal(self, n, k):
        """Subnormal fp16 inputs times small and large normals; subnormal c; products that cancel
        exactly or are all zero, so that c alone is the result."""
        shape = (n, k)
        a = self.pick(shape, (0.45, self.f16_subnormal(shape)), (0.1, 0.0), (0.45, self.f16_normal(shape, -14, -8)))
        b = self.pick(
            shape,
            (0.3, self.f16_subnormal(shape)),
            (0.3, self.f16_normal(shape, -14, -8)),
            (0.4, self.f16_normal(shape, 0, 15)),
        )
        half = k // 2
        pairs = self.rng.random(n) < 0.3  # products cancel exactly: the result is c alone
        a[pairs, half:] = -a[pairs, :half]
        b[pairs, half:] = b[pairs, :half]
        none = self.rng.random(n) < 0.15  # every product ±0: the result is c alone
        a[none] = self.sign((int(none.sum()), k)) * 0.0
        a, b = self.shuffle_k(a, b)
        c = self.pick(
            n,
            (0.4, self.c_subnormal(n)),
            (0.1, 0.0),
            (0.2, self.c_normal(n, -126, -100)),
            (0.3, self.c_normal(n, -50, -14)),
        )
        return self.pack(a, b, c)

    def cancel(self, n, k):
        """Products in ± pairs that cancel exactly, sometimes with a small residual product."""
        shape = (n, k)
        half = k // 2
        hi = 5 if self.fp16_c else 15  # fp16 output: partial sums stay below 65504
        a = self.f16_normal(shape, -4, hi)
        b = self.f16_normal(shape, -4, hi)
        a[:, half:] = -a[:, :half]
        b[:, half:] = b[:, :half]
        resid = self.rng.random(n) < 0.6
        a[resid, 0] = self.f16_normal(int(resid.sum()), -14, 0)  # replaces the pair (0, half)
        b[resid, 0] = self.f16_normal(int(resid.sum()), -10, 2)
        a[resid, half] = 0.0
        a, b = self.shuffle_k(a, b)
        c = self.pick(
            n,
            (0.2, 0.0),
            (0.1, -0.0),
            (0.3, self.c_normal(n, -30, 0)),
            (0.2, self.c_normal(n, 10, 30)),
            (0.2, self.c_subnormal(n)),
        )
        return self.pack(a, b, c)

    def ties(self, n, k):
        """A big term (c or a product) plus terms summing to half its ulp (fp32 or fp16 ulp),
        sometimes split over two products, sometimes with a sticky term above or below."""
        rng = self.rng
        a = np.zeros((n, k))
        b = np.zeros((n, k))
        big_is_c = rng.random(n) < 0.5
        # the big product (slot 0) and c
        a0 = self.f16_normal(n, -8, 8)
        b0 = self.f16_normal(n, -8, 8)
        cb = self.c_normal(n, -24, 15) if self.fp16_c else self.c_normal(n, -40, 40)
        c_other = self.pick(n, (0.6, 0.0), (0.4, self.c_normal(n, -40, -30)))
        big = np.where(big_is_c, cb, a0 * b0)
        e_big = np.floor(np.log2(np.abs(big))).astype(np.int64)
        a[:, 0] = np.where(big_is_c, 0.0, a0)
        b[:, 0] = np.where(big_is_c, 0.0, b0)
        c = np.where(big_is_c, cb, c_other)
        # half an ulp of big: fp32 ulp, or fp16 ulp (of the output) where that is the format
        fp16_ulp = rng.random(n) < (0.7 if self.fp16_c else 0.2)
        e_half = np.where(fp16_ulp, np.maximum(e_big, -14) - 11, e_big - 24)
        split = rng.random(n) < 0.3
        e_tie = np.where(split, e_half - 1, e_half)
        s_tie = self.sign(n)

        x1, y1, ok1 = self.pow2_factors(e_tie)
        a[:, 1], b[:, 1] = s_tie * x1, y1
        a[:, 2] = np.where(split, s_tie * x1, 0.0)
        b[:, 2] = np.where(split, y1, 0.0)
        sticky = rng.random(n) < 0.4
        e_st = e_half - rng.integers(1, 24, n)
        x3, y3, ok3 = self.pow2_factors(e_st)
        a[:, 3] = np.where(sticky, self.sign(n) * x3, 0.0)
        b[:, 3] = np.where(sticky, y3, 0.0)
        keep = ok1 & (ok3 | ~sticky)
        a[~keep, 1:4] = 0.0  # a tie not representable as fp16 products: leave the big term alone
        if k > 4:  # some noise far below in the other slots
            noise = rng.random((n, k - 4)) < 0.2
            a[:, 4:] = np.where(noise, self.f16_normal((n, k - 4), -14, -10), 0.0)
            b[:, 4:] = np.where(noise, self.f16_normal((n, k - 4), -14, -10), 0.0)
        elif k < 4:
            raise ValueError("ties need K >= 4")
        a, b = self.shuffle_k(a, b)
        return self.pack(a, b, c)

    def tiny(self, n, k):
        """Products at the bottom of the range, c zero or tiny. The big product is an odd multiple
        of 2^-25 (a tie at the fp16 subnormal spacing) whose exponent, counted as the hardware
        does (field exponents, -14 for a subnormal factor), is at most -22; a sticky term 2^-26 …
        2^-48 of either sign decides the tie. With c = 0 the exponent given to zero terms is the
        maximum, so it sets where the sticky term is cut (NVIDIA fp16 output)."""
        rng = self.rng
        a = np.zeros((n, k))
        b = np.zeros((n, k))
        odd = 2.0 * rng.integers(0, 4, n) + 1
        normal = rng.random(n) < 0.6
        a[:, 0] = self.sign(n) * np.where(normal, np.ldexp(odd, -14), np.ldexp(odd, -24))
        b[:, 0] = np.where(normal, np.ldexp(1.0, -11), 0.5)  # (2j+1)·2^-25 either way
        x, y, ok = self.pow2_factors(-25 - rng.integers(1, 24, n))
        a[:, 1] = np.where(ok, self.sign(n) * x, 0.0)
        b[:, 1] = np.where(ok, y, 0.0)
        more = rng.random((n, k - 2)) < 0.1
        a[:, 2:] = np.where(more, self.f16_subnormal((n, k - 2)), 0.0)
        b[:, 2:] = np.where(more, self.f16_normal((n, k - 2), -14, -9), 0.0)
        a, b = self.shuffle_k(a, b)
        if self.fp16_c:
            small = self.sign(n) * np.ldexp(rng.integers(1, 9, n).astype(np.float64), -24)
            c = self.pick(n, (0.5, 0.0), (0.2, -0.0), (0.3, small))
        else:
            c = self.pick(n, (0.4, 0.0), (0.2, -0.0), (0.2, self.f32_subnormal(n)), (0.2, self.f32_normal(n, -45, -20)))
        return self.pack(a, b, c)

    def signed_zero(self, n, k):
        """±0 inputs and c, products that are all zero, and exact cancellations onto -0."""
        shape = (n, k)
        zero = self.sign(shape) * 0.0
        a = np.where(self.rng.random(shape) < 0.7, zero, self.f16_normal(shape, -10, 10))
        b = np.where(self.rng.random(shape) < 0.5, self.sign(shape) * 0.0, self.f16_normal(shape, -10, 10))
        half = k // 2
        pairs = self.rng.random(n) < 0.3
        a[pairs, half:] = -a[pairs, :half]
        b[pairs, half:] = b[pairs, :half]
        c = self.pick(n, (0.45, 0.0), (0.45, -0.0), (0.1, self.c_normal(n, -20, 0)))
        kind = self.rng.integers(0, 4, n)
        neg = kind == 0  # every product -0 and c = -0 (IEEE: -0)
        a[neg] = -0.0
        b[neg] = np.abs(b[neg])
        c[neg] = -0.0
        zero = kind == 1  # every product ±0, c ±0
        a[zero] = self.sign((int(zero.sum()), k)) * 0.0
        return self.pack(a, b, c)

    def overflow(self, n, k):
        """Large c and large products: fp16 outputs beyond 65504 (→ inf), the 65520 tie; for
        fp32 outputs c near the top of the range, down to ±FLT_MAX."""
        shape = (n, k)
        a = self.f16_normal(shape, 3, 15)
        b = self.f16_normal(shape, 0, 12)
        if self.fp16_c:
            c = self.pick(n, (0.5, self.f16_normal(n, 12, 15)), (0.25, 65504.0), (0.25, -65504.0))
            edge = self.rng.random(n) < 0.4  # c = ±65504 plus ±16 (tie to inf) or ±15.99
            a[edge] = 0.0
            b[edge] = 0.0
            s = np.sign(c[edge])
            a[edge, 0] = s * np.where(self.rng.random(int(edge.sum())) < 0.5, 16.0, 15.9921875)
            b[edge, 0] = 1.0
            c[edge] = s * 65504.0
        else:
            fmax = float(np.finfo(np.float32).max)
            c = self.pick(n, (0.6, self.f32_normal(n, 100, 127)), (0.2, fmax), (0.2, -fmax))
        a, b = self.shuffle_k(a, b)
        return self.pack(a, b, c)

    def special(self, n, k):
        """Random vectors with infinities and NaNs placed in a, b or c (inf·0, inf − inf too)."""
        a, b, c = self.uniform(n, k)
        a = a.copy()
        b = b.copy()
        c = c.copy()
        rng = self.rng
        rows = np.arange(n)
        kind = rng.integers(0, 7, n)
        j1 = rng.integers(0, k, n)
        j2 = (j1 + 1 + rng.integers(0, k - 1, n)) % k
        inf16 = np.where(rng.random(n) < 0.5, 0xFC00, 0x7C00).astype(np.uint16)
        nan16 = np.uint16(0x7E00)
        cinf = np.where(rng.random(n) < 0.5, -np.inf, np.inf).astype(c.dtype)
        sel = kind == 0  # a_k = ±inf
        a[rows[sel], j1[sel]] = inf16[sel]
        sel = kind == 1  # b_k = NaN
        b[rows[sel], j1[sel]] = nan16
        sel = kind == 2  # c = ±inf
        c[sel] = cinf[sel]
        sel = kind == 3  # c = NaN
        c[sel] = np.nan
        sel = kind == 4  # inf · 0
        a[rows[sel], j1[sel]] = inf16[sel]
        b[rows[sel], j1[sel]] = 0
        sel = kind == 5  # inf − inf across two products
        a[rows[sel], j1[sel]] = 0x7C00
        a[rows[sel], j2[sel]] = 0xFC00
        b[rows[sel], j1[sel]] = 0x3C00
        b[rows[sel], j2[sel]] = 0x3C00
        sel = kind == 6  # ±inf product and ±inf c
        a[rows[sel], j1[sel]] = inf16[sel]
        b[rows[sel], j1[sel]] = 0x3C00
        c[sel] = cinf[sel]
        return a, b, c


def build(target: Target, counts: dict[str, int], k: int, seed_tag: str):
    """Concatenated (a, b, c, labels) over the categories in ``counts``, scaled by SCALE."""
    gen = Inputs(target, seed_tag)
    parts, labels = [], []
    for name, count in counts.items():
        n = max(1, int(round(count * SCALE)))
        parts.append(getattr(gen, name)(n, k))
        labels += [name] * n
    a, b, c = (np.concatenate(x) for x in zip(*parts))
    return a, b, c, np.array(labels)


# ---------------------------------------------------------------------------------------------
# Comparison


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16) if x.dtype == np.float16 else x.view(np.uint32)


def _hex(x: np.ndarray, i) -> str:
    return ref.hex16(_bits(x)[i]) if x.dtype == np.float16 else ref.hex32(_bits(x)[i])


def compare(target: Target, a, b, c, labels, expected, got) -> tuple[int, str]:
    """(number of rows that differ, a report: counts per category and the first few as hex).

    Bits must be equal, except that any NaN equals any NaN (MMA-Sim writes one canonical NaN);
    infinities have one pattern per sign, so non-finite results compare as classes."""
    assert got.dtype == expected.dtype, f"{target.id}: dtype {got.dtype}, MMA-Sim {expected.dtype}"
    assert got.shape == expected.shape, f"{target.id}: shape {got.shape}, MMA-Sim {expected.shape}"
    same = (_bits(got) == _bits(expected)) | (np.isnan(got) & np.isnan(expected))
    bad = np.flatnonzero(~same)
    if bad.size == 0:
        return 0, ""
    cats, counts = np.unique(labels[bad], return_counts=True)
    per_cat = ", ".join(f"{c_}: {n}" for c_, n in zip(cats, counts))
    lines = [f"{target.id} vs {target.describe()}: {bad.size} of {len(labels)} vectors differ ({per_cat})"]
    shown = []
    for cat in cats:  # the first few of every category
        shown += list(bad[labels[bad] == cat][: max(1, SHOW // len(cats))])
    for i in shown:
        aa = " ".join(ref.hex16(x) for x in a[i])
        bb = " ".join(ref.hex16(x) for x in b[i])
        lines.append(
            f"  [{labels[i]}] row {i}: a=[{aa}] b=[{bb}] c={_hex(c, i)} mmasim={_hex(expected, i)} emu={_hex(got, i)}"
        )
    return int(bad.size), "\n".join(lines)


def _check(target: Target, mmasim, capsys, counts, k, seed_tag):
    unit = models.unit(target.unit, output=target.output)
    a, b, c, labels = build(target, counts, k, seed_tag)
    expected = run_oracle(target, mmasim, a, b, c)
    got = np.asarray(emu.dot_add(a.view(np.float16), b.view(np.float16), c, unit))
    n_bad, report = compare(target, a, b, c, labels, expected, got)
    with capsys.disabled():
        print(f"\n[oracle] {target.id} K={k} {seed_tag}: {len(labels)} vectors compared, {n_bad} mismatches", end="")
    assert n_bad == 0, report


# ---------------------------------------------------------------------------------------------
# Tests


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.id)
def test_instruction_k(target: Target, mmasim, capsys):
    """≥ 100,000 vectors of the instruction's K, random and adversarial, bit for bit."""
    _check(target, mmasim, capsys, COUNTS, target.k, "instruction")


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.id)
def test_chained_k64(target: Target, mmasim, capsys):
    """K = 64: several instructions (groups) in a row, the accumulator carried between them."""
    _check(target, mmasim, capsys, CHAINED_COUNTS, CHAINED_K, "chained")


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.id)
def test_special_values(target: Target, mmasim, capsys):
    """Infinities and NaNs in a, b or c: results agree as classes (NaN, +inf, -inf) or bits."""
    _check(target, mmasim, capsys, {"special": SPECIAL_COUNT}, target.k, "special")


def test_instruction_counts():
    """Each unit gets at least 100,000 vectors at its instruction's K (at the default scale)."""
    assert sum(COUNTS.values()) >= 100_000
    for t in TARGETS:
        unit = models.unit(t.unit, output=t.output)
        assert t.k % unit.group_size == 0 or t.k < unit.group_size, (t.id, t.k, unit.group_size)
        assert CHAINED_K % unit.group_size == 0


# -- the oracle itself against published data (checks the oracle's configuration and the loaders)


@pytest.mark.parametrize("gpu", ref.NVIDIA_HW_GPUS)
def test_oracle_reproduces_measured_rows(gpu: str, mmasim):
    rows = ref.load_nvidia_hw(gpu, "fp16")
    [t32, t16] = [t for t in TARGETS if t.unit == ref.NVIDIA_HW_UNIT[gpu]]
    c32 = rows.c.view(np.float32)
    d32 = run_oracle(t32, mmasim, rows.a, rows.b, c32)
    d16 = run_oracle(t16, mmasim, rows.a, rows.b, c32.astype(np.float16))
    assert int(np.count_nonzero(d32.view(np.uint32) != rows.d_fp32)) == 0
    assert int(np.count_nonzero(ref.f32_bits(d16) != rows.d_fp16)) == 0


def test_oracle_reproduces_amd_predictions(mmasim):
    data = ref.load_amd_predicted()
    keys = {
        "MI100_CDNA1_E-FDPA": "mi100",
        "MI200_CDNA2_FTZ-AddMul": "mi200",
        "MI300_CDNA3_TR-FDPA": "mi300",
        "sequential_fp32_fma_RNE": "fma32",
    }
    for key, name in keys.items():
        [t] = [t for t in TARGETS if t.unit == name]
        a = np.array([ref.parse_hex(v["a_fp16_hex"], np.uint16) for v in data["vectors"]])
        b = np.array([ref.parse_hex(v["b_fp16_hex"], np.uint16) for v in data["vectors"]])
        c = np.array([int(v["c_fp32_hex"], 16) for v in data["vectors"]], np.uint32).view(np.float32)
        want = np.array([int(v["predicted_fp32_hex"][key], 16) for v in data["vectors"]], np.uint32)
        got = run_oracle(t, mmasim, a, b, c).view(np.uint32)
        assert np.array_equal(got, want), (
            key,
            [(v["name"], ref.hex32(g), ref.hex32(w)) for v, g, w in zip(data["vectors"], got, want) if g != w],
        )
