"""A slow, independent, exact oracle of every unit family: ``reference_dot_add``.

It shares no code with ``emu`` beyond the parameter record (``emu.units``): the bit patterns of
every input format and of fp16/fp32 are decoded here, every value is held exactly, and every
rounding is written out by hand. It exists to check the fast kernels behind ``emu.dot_add`` bit
for bit (tests/emu/test_units_exact.py for fp16 operands, tests/emu/test_formats_exact.py for
the others).

Exactness. Every value that can occur is an integer multiple of 2^-272: the finest operands are
tf32 subnormals (multiples of 2^-136; bf16's are of 2^-133, fp16's of 2^-24, fp8's coarser), so
products are multiples of 2^-272; fp32 values are multiples of 2^-149; sums, truncations at
coarser quanta and roundings keep that. So a finite value is held as a Python ``int`` in units
of 2^-SCALE, SCALE = 280: additions are exact, a truncation / floor / rounding at 2^k is an
integer shift, and a truncation at a quantum finer than the unit (k < -SCALE) is the identity
(the value is already a multiple of it). ``fractions.Fraction`` is used only to document/convert
(``to_fraction``).

Input formats (``params.input_format``, :class:`emu.units.InputFormat`), decoded by hand from
their bit patterns (``decode_input``):

* fp16 (1.5.10, bias 15), bf16 (1.8.7, bias 127) and e5m2 (1.5.2, bias 15): IEEE-like, exponent
  field all ones = inf (fraction 0) or NaN;
* tf32: an fp32 pattern (1.8.23, bias 127) whose 13 low fraction bits the unit drops (RZ to 10
  fraction bits) *before* decoding (MMA-Sim truncate_fp32_to_tf32: a NaN whose payload lies in
  those bits becomes an infinity);
* e4m3 (OCP e4m3fn, 1.4.3, bias 7): no infinity, NaN = S.1111.111 only, max 448;
* e4m3fnuz (bias 8) and e5m2fnuz (bias 16): no infinity, no −0, the one NaN is 0x80; every other
  pattern with the exponent field all ones is finite (max 240 / 57344).

A subnormal or zero operand has the field exponent 1 − bias (fp16 −14, bf16 and tf32 −126, e4m3
−6, e5m2 −14, e4m3fnuz −7, e5m2fnuz −15); a normal one its unbiased exponent.

Semantics (MMA-Sim, PyPI mmasim 2.1.1, ``mmasim/arithmetic/{fdpa,ftz_mul_add,fma}.py``):

* K is consumed from k = 0 upward in consecutive groups of ``group_size`` (the last may be
  shorter); each group updates the running accumulator ``c``.
* Field exponent: as above for the operands; fp32 c: unbiased exponent, subnormal/zero → −126
  (fp16 c: −14). A product's exponent is the sum of its factors' field exponents.
* Flush flags (any family): ``flush_inputs``: |x| below the input format's smallest normal
  (−0 included) → +0 before the products; ``flush_c``: |c| below the smallest normal of c's
  format (−0 included) → +0, once, on entry; ``flush_products``: fp32-subnormal product → zero
  of its sign (never fires for fp16 or fp8 factors: |p| ≥ 2^-48); ``flush_partials`` (PAIRWISE
  tree adds) and ``flush_output`` (the value the group leaves in c) → subnormal becomes zero of
  its sign.
* Per family, beyond SPEC §4: PAIRWISE rounds each product to fp32 (RNE; exact for fp16 and fp8,
  not for bf16: an fp32 subnormal loses bits, 2^128 and up overflows to ±inf: MMA-Sim ftz_mul's
  ``x.float() * y.float()``) before its flush, pads a short group with +0 products to
  ``group_size`` and reduces adjacent pairs level by level (4: (p0+p1)+(p2+p3);
  8: ((01)(23))((45)(67)); 2: p0+p1; 1: p0 itself), then c + s. TRUNCATED_FUSED gives zero terms
  (c included) ``zero_exponent``; a short group is not padded (mmasim slices; padding could not
  change the result); the fp32 result is rounded to ``output_fraction_bits`` fraction bits in
  fp32's exponent range (23: fp32; 13: E8M13, on the grid 2^(-126-13) below 2^-126). TWO_STAGE
  turns a product ≥ 2^128 in magnitude into ±inf before stage 1 (mmasim tr_fdpa), leaves zero
  products out of the maximum (exponent −999; all zero → s_dot = +0), floors toward −∞ in stage
  2 and normalises with the fp32 floor −126. With ``interleaved_sums == 2`` (MI300 fp8,
  mmasim gtr_fdpa) stage 1 is two truncated sums, of the group's even and odd products (each
  aligned to its own largest exponent, −999 when all its products are zero or it has none),
  merged by flooring each at 2^(e_dot − F), e_dot the larger of the two exponents; in stage 2 c
  adds nothing when its field exponent is below e_max − F − 1. FP64 holds c exactly in binary64,
  adds each exact product with one binary64 RNE rounding, and rounds to fp32
  (``output_rounding``) after each group if ``round_each_group`` else once at the end
  (``flush_output`` applies to those fp32 values). FMA and FP64 take the exact product of any
  format (bf16 and tf32 products reach 2^-272 and 2^256).
* Signed zero of a result (mmasim, checked by running it on every ±0 combination):
  FUSED_EXACT, TRUNCATED_FUSED and TWO_STAGE never return −0 (E-FDPA's two-sum expansion,
  T-FDPA's ``+ 0.0``, and TR-FDPA's ``torch.sum`` of the products, which starts from +0, so
  ``s_dot + s_c`` is +0); PAIRWISE, FMA, FP64 follow IEEE 754 addition (x + (−x) = +0,
  (−0) + (−0) = −0, RD gives −0 for an exact zero sum of opposite signs).
* NaN / infinity: a NaN factor or c, inf·0, or +inf and −inf in one sum give NaN; otherwise an
  infinite product or c gives that infinity (for the fused families this is the group's result;
  for PAIRWISE / FMA / FP64 it is IEEE arithmetic step by step). The NaN returned is canonical
  (0x7FFFFFFF / 0x7FFF, as mmasim writes them); callers should compare NaNs as equal whatever
  their payload. (Not modelled: mmasim gtr_fdpa also drops an infinite or NaN c once e_max ≥ 25,
  because torch.frexp gives them the exponent 0; a special c here always decides the result.)
* Overflow: IEEE rule for the output rounding (RNE → ±inf; RZ → ±max finite; RD → +max / −inf),
  except TRUNCATED_FUSED's RZ fp32 output with bf16 or tf32 operands, which is ±inf from 2^128
  up (mmasim's "RZ-FP32" converts the truncated value to float32; bf16 and tf32 products reach
  2^256, in every family). fp16 and fp8 operands with an fp32 c reach 2^128 in T-FDPA only
  through RD alignment (a variant, not a unit: each term moves down by up to 2^(127−F)); there
  the IEEE rule (±max finite) stays, as ``emu`` computes it.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from emu.units import Family, Format, InputFormat, Rounding, UnitParams

__all__ = [
    "reference_dot_add",
    "reference_batch",
    "SCALE",
    "decode_fp16",
    "decode_fp32",
    "decode_input",
    "INPUT_LAYOUT",
    "to_fraction",
    "rn32",
    "NAN32",
    "NAN16",
]

SCALE = 280  # a finite value v is the integer v · 2^SCALE (≥ 272: tf32 products)
NAN32 = 0x7FFFFFFF
NAN16 = 0x7FFF

FIN, INF, NAN = 0, 1, 2  # kinds

# Binary formats: (precision in bits incl. the leading one, emin, emax)
_FP16 = (11, -14, 15)
_FP32 = (24, -126, 127)
_FP64 = (53, -1022, 1023)


# --------------------------------------------------------------------------------------------
# values: (kind, v, neg) with v the signed integer in units of 2^-SCALE (0 for zeros and
# specials) and neg the sign bit (meaningful for zeros and infinities too)
# --------------------------------------------------------------------------------------------


_NANV = (NAN, 0, False)


def rn32(q: Fraction) -> np.float32:
    """An exact value rounded to fp32, to nearest, ties to even (+0 for 0; subnormals on fp32's
    grid; no overflow: the callers' values are far below 2^128)."""
    if q == 0:
        return np.float32(0.0)
    neg, m = q < 0, abs(q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    ulp = Fraction(2) ** (max(e, -126) - 23)
    n = m / ulp
    fl = n.numerator // n.denominator
    if n - fl > Fraction(1, 2) or (n - fl == Fraction(1, 2) and fl % 2):
        fl += 1
    return np.float32(-float(fl * ulp) if neg else float(fl * ulp))


def _inf(neg: bool):
    return (INF, 0, neg)


def to_fraction(x) -> Fraction:
    kind, v = x[0], x[1]
    if kind != FIN:
        raise ValueError("not finite")
    return Fraction(v, 1 << SCALE)


def _log2_floor(m: int) -> int:
    """floor(log2(m · 2^-SCALE)) for m > 0."""
    return m.bit_length() - 1 - SCALE


def _field_exponent(v: int, emin: int) -> int:
    """Field exponent of a finite value: its binade, and emin for subnormals and zero."""
    if v == 0:
        return emin
    return max(_log2_floor(abs(v)), emin)


#: Each input format's bit layout: (exponent bits, fraction bits, bias, specials), specials one of
#: "ieee" (exponent field all ones: inf or NaN), "fn" (no inf; NaN = S.1…1.1…1 only) and "fnuz"
#: (no inf, no −0; NaN = the pattern 1.0…0.0…0 only). tf32 is held in an fp32 pattern.
INPUT_LAYOUT = {
    InputFormat.FP16: (5, 10, 15, "ieee"),
    InputFormat.BF16: (8, 7, 127, "ieee"),
    InputFormat.TF32: (8, 23, 127, "ieee"),
    InputFormat.E4M3: (4, 3, 7, "fn"),
    InputFormat.E5M2: (5, 2, 15, "ieee"),
    InputFormat.E4M3FNUZ: (4, 3, 8, "fnuz"),
    InputFormat.E5M2FNUZ: (5, 2, 16, "fnuz"),
}
_TF32_KEEP = ~((1 << 13) - 1) & 0xFFFFFFFF  # tf32: the unit drops fp32's 13 low fraction bits


def input_emin(fmt) -> int:
    """The field exponent of the format's subnormals and zero: 1 − bias."""
    return 1 - INPUT_LAYOUT[InputFormat(fmt)][2]


@lru_cache(maxsize=1 << 17)
def decode_input(bits: int, fmt: int):
    """(kind, v, neg, field exponent) of an operand bit pattern of ``fmt`` (an InputFormat).

    v is the signed value in units of 2^-SCALE (0 for zeros and specials); the field exponent is
    the unbiased exponent of a normal value, 1 − bias for subnormals and zeros (0 for specials).
    """
    fmt = InputFormat(fmt)
    ebits, fbits, bias, specials = INPUT_LAYOUT[fmt]
    width = 1 + ebits + fbits
    bits = int(bits) & ((1 << width) - 1)
    if fmt == InputFormat.TF32:
        bits &= _TF32_KEEP
    neg = bool(bits >> (width - 1))
    e = (bits >> fbits) & ((1 << ebits) - 1)
    f = bits & ((1 << fbits) - 1)
    emask = (1 << ebits) - 1
    if specials == "ieee" and e == emask:
        return (NAN, 0, False, 0) if f else (INF, 0, neg, 0)
    if specials == "fn" and e == emask and f == (1 << fbits) - 1:
        return (NAN, 0, False, 0)
    if specials == "fnuz" and bits == 1 << (width - 1):
        return (NAN, 0, False, 0)
    if e == 0:
        m = f << (SCALE + 1 - bias - fbits)  # f · 2^(1 - bias - fbits)
    else:
        m = ((1 << fbits) | f) << (SCALE + e - bias - fbits)  # (1.f) · 2^(e - bias)
    return (FIN, -m if neg else m, neg, max(e, 1) - bias)


def decode_fp16(bits: int):
    """decode_input for fp16 patterns."""
    return decode_input(bits, InputFormat.FP16)


@lru_cache(maxsize=1 << 16)
def decode_fp32(bits: int):
    bits = int(bits) & 0xFFFFFFFF
    neg = bool(bits >> 31)
    e = (bits >> 23) & 0xFF
    f = bits & 0x7FFFFF
    if e == 0xFF:
        return _NANV if f else _inf(neg)
    if e == 0:
        m = f << (SCALE - 149)  # f · 2^-149
    else:
        m = (0x800000 | f) << (SCALE + e - 150)  # (1.f) · 2^(e-127)
    return (FIN, -m if neg else m, neg)


def _encode(x, fmt) -> int:
    """Bits of a value that is exactly representable in fmt (FP32 or FP16)."""
    kind, v, neg = x[:3]
    if fmt == Format.FP16:
        ebits, fbits, (_prec, emin, emax) = 5, 10, _FP16
        nan = NAN16
    else:
        ebits, fbits, (_prec, emin, emax) = 8, 23, _FP32
        nan = NAN32
    sign = (1 << (ebits + fbits)) if neg else 0
    if kind == NAN:
        return nan
    emask = (1 << ebits) - 1
    if kind == INF:
        return sign | (emask << fbits)
    m = abs(v)
    if m == 0:
        return sign
    e = _log2_floor(m)
    if e < emin:  # subnormal: m = f · 2^(emin - fbits)
        shift = SCALE + emin - fbits
        f = m >> shift
        assert f << shift == m and f < (1 << fbits), "not representable (subnormal)"
        return sign | f
    shift = SCALE + e - fbits
    sig = m >> shift
    assert sig << shift == m and (1 << fbits) <= sig < (2 << fbits), "not representable"
    assert e <= emax, "overflow not handled before encoding"
    return sign | ((e - emin + 1) << fbits) | (sig - (1 << fbits))


# --------------------------------------------------------------------------------------------
# rounding, truncation, floor
# --------------------------------------------------------------------------------------------


def _round(v: int, fmt3, mode: int, neg_if_zero: bool, overflow_inf: bool = False):
    """Round the exact finite value v to the binary format (prec, emin, emax) with subnormals.

    Returns a value tuple. Overflow follows IEEE for the mode, or gives ±inf in every mode with
    ``overflow_inf`` (mmasim's RZ-FP32). A zero input returns a zero with sign neg_if_zero; a
    nonzero value that rounds to zero keeps its own sign.
    """
    prec, emin, emax = fmt3
    if v == 0:
        return (FIN, 0, neg_if_zero)
    neg = v < 0
    m = -v if neg else v
    e = max(_log2_floor(m), emin)
    shift = SCALE + e - (prec - 1)  # the ulp at v, 2^(e - prec + 1), is 1 << shift units
    if shift > 0:
        q = m >> shift
        r = m - (q << shift)
        if mode == Rounding.RNE:
            half = 1 << (shift - 1)
            if r > half or (r == half and (q & 1)):
                q += 1
        elif mode == Rounding.RZ:
            pass
        elif mode == Rounding.RD:
            if neg and r:
                q += 1
        else:
            raise ValueError(f"unknown rounding {mode}")
        m = q << shift
    if m >= 1 << (SCALE + emax + 1):
        if overflow_inf or mode == Rounding.RNE or (mode == Rounding.RD and neg):
            return _inf(neg)
        maxfin = ((1 << prec) - 1) << (SCALE + emax - prec + 1)
        return (FIN, -maxfin if neg else maxfin, neg)
    return (FIN, -m if neg else m, neg)


def _cut_at(v: int, k: int, mode) -> int:
    """v cut to a multiple of 2^k: toward −∞ for RD, toward zero otherwise."""
    return _floor_at(v, k) if mode == Rounding.RD else _trunc_at(v, k)


def _trunc_at(v: int, k: int) -> int:
    """v truncated toward zero to a multiple of 2^k."""
    s = SCALE + k
    if s <= 0:
        return v
    m = (-v if v < 0 else v) >> s << s
    return -m if v < 0 else m


def _floor_at(v: int, k: int) -> int:
    """v rounded toward −∞ to a multiple of 2^k (Python's >> is a floor)."""
    s = SCALE + k
    if s <= 0:
        return v
    return (v >> s) << s


def _flush_to_pos_zero(x, emin: int):
    if x[0] == FIN and abs(x[1]) < (1 << (SCALE + emin)):
        return (FIN, 0, False, emin)
    return x


def _flush_keep_sign(x, emin: int):
    if x[0] == FIN and x[1] != 0 and abs(x[1]) < (1 << (SCALE + emin)):
        return (FIN, 0, x[2])
    return x


# --------------------------------------------------------------------------------------------
# exact arithmetic with IEEE specials
# --------------------------------------------------------------------------------------------


def _mul(x, y):
    """Exact product of two operand values (kind, v, neg, ...)."""
    kx, vx, nx = x[:3]
    ky, vy, ny = y[:3]
    neg = nx != ny
    if kx == NAN or ky == NAN:
        return _NANV
    if kx == INF or ky == INF:
        if (kx == FIN and vx == 0) or (ky == FIN and vy == 0):
            return _NANV
        return _inf(neg)
    v = vx * vy  # exact in units of 2^-SCALE: both are multiples of 2^(SCALE-136)
    assert v & ((1 << SCALE) - 1) == 0, "product below the 2^-SCALE grid"
    return (FIN, v >> SCALE, neg)


def _special_sum(terms):
    """IEEE result of summing terms if any is special (NaN / inf), else None."""
    if not any(t[0] for t in terms):
        return None
    infs = set()
    for kind, _, neg, *_ in terms:
        if kind == NAN:
            return _NANV
        if kind == INF:
            infs.add(neg)
    if len(infs) == 2:
        return _NANV
    if infs:
        return _inf(infs.pop())
    return None


def _ieee_add(x, y, fmt3, mode):
    """IEEE 754 addition x + y rounded once to fmt3 in mode, signed zeros as IEEE says."""
    sp = _special_sum((x, y))
    if sp is not None:
        return sp
    s = x[1] + y[1]
    if s == 0:
        if x[1] == 0 and y[1] == 0 and x[2] == y[2]:
            neg = x[2]  # (+0)+(+0) = +0, (−0)+(−0) = −0
        else:
            neg = mode == Rounding.RD  # exact zero sum of opposite signs
        return (FIN, 0, neg)
    return _round(s, fmt3, mode, False)


# --------------------------------------------------------------------------------------------
# one group of each family: (products' factors, c) → new c
# --------------------------------------------------------------------------------------------


def _products(ga, gb, params, round_fp32: bool = False):
    """[(value tuple, exponent)] of the group's products; inputs already flushed if asked.

    The exponent is the sum of the factors' field exponents (decode_input's 4th element; an
    input flushed to +0 keeps its format's). The product is exact, or with ``round_fp32``
    rounded to fp32 in RNE (PAIRWISE: ``x.float() * y.float()``), before ``flush_products``.
    """
    out = []
    for x, y in zip(ga, gb):
        p = _mul(x, y)
        if round_fp32:
            p = _round_keep_specials(p, _FP32, Rounding.RNE)
        if params.flush_products:
            p = _flush_keep_sign(p, _FP32[1])
        out.append((p, x[3] + y[3]))
    return out


def _group_fused_exact(ga, gb, c, params, out_fmt3):
    prods = _products(ga, gb, params)
    sp = _special_sum([p for p, _ in prods] + [c])
    if sp is not None:
        return sp
    s = c[1] + sum(p[1] for p, _ in prods)
    # mmasim e_fdpa never returns −0 (checked on all ±0 combinations): an exact zero is +0.
    return _round(s, out_fmt3, params.output_rounding, False)


def _group_truncated_fused(ga, gb, c, params, out_fmt3, c_emin):
    prods = _products(ga, gb, params)
    sp = _special_sum([p for p, _ in prods] + [c])
    if sp is not None:
        return sp
    terms = [(p[1], e if p[1] != 0 else params.zero_exponent) for p, e in prods]
    terms.append((c[1], _field_exponent(c[1], c_emin) if c[1] != 0 else params.zero_exponent))
    e_max = max(e for _, e in terms)
    k = e_max - params.fraction_bits
    s = sum(_cut_at(v, k, params.alignment_rounding) for v, _ in terms)
    # fp32 output: ``output_fraction_bits`` (E8M13: 13) in fp32's exponent range; mmasim's RZ
    # converts the truncated value to float32, so RZ overflows to ±inf from 2^128 up; kept to
    # bf16/tf32 operands (fp16 and fp8 ones reach 2^128 only with RD alignment: IEEE RZ there)
    fp32_rz = (
        out_fmt3 is not _FP16
        and params.output_rounding == Rounding.RZ
        and params.input_format in (InputFormat.BF16, InputFormat.TF32)
    )
    if out_fmt3 is not _FP16:
        out_fmt3 = (params.output_fraction_bits + 1, _FP32[1], _FP32[2])
    r = _round(s, out_fmt3, params.output_rounding, False, overflow_inf=fp32_rz)
    if r[0] == FIN and r[1] == 0:
        return (FIN, 0, False)  # mmasim t_fdpa: "+ 0.0": a zero result is +0
    return r


_E_ZERO_PRODUCT = -999  # mmasim tr_fdpa: zero products are left out of the maximum


_TWO_128 = 1 << (SCALE + 128)


def _clip_overflow(p):
    """mmasim tr_fdpa: a finite product ≥ 2^128 in magnitude is ±inf before stage 1."""
    if p[0] == FIN and abs(p[1]) >= _TWO_128:
        return _inf(p[2])
    return p


def _stage1(prods, F, mode):
    """A truncated fused sum of products [(value, exponent)]: (e_dot, s_dot), e_dot the largest
    exponent of the nonzero ones (−999 if none), s_dot Σ cut(p at 2^(e_dot − F))."""
    nonzero = [(p[1], e) for p, e in prods if p[1] != 0]
    e_dot = max((e for _, e in nonzero), default=_E_ZERO_PRODUCT)
    return e_dot, sum(_cut_at(v, e_dot - F, mode) for v, _ in nonzero)


def _group_two_stage(ga, gb, c, params, out_fmt3):
    prods = [(_clip_overflow(p), e) for p, e in _products(ga, gb, params)]
    sp = _special_sum([p for p, _ in prods] + [c])
    if sp is not None:
        return sp
    F, F2 = params.fraction_bits, params.sum_fraction_bits
    if params.interleaved_sums == 2:
        # GTR-FDPA: even and odd products (positions in the group) as two truncated sums, each
        # floored onto the grid of the larger exponent
        e_even, s_even = _stage1(prods[0::2], F, params.alignment_rounding)
        e_odd, s_odd = _stage1(prods[1::2], F, params.alignment_rounding)
        e_dot = max(e_even, e_odd)
        s_dot = _floor_at(s_even, e_dot - F) + _floor_at(s_odd, e_dot - F)
    else:
        # stage 1: products aligned to their largest exponent, truncated toward zero at F bits
        e_dot, s_dot = _stage1(prods, F, params.alignment_rounding)
    # stage 2: product sum floored at F2+1 bits, c cut at F bits (RD for MI300), relative to e_max
    e_c = _field_exponent(c[1], _FP32[1])
    e_max = max(e_dot, e_c)
    c_cut = _cut_at(c[1], e_max - F, params.c_alignment_rounding)
    if params.interleaved_sums == 2 and e_c < e_max - F - 1:
        c_cut = 0  # GTR-FDPA: a c far below the products adds nothing
    x = _floor_at(s_dot, e_max - (F2 + 1)) + c_cut
    if x == 0:
        # torch.sum starts from +0, so s_dot is never −0 and s_dot + s_c is +0
        return (FIN, 0, False)
    # normalise (fp32 subnormal floor −126) and floor to F2 fraction bits
    e_n = max(_log2_floor(abs(x)), _FP32[1])
    x = _floor_at(x, e_n - F2)
    return _round(x, out_fmt3, params.output_rounding, False)


def _group_pairwise(ga, gb, c, params, out_fmt3):
    G = params.group_size
    prods = [p for p, _ in _products(ga, gb, params, round_fp32=True)]
    prods += [(FIN, 0, False)] * (G - len(prods))  # a short last group: missing products are +0
    level = prods
    while len(level) > 1:
        if len(level) % 2:
            level = level + [(FIN, 0, False)]
        nxt = []
        for i in range(0, len(level), 2):
            s = _ieee_add(level[i], level[i + 1], _FP32, Rounding.RNE)
            if params.flush_partials:
                s = _flush_keep_sign(s, _FP32[1])
            nxt.append(s)
        level = nxt
    s = level[0]
    return _ieee_add(c, s, out_fmt3, params.output_rounding)


def _group_fma(ga, gb, c, params, out_fmt3):
    for p, _ in _products(ga, gb, params):
        c = _ieee_add(c, p, out_fmt3, params.output_rounding)  # exact p, one rounding: an FMA
    return c


def _fp64_add_group(ga, gb, acc, params):
    for p, _ in _products(ga, gb, params):
        acc = _ieee_add(acc, p, _FP64, Rounding.RNE)
    return acc


# --------------------------------------------------------------------------------------------


def reference_dot_add(a_bits, b_bits, c_bits: int, params: UnitParams) -> int:
    """d = c + Σ a_k·b_k as the unit computes it; returns the result's bits.

    a_bits, b_bits: sequences of bit patterns (ints) of ``params.input_format`` (fp16, bf16:
    16 bits; tf32: fp32 patterns; fp8: 8 bits), b's of ``params.b_input_format`` where that is
    set (≥ 0: mixed fp8, each operand decoded in its own format), same length K. c_bits: fp32 bits, or fp16 bits
    when ``params.output_format`` is FP16. Returns fp32 (or fp16) bits.
    """
    p = params
    fam = Family(p.family)
    out_fmt = Format(p.output_format)
    if len(a_bits) != len(b_bits):
        raise ValueError("a and b differ in length")
    if out_fmt == Format.FP16:
        if fam not in (Family.TRUNCATED_FUSED, Family.FUSED_EXACT):
            raise ValueError(f"fp16 output is modelled for TRUNCATED_FUSED / FUSED_EXACT only, not {fam.name}")
        out3, c = _FP16, decode_fp16(c_bits)
    else:
        out3, c = _FP32, decode_fp32(c_bits)
    c_emin = out3[1]
    fmt = InputFormat(p.input_format)
    b_fmt = fmt if p.b_input_format < 0 else InputFormat(p.b_input_format)  # mixed fp8: B's own
    a = [decode_input(x, fmt) for x in a_bits]
    b = [decode_input(x, b_fmt) for x in b_bits]
    if p.flush_inputs:
        a = [_flush_to_pos_zero(x, input_emin(fmt)) for x in a]
        b = [_flush_to_pos_zero(x, input_emin(b_fmt)) for x in b]
    if getattr(p, "step_size", 0):
        return _encode(_steps(a, b, c, p, out3), out_fmt)
    if p.flush_c:
        c = _flush_to_pos_zero(c, c_emin)
    G = int(p.group_size)
    if G < 1:
        raise ValueError("group_size must be ≥ 1")
    K = len(a)

    if fam == Family.FP64:
        acc = c  # an fp32 value is exact in fp64
        for g in range(0, K, G):
            acc = _fp64_add_group(a[g : g + G], b[g : g + G], acc, p)
            if p.round_each_group:
                acc = _round_keep_specials(acc, out3, p.output_rounding)
                if p.flush_output:
                    acc = _flush_keep_sign(acc, c_emin)
        if not p.round_each_group:
            acc = _round_keep_specials(acc, out3, p.output_rounding)
            if p.flush_output:
                acc = _flush_keep_sign(acc, c_emin)
        return _encode(acc, out_fmt)

    for g in range(0, K, G):
        ga, gb = a[g : g + G], b[g : g + G]
        if fam == Family.FUSED_EXACT:
            c = _group_fused_exact(ga, gb, c, p, out3)
        elif fam == Family.TRUNCATED_FUSED:
            c = _group_truncated_fused(ga, gb, c, p, out3, c_emin)
        elif fam == Family.TWO_STAGE:
            c = _group_two_stage(ga, gb, c, p, out3)
        elif fam == Family.PAIRWISE:
            c = _group_pairwise(ga, gb, c, p, out3)
        elif fam == Family.FMA:
            c = _group_fma(ga, gb, c, p, out3)
        else:
            raise ValueError(f"unknown family {fam}")
        if p.flush_output:
            c = _flush_keep_sign(c, c_emin)
    return _encode(c, out_fmt)


def _steps(a, b, c, p: UnitParams, out3):
    """``step_size`` S (an emulated instruction, fp8 mma.sync on Hopper and Blackwell): each
    operand re-read as the fp16 value it equals (its fp16 field exponent), K padded with +0 to
    whole steps; per step, the n = S / group_size groups from +0, group g taking the pairs of
    products (2q, 2q + 1) with q ≡ g (mod n), each a T-FDPA of the fp16 unit; then c + the
    step's result, one IEEE addition, RNE, in the output format."""
    S, L = int(p.step_size), int(p.group_size)
    n = S // L
    inner = p._replace(step_size=0, input_format=InputFormat.FP16, b_input_format=-1, flush_inputs=False)
    widen = [decode_input(_encode(x, Format.FP16), InputFormat.FP16) for x in a]
    b_widen = [decode_input(_encode(x, Format.FP16), InputFormat.FP16) for x in b]
    zero = decode_input(0, InputFormat.FP16)
    while len(widen) % S:
        widen.append(zero)
        b_widen.append(zero)
    for s0 in range(0, len(widen), S):
        part = (FIN, 0, False)
        for g in range(n):
            ks = [s0 + k for k in range(S) if (k // 2) % n == g]
            part = _group_truncated_fused([widen[k] for k in ks], [b_widen[k] for k in ks], part, inner, out3, out3[1])
        c = _ieee_add(c, part, out3, Rounding.RNE)
    return c


def _round_keep_specials(x, fmt3, mode):
    if x[0] != FIN:
        return x
    return _round(x[1], fmt3, mode, x[2])


def reference_batch(args) -> list[int]:
    """``reference_dot_add`` over rows: args = (a rows, b rows, c list, params); picklable for pools."""
    a, b, c, params = args
    return [reference_dot_add(a[i], b[i], c[i], params) for i in range(len(c))]
