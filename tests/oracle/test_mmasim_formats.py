"""Differential tests of the operand formats beyond fp16: every (unit, format) pair against MMA-Sim.

The fp16 units are checked in ``test_mmasim.py``; this file does the same for bf16, tf32, the
OCP fp8 formats (e4m3fn, e5m2) and MI300's fnuz fp8 formats, on every unit that has the
instruction (``models.UNIT_INPUTS``), with fp32 and, where the instruction has one, fp16
accumulators. The oracle is MMA-Sim 2.1.1's own instruction class (``mmasim.nv_ptx.MMA``,
``WGMMA``, ``TCGen05MMA``, ``mmasim.amd.MFMA``; ``mmasim.arithmetic.fma.MMA_FMA`` on float32
copies for the FMA path), evaluated by ``dpa(a, b, c)`` row by row.

Inputs, per pair, in named categories built from the format's own layout (``ml_dtypes``):
``uniform``, ``bits`` (random finite patterns), ``span`` (exponents over the whole range),
``subnormal`` (the format's subnormals, subnormal c), ``cancel`` (exact cancellation),
``ties`` (a big term plus products worth half an fp32 / E8M13 / fp16 ulp of it, with or without a
sticky term), ``tiny`` (products at the bottom of the range, c zero or tiny), ``signed_zero``,
``overflow`` (the largest values of the format; bf16 and tf32 products past 2^128; c near
FLT_MAX) and ``special`` (inf and NaN encodings: e4m3fn's S.1111.111, the fnuz 0x80, e5m2's
infinities; fp8's saturating maxima). Rows run at the instruction's K and chained (K = 64).
Results agree in every bit; NaNs compare as a class.

Run with ``make test-oracle``. ``FP16EMU_ORACLE_SCALE`` scales the counts.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

import emu
import models

pytestmark = pytest.mark.oracle

SCALE = float(os.environ.get("FP16EMU_ORACLE_SCALE", "1"))
PER_CATEGORY = 3_000
CHAINED = 64
SHOW = 4

# format → (numpy dtype, pattern dtype, exponent bits, fraction bits, bias, kind)
FORMATS = {
    "bf16": (ml_dtypes.bfloat16, np.uint16, 8, 7, 127, "ieee"),
    "tf32": (np.float32, np.uint32, 8, 10, 127, "ieee"),
    "e4m3": (ml_dtypes.float8_e4m3fn, np.uint8, 4, 3, 7, "fn"),
    "e5m2": (ml_dtypes.float8_e5m2, np.uint8, 5, 2, 15, "ieee"),
    "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, np.uint8, 4, 3, 8, "fnuz"),
    "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, np.uint8, 5, 2, 16, "fnuz"),
}
_NV_ARCH = {"a100": "Ampere", "ada": "Ada Lovelace", "h100": "Hopper", "b200": "Blackwell"}
_NV_TYPE = {"bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2"}
_AMD = {
    ("mi100", "bf16"): ("CDNA1", "f32_32x32x4bf16", 4),
    ("mi200", "bf16"): ("CDNA2", "f32_32x32x8bf16_1k", 8),
    ("mi300", "bf16"): ("CDNA3", "f32_32x32x8_bf16", 8),
    ("mi300", "tf32"): ("CDNA3", "f32_32x32x4_xf32", 4),
    ("mi300", "e4m3fnuz"): ("CDNA3", "f32_32x32x16_fp8_fp8", 16),
    ("mi300", "e5m2fnuz"): ("CDNA3", "f32_32x32x16_bf8_bf8", 16),
}


#: MI300's mixed fp8 instructions (A fp8 = e4m3fnuz, B bf8 = e5m2fnuz, or the reverse)
_AMD_MIXED = {
    ("e4m3fnuz", "e5m2fnuz"): ("CDNA3", "f32_32x32x16_fp8_bf8", 16),
    ("e5m2fnuz", "e4m3fnuz"): ("CDNA3", "f32_32x32x16_bf8_fp8", 16),
}


@dataclass(frozen=True)
class Pair:
    unit: str
    fmt: str
    output: str = "fp32"
    b_fmt: str | None = None  # B's format where it differs from A's (mixed fp8)

    @property
    def fmt_b(self) -> str:
        return self.b_fmt or self.fmt

    @property
    def id(self) -> str:
        spec = self.fmt if self.b_fmt is None else f"{self.fmt}x{self.b_fmt}"
        return f"{self.unit}-{spec}-{self.output}"

    @property
    def spec(self):
        """The ``input=`` of ``models.unit``."""
        return self.fmt if self.b_fmt is None else (self.fmt, self.b_fmt)

    def oracle(self, mm):
        """(MMA-Sim operation, the instruction's K)."""
        d = "f16" if self.output == "fp16" else "f32"
        if self.unit == "fma32":
            return mm.arithmetic.fma.MMA_FMA(), 8
        if self.unit in _NV_ARCH:
            arch, t, tb = _NV_ARCH[self.unit], _NV_TYPE[self.fmt], _NV_TYPE[self.fmt_b]
            if self.fmt in ("e4m3", "e5m2"):
                if self.unit == "h100":
                    return mm.nv_ptx.WGMMA("Hopper", f"m64n64k32.{d}.{t}.{tb}"), 32
                if self.unit == "b200":
                    return mm.nv_ptx.TCGen05MMA("Blackwell", f"m64n8k32.kind::f8f6f4.{d}.{t}.{tb}"), 32
                return mm.nv_ptx.MMA(arch, f"m16n8k32.{d}.{t}.{tb}.{d}"), 32
            if self.fmt == "tf32":
                return mm.nv_ptx.MMA(arch, "m16n8k8.f32.tf32.tf32.f32"), 8
            return mm.nv_ptx.MMA(arch, "m16n8k16.f32.bf16.bf16.f32"), 16
        if self.b_fmt is not None:
            arch, suffix, k = _AMD_MIXED[(self.fmt, self.b_fmt)]
        else:
            arch, suffix, k = _AMD[(self.unit, self.fmt)]
        return mm.amd.MFMA(arch, suffix), k


PAIRS = [
    Pair(u, f)
    for u, fmts in models.UNIT_INPUTS.items()
    if u != "fp64"
    for f in fmts
    if f != "fp16" and (u != "fma32" or f in ("bf16", "tf32", "e4m3", "e5m2fnuz"))
] + [Pair(u, f, "fp16") for u in ("ada", "h100", "b200") for f in ("e4m3", "e5m2")]
#: every mixed fp8 pair of every matrix unit (the FMA path once per pair family), fp16
#: accumulators on the NVIDIA ones
MIXED_PAIRS = [
    Pair(u, fa, "fp32", fb)
    for u, pairs in models.UNIT_MIXED_INPUTS.items()
    if u != "fp64"
    for fa, fb in pairs
    if u != "fma32" or fa in ("e4m3", "e5m2fnuz")
] + [Pair(u, fa, "fp16", fb) for u in ("ada", "h100", "b200") for fa, fb in models.UNIT_MIXED_INPUTS[u]]


class Gen:
    """Vectors of one format; values built in float64 and narrowed exactly (checked)."""

    def __init__(self, pair: Pair, tag: str, fmt: str | None = None):
        self.dt, self.pdt, self.E, self.M, self.bias, self.kind = FORMATS[fmt or pair.fmt]
        self.fp16_c = pair.output == "fp16"
        self.rng = np.random.default_rng(zlib.crc32(f"{pair.id}/{tag}".encode()))
        fi = ml_dtypes.finfo(self.dt) if self.dt is not np.float32 else None
        self.emin = 1 - self.bias
        self.emax = int(np.log2(float(fi.max))) if fi is not None else 127
        self.maxval = float(fi.max) if fi is not None else float(np.finfo(np.float32).max)

    def sign(self, shape):
        return np.where(self.rng.random(shape) < 0.5, -1.0, 1.0)

    def normal(self, shape, lo=None, hi=None):
        lo = self.emin if lo is None else max(lo, self.emin)
        hi = self.emax if hi is None else min(hi, self.emax)
        e = self.rng.integers(lo, hi + 1, shape)
        m = self.rng.integers(0, 1 << self.M, shape)
        v = self.sign(shape) * np.ldexp((1 << self.M) + m.astype(np.float64), e - self.M)
        return np.clip(v, -self.maxval, self.maxval)

    def subnormal(self, shape):
        m = self.rng.integers(1, 1 << self.M, shape).astype(np.float64)
        return self.sign(shape) * np.ldexp(m, self.emin - self.M)

    def c_vals(self, shape, lo, hi):
        if self.fp16_c:
            e = self.rng.integers(max(lo, -14), min(max(hi, -14), 15) + 1, shape)
            return self.sign(shape) * np.ldexp(1024.0 + self.rng.integers(0, 1024, shape), e - 10)
        e = self.rng.integers(max(lo, -126), min(hi, 127) + 1, shape)
        return self.sign(shape) * np.ldexp((1 << 23) + self.rng.integers(0, 1 << 23, shape).astype(np.float64), e - 23)

    def c_sub(self, shape):
        if self.fp16_c:
            return self.sign(shape) * np.ldexp(self.rng.integers(1, 1024, shape).astype(np.float64), -24)
        return self.sign(shape) * np.ldexp(self.rng.integers(1, 1 << 23, shape).astype(np.float64), -149)

    def pick(self, shape, *choices):
        probs = np.array([p for p, _ in choices], np.float64)
        idx = self.rng.choice(len(choices), size=shape, p=probs / probs.sum())
        out = np.zeros(shape)
        for i, (_, v) in enumerate(choices):
            out = np.where(idx == i, v, out)
        return out

    def shuffle(self, a, b):
        perm = np.argsort(self.rng.random(a.shape), axis=1)
        return np.take_along_axis(a, perm, 1), np.take_along_axis(b, perm, 1)

    def pow2(self, e):
        """Factors x, y of the format with x·y = 2^e where possible (and where it is)."""
        lo = self.emin - self.M
        x = np.clip(e // 2, lo, self.emax)
        y = np.clip(e - x, lo, self.emax)
        x = np.clip(e - y, lo, self.emax)
        return np.ldexp(1.0, x), np.ldexp(1.0, y), x + y == e

    def pack(self, a, b, c):
        a_f, b_f = np.asarray(a).astype(self.dt), np.asarray(b).astype(self.dt)
        cdt = np.float16 if self.fp16_c else np.float32
        c_f = np.asarray(c, np.float64).astype(cdt)
        for name, x, y in (("a", a_f, a), ("b", b_f, b), ("c", c_f, c)):
            xv, yv = x.astype(np.float64), np.asarray(y, np.float64)
            ok = (xv == yv) | (np.isnan(xv) & np.isnan(yv))
            assert ok.all(), f"{name} not exact"
        return a_f, b_f, c_f

    # -- categories -----------------------------------------------------------------------------
    def uniform(self, n, k):
        a = self.rng.uniform(-1, 1, (n, k)).astype(self.dt).astype(np.float64)
        b = self.rng.uniform(-1, 1, (n, k)).astype(self.dt).astype(np.float64)
        return self.pack(a, b, self.rng.uniform(-1, 1, n).astype(np.float16 if self.fp16_c else np.float32))

    def bits(self, n, k):
        top = 1 << (8 * np.dtype(self.pdt).itemsize)
        with np.errstate(invalid="ignore"):  # NaN patterns: dropped below
            a, b = self._patterns(top, (n, k)), self._patterns(top, (n, k))
        if self.dt is np.float32:  # tf32: random fp32 patterns, the units drop the low bits
            a, b = (np.where(np.isfinite(x), x, 1.0) for x in (a, b))
        a, b = np.where(np.isfinite(a), a, 0.0), np.where(np.isfinite(b), b, 0.0)
        c = self.pick(n, (0.5, self.c_vals(n, -60, 60)), (0.3, self.c_vals(n, -126, 127)), (0.2, 0.0))
        return self.pack(a, b, c)

    def _patterns(self, top, shape):
        return self.rng.integers(0, top, shape, dtype=np.uint64).astype(self.pdt).view(self.dt).astype(np.float64)

    def span(self, n, k):
        a, b = self.normal((n, k)), self.normal((n, k))
        if self.fp16_c:
            a, b = self.normal((n, k), hi=4), self.normal((n, k), hi=4)
        c = self.pick(n, (0.6, self.c_vals(n, -40, 40)), (0.2, self.c_vals(n, -126, 127)), (0.2, 0.0))
        return self.pack(a, b, c)

    def subnormals(self, n, k):
        shape = (n, k)
        a = self.pick(shape, (0.5, self.subnormal(shape)), (0.1, 0.0), (0.4, self.normal(shape, hi=self.emin + 4)))
        b = self.pick(
            shape,
            (0.4, self.subnormal(shape)),
            (0.3, self.normal(shape, hi=self.emin + 4)),
            (0.3, self.normal(shape, lo=0)),
        )
        half = k // 2
        pairs = self.rng.random(n) < 0.3
        a[pairs, half:] = -a[pairs, :half]
        b[pairs, half:] = b[pairs, :half]
        a, b = self.shuffle(a, b)
        c = self.pick(
            n, (0.4, self.c_sub(n)), (0.1, 0.0), (0.2, self.c_vals(n, -126, -100)), (0.3, self.c_vals(n, -40, -5))
        )
        return self.pack(a, b, c)

    def cancel(self, n, k):
        shape = (n, k)
        half = k // 2
        hi = min(self.emax, 3 if self.fp16_c else 40)
        a, b = self.normal(shape, lo=-4, hi=hi), self.normal(shape, lo=-4, hi=hi)
        a[:, half:] = -a[:, :half]
        b[:, half:] = b[:, :half]
        resid = self.rng.random(n) < 0.6
        a[resid, 0] = self.normal(int(resid.sum()), hi=0)
        a[resid, half] = 0.0
        a, b = self.shuffle(a, b)
        c = self.pick(
            n,
            (0.2, 0.0),
            (0.1, -0.0),
            (0.3, self.c_vals(n, -30, 0)),
            (0.2, self.c_vals(n, 5, 20)),
            (0.2, self.c_sub(n)),
        )
        return self.pack(a, b, c)

    def ties(self, n, k):
        """c big plus products worth half an ulp of it (fp32, E8M13 or fp16), maybe a sticky term."""
        a, b = np.zeros((n, k)), np.zeros((n, k))
        c = self.c_vals(n, -10, 12)
        e_big = np.floor(np.log2(np.abs(c))).astype(np.int64)
        bits = self.rng.choice([10, 13, 23], n) if not self.fp16_c else np.full(n, 10)
        e_half = e_big - bits - 1
        split = self.rng.random(n) < 0.3
        e_tie = np.where(split, e_half - 1, e_half)
        s = self.sign(n)
        x, y, ok = self.pow2(e_tie)
        a[:, 0], b[:, 0] = s * x, y
        a[:, 1], b[:, 1] = np.where(split, s * x, 0.0), np.where(split, y, 0.0)
        sticky = self.rng.random(n) < 0.4
        x3, y3, ok3 = self.pow2(e_half - self.rng.integers(1, 12, n))
        a[:, 2], b[:, 2] = np.where(sticky, self.sign(n) * x3, 0.0), np.where(sticky, y3, 0.0)
        bad = ~(ok & (ok3 | ~sticky))
        a[bad, :3] = 0.0
        a, b = self.shuffle(a, b)
        return self.pack(a, b, c)

    def tiny(self, n, k):
        shape = (n, k)
        a = self.pick(shape, (0.5, self.subnormal(shape)), (0.5, 0.0))
        b = self.pick(shape, (0.5, self.subnormal(shape)), (0.5, self.normal(shape, hi=self.emin + 2)))
        c = self.pick(n, (0.4, 0.0), (0.2, -0.0), (0.2, self.c_sub(n)), (0.2, self.c_vals(n, -45, -20)))
        return self.pack(a, b, c)

    def signed_zero(self, n, k):
        shape = (n, k)
        a = np.where(self.rng.random(shape) < 0.7, self.sign(shape) * 0.0, self.normal(shape, lo=-3, hi=3))
        b = np.where(self.rng.random(shape) < 0.5, self.sign(shape) * 0.0, self.normal(shape, lo=-3, hi=3))
        c = self.pick(n, (0.45, 0.0), (0.45, -0.0), (0.1, self.c_vals(n, -20, 0)))
        return self.pack(a, b, c)

    def overflow(self, n, k):
        shape = (n, k)
        top = self.emax
        a = self.pick(
            shape,
            (0.5, self.normal(shape, lo=top - 3)),
            (0.2, self.sign(shape) * self.maxval),
            (0.3, self.normal(shape, lo=0)),
        )
        b = self.pick(shape, (0.5, self.normal(shape, lo=top - 3)), (0.5, self.normal(shape, lo=0)))
        if self.fp16_c:
            c = self.pick(n, (0.5, self.c_vals(n, 10, 15)), (0.5, 0.0))
        else:
            fmax = float(np.finfo(np.float32).max)
            c = self.pick(n, (0.4, self.c_vals(n, 120, 127)), (0.2, self.sign(n) * fmax), (0.4, 0.0))
        return self.pack(a, b, c)

    def special(self, n, k):
        """inf / NaN encodings among ordinary values."""
        shape = (n, k)
        a, b = self.normal(shape, lo=-3, hi=3), self.normal(shape, lo=-3, hi=3)
        specials = [np.nan] + ([np.inf, -np.inf] if self.kind == "ieee" else [])
        specials += [0.0, self.maxval, -self.maxval]
        for x in (a, b):
            hit = self.rng.random(shape) < 0.08
            x[hit] = self.rng.choice(specials, int(hit.sum()))
        cs = [0.0, np.inf, -np.inf, np.nan, 1.0]
        c = np.where(self.rng.random(n) < 0.3, self.rng.choice(cs, n), self.c_vals(n, -10, 10))
        return self.pack(a, b, c)


CATEGORIES = ("uniform", "bits", "span", "subnormals", "cancel", "ties", "tiny", "signed_zero", "overflow", "special")


def _oracle(pair, mm, a, b, c):
    import torch

    op, _ = pair.oracle(mm)
    types = {
        "bf16": torch.bfloat16,
        "tf32": torch.float32,
        "e4m3": torch.float8_e4m3fn,
        "e5m2": torch.float8_e5m2,
        "e4m3fnuz": torch.float8_e4m3fnuz,
        "e5m2fnuz": torch.float8_e5m2fnuz,
    }
    tt = types[pair.fmt]
    pdt = FORMATS[pair.fmt][1]
    if pdt is np.uint8:
        ta, tb = (
            torch.from_numpy(np.ascontiguousarray(x).view(np.uint8)).view(types[f])
            for x, f in ((a, pair.fmt), (b, pair.fmt_b))
        )
    elif pair.fmt == "bf16":
        ta, tb = (torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(tt) for x in (a, b))
    else:
        ta, tb = torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))
    if pair.unit == "fma32":
        if pair.fmt == "tf32":  # the unit drops the 13 low bits: the FMA oracle gets the tf32 values
            ta = (ta.view(torch.int32) >> 13 << 13).view(torch.float32)
            tb = (tb.view(torch.int32) >> 13 << 13).view(torch.float32)
        ta, tb = ta.float(), tb.float()
    return op.dpa(ta, tb, torch.from_numpy(np.ascontiguousarray(c))).numpy()


def _check(pair, mm, k, category, n):
    gen = Gen(pair, f"{category}/{k}")
    a, b, c = getattr(gen, category)(n, k)
    if pair.b_fmt is not None:
        # mixed: B from a second run of the same category and seed in B's format (the same
        # draws, so cancelling pairs and zero slots line up), A and c from the first
        _, b, _ = getattr(Gen(pair, f"{category}/{k}", pair.b_fmt), category)(n, k)
    unit = models.unit(pair.unit, input=pair.spec, output=pair.output)
    if unit.interleaved_sums == 2:
        # MMA-Sim's gtr_fdpa drops c when e_c < e_max - F - 1 and reads an inf/NaN c's exponent
        # as frexp's 0, so a non-finite c vanishes beside products past 2^26; fp16emu propagates
        # it, as TR-FDPA (MMA-Sim's too) does; a NaN or inf input becomes such a c for the next
        # group. Those rows are left out here (docs/formats.md)
        finite = np.isfinite(c) & np.isfinite(a.astype(np.float64)).all(1) & np.isfinite(b.astype(np.float64)).all(1)
        a, b, c = a[finite], b[finite], c[finite]
    want = _oracle(pair, mm, a, b, c)
    got = emu.dot_add(a, b, c, unit)
    assert got.dtype == want.dtype
    pattern = np.uint16 if want.dtype == np.float16 else np.uint32
    w, g = want.view(pattern), got.view(pattern)
    same = (w == g) | (np.isnan(want) & np.isnan(got))
    bad = np.flatnonzero(~same)
    msg = "\n".join(
        f"  row {i}: a={a[i].astype(np.float64).tolist()} b={b[i].astype(np.float64).tolist()} c={c[i]!r} "
        f"mmasim={want[i]!r} emu={got[i]!r}"
        for i in bad[:SHOW]
    )
    assert bad.size == 0, f"{pair.id} {category} K={k}: {bad.size} of {n} rows differ\n{msg}"


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.id)
@pytest.mark.parametrize("category", CATEGORIES)
def test_every_format_pair_matches_mmasim(pair, category, mmasim):
    _, k = pair.oracle(mmasim)
    n = max(1, int(PER_CATEGORY * SCALE))
    _check(pair, mmasim, k, category, n)
    _check(pair, mmasim, CHAINED, category, max(1, n // 4))


@pytest.mark.parametrize("pair", MIXED_PAIRS, ids=lambda p: p.id)
@pytest.mark.parametrize("category", CATEGORIES)
def test_every_mixed_fp8_pair_matches_mmasim(pair, category, mmasim):
    """e4m3 × e5m2 and e5m2 × e4m3 (mma.sync on Ada, wgmma on Hopper, tcgen05.mma on Blackwell),
    MI300's fp8 × bf8 and bf8 × fp8: MMA-Sim 2.1.1 gives each factor its own dtype's subnormal
    exponent (fdpa.frexp_and_normalize per operand)."""
    _, k = pair.oracle(mmasim)
    n = max(1, int(PER_CATEGORY * SCALE) // 2)
    _check(pair, mmasim, k, category, n)
    _check(pair, mmasim, CHAINED, category, max(1, n // 4))


def test_every_mixed_pair_is_covered():
    named = {(u, p) for u, pairs in models.UNIT_MIXED_INPUTS.items() if u not in ("fp64", "fma32") for p in pairs}
    assert named <= {(p.unit, (p.fmt, p.b_fmt)) for p in MIXED_PAIRS}


def test_every_unit_format_is_covered():
    """Every pair models.UNIT_INPUTS names (fp64 and fp16 aside) is tested here."""
    named = {
        (u, f) for u, fmts in models.UNIT_INPUTS.items() for f in fmts if f != "fp16" and u not in ("fp64", "fma32")
    }
    tested = {(p.unit, p.fmt) for p in PAIRS}
    assert named <= tested
