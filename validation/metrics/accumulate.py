"""The running state of one comparison: :class:`Accumulator` takes (validation, kernel) chunks as
float64 and measures them in float64 or, in study mode, in the 2022 study verifier's C arithmetic
(:mod:`validation.verify.study2022`); :meth:`Accumulator.result` finishes into a
:class:`~validation.metrics.ComparisonResult`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from emu.formats import FloatFormat, spacing
from emu.rounding import cast_rne, round_rne

from .constants import (
    EPSILON_BUCKETS,
    MLU_DIFF3_THRESHOLDS,
    MLU_EPSILON,
    REL_OLD_BUCKETS,
    REL_OLD_THRESHOLD,
)
from .policy import StudyPolicy
from .reducers import DistinctPairs, FirstMax, PairSum, SeqSum, TopK
from .results import AllClose, ComparisonResult, Histogram, NonFinite

# Upper edges of the buckets of EPSILON_BUCKETS and REL_OLD_BUCKETS between "0" and the last.
_EPS_EDGES = np.array([1.0, 2.0, 10.0, 100.0])
_REL_EDGES = np.array([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0])

_NEG_NAN = math.copysign(math.nan, -1.0)  # x86's default NaN: what 0/0, inf/inf give in C there


def _shares(n_gt: int, n_lt: int) -> tuple[float | None, float | None, int]:
    n = n_gt + n_lt
    if n == 0:
        return (None, None, 0)
    return (n_gt / n, n_lt / n, n)


def _c_div(num: float, den: float) -> float:
    """num / den with C's IEEE results on x86: 0/0 and inf/inf give −NaN, x/0 gives ±inf."""
    if math.isnan(num):
        return num
    if math.isnan(den):
        return den
    if den == 0.0:
        if num == 0.0:
            return _NEG_NAN
        return math.copysign(math.inf, num) * math.copysign(1.0, den)
    if math.isinf(num) and math.isinf(den):
        return _NEG_NAN
    return num / den


class Accumulator:
    """Running state of :func:`compare`; :meth:`add` takes one chunk, :meth:`result` finishes."""

    def __init__(self, *, fmt: FloatFormat, quirks: StudyPolicy | None, top: int,
                 allclose: tuple[float, float], equal_nan: bool, pack32: bool,
                 on_grid: tuple[bool, bool], distinct_pairs: bool = True) -> None:  # fmt: skip
        self.fmt = fmt
        # whether v / k already hold values of fmt (so rounding them to it can be skipped)
        self.v_on_grid, self.k_on_grid = on_grid
        self.quirks = quirks
        self.study = quirks is not None
        self.eps_fmt = "fp16" if self.study else fmt.short_name
        self.rtol, self.atol = allclose
        self.equal_nan = equal_nan
        self.n = 0
        self.n_exact = 0
        self.n_eps1 = 0
        self.n_eps_ge2 = 0
        self.n_eps_other = 0
        self.max_eps = FirstMax()
        self.max_abs = FirstMax()
        self.max_rel = FirstMax()
        self.max_rel_old = FirstMax()
        summer = SeqSum if self.study else PairSum
        self.sum_abs, self.sum_sq, self.sum_rel = summer(), summer(), summer()
        self.max_mag = 0.0
        # float64 metrics over finite elements (MLU-OPS, MIOpen, allclose)
        self.f_max_mag = 0.0
        self.f_sum_d, self.f_sum_d2 = PairSum(), PairSum()
        self.f_sum_b, self.f_sum_b2 = PairSum(), PairSum()
        self.d3_rel, self.d3_abs = FirstMax(), FirstMax()
        self.d3_1, self.d3_2 = FirstMax(), FirstMax()
        self.d3_th = MLU_DIFF3_THRESHOLDS[fmt.short_name]
        # MLU-OPS diff4's distinct pairs (a sort of every mismatch), unless the caller needs no diff4
        self.pairs = DistinctPairs(pack32) if distinct_pairs else None
        self.all_gt = 0
        self.all_lt = 0
        self.close_fail = 0
        self.close_first: int | None = None
        self.native = FirstMax()
        self.native_thr = float(cast_rne(np.array([0.001]), fmt)[0]) if fmt.bits < 32 else None
        # non-finite bookkeeping
        self.nf = dict.fromkeys(
            ("n_nan", "n_nan_validation", "n_nan_kernel", "n_nan_both", "n_inf",
             "n_inf_validation", "n_inf_kernel", "n_inf_equal"), 0)  # fmt: skip
        self.nf_first: list[int] = []
        self.top = top
        self.topk = TopK(top)
        self.eps_hist = np.zeros(len(EPSILON_BUCKETS), dtype=np.int64)
        self.rel_hist = np.zeros(len(REL_OLD_BUCKETS), dtype=np.int64)

    # -- per chunk ---------------------------------------------------------------------------------

    def add(self, start: int, v: np.ndarray, k: np.ndarray) -> None:
        """One chunk: ``v`` validation as compared and ``k`` kernel, both float64, 1-D."""
        size = v.size
        self.n += size
        index0 = np.int64(start)
        eq = v == k
        fin = np.isfinite(v) & np.isfinite(k)
        all_finite = bool(fin.all())
        self.n_exact += int(np.count_nonzero(eq))

        # 1. NaN and infinity, counted apart.
        if not all_finite:
            self._count_nonfinite(start, v, k, eq, fin)
        nonfinite_mismatch = None if all_finite else (~fin & ~eq)
        nan_any = None if all_finite else (np.isnan(v) | np.isnan(k))

        # 2. Magnitudes: the RMS denominators and the MLU-OPS baseline sums.
        av, ak = np.abs(v), np.abs(k)
        if all_finite:
            av_f, ak_f = av, ak
        else:
            av_f, ak_f = av[fin], ak[fin]
        if av_f.size:
            self.f_max_mag = max(self.f_max_mag, float(av_f.max()), float(ak_f.max()))
        self.f_sum_b.add(av_f)
        self.f_sum_b2.add(np.square(av_f))
        if self.study:
            # C: maxMag = std::max(maxMag, std::max(|c|, |g|)); NaN never wins a comparison
            mag = np.where(av < ak, ak, av)
            if mag.size:
                self.max_mag = max(self.max_mag, float(np.fmax.reduce(mag)))

        # 3. Differing elements: float64 metrics over the finite ones.
        ne = ~eq
        diff_all = np.flatnonzero(ne)
        diff_f = diff_all if all_finite else np.flatnonzero(fin & ne)
        vf, kf = v[diff_f], k[diff_f]
        df = np.abs(vf - kf)
        gidx_f = diff_f + index0
        self._mlu_allclose(vf, kf, df, gidx_f)

        # 4. The headline metrics, per mode.
        if self.study:
            self._study_batch(v[diff_all], k[diff_all], diff_all + index0)
        else:
            self._float64_batch(vf, kf, df, gidx_f)

        # 5. allclose: non-finite elements pass only if equal (or both NaN with equal_nan).
        if not all_finite:
            bad = nonfinite_mismatch
            if self.equal_nan:
                bad = bad & ~(np.isnan(v) & np.isnan(k))
            nbad = int(np.count_nonzero(bad))
            if nbad:
                self.close_fail += nbad
                first = int(np.argmax(bad)) + start
                self.close_first = first if self.close_first is None else min(self.close_first, first)

        # 6. The old rocMLIR verifier's quotient in the data type's arithmetic.
        self._native_rel(v[diff_all], k[diff_all])

        # 7. Histograms: elements outside the differing batches.
        self.eps_hist[0] += int(np.count_nonzero(eq))
        self._rel_hist_static(v, eq, av, nan_any, nonfinite_mismatch)

    def add_equal(self, count: int, max_mag: float) -> None:
        """``count`` elements with ``v == k`` that :meth:`add` did not see (study mode's fast path,
        :func:`validation.verify.study2022.compare_differing`): they enter N, ``n_exact`` and the
        study RMS denominator (``max_mag``: the largest max(|v|, |k|) over them, or over all
        elements; the larger of it and the running one is kept), and nothing else (histograms,
        the float64 metrics and their magnitude stay over the elements given to :meth:`add`)."""
        self.n += count
        self.n_exact += count
        self.max_mag = max(self.max_mag, max_mag)

    def _count_nonfinite(self, start: int, v: np.ndarray, k: np.ndarray, eq: np.ndarray,
                         fin: np.ndarray) -> None:  # fmt: skip
        nan_v, nan_k = np.isnan(v), np.isnan(k)
        inf_v, inf_k = np.isinf(v), np.isinf(k)
        nan_any = nan_v | nan_k
        inf_any = (inf_v | inf_k) & ~nan_any
        c = self.nf
        c["n_nan"] += int(np.count_nonzero(nan_any))
        c["n_nan_validation"] += int(np.count_nonzero(nan_v))
        c["n_nan_kernel"] += int(np.count_nonzero(nan_k))
        c["n_nan_both"] += int(np.count_nonzero(nan_v & nan_k))
        c["n_inf"] += int(np.count_nonzero(inf_any))
        c["n_inf_validation"] += int(np.count_nonzero(inf_v))
        c["n_inf_kernel"] += int(np.count_nonzero(inf_k))
        c["n_inf_equal"] += int(np.count_nonzero(inf_any & eq))
        if len(self.nf_first) < self.top:
            where = np.flatnonzero(~fin & ~eq)[: self.top - len(self.nf_first)]
            self.nf_first.extend(int(i) + start for i in where)
        if not self.study:
            self.eps_hist[6] += int(np.count_nonzero(~fin & ~eq))

    def _mlu_allclose(self, vf: np.ndarray, kf: np.ndarray, df: np.ndarray,
                      gidx: np.ndarray) -> None:  # fmt: skip
        """MLU-OPS numerators, diff3/diff4, and allclose over the finite differing elements."""
        self.f_sum_d.add(df)
        self.f_sum_d2.add(np.square(df))
        if df.size == 0:
            return
        ab = np.abs(vf)
        rel_side = ab >= self.d3_th
        self.d3_rel.add(df[rel_side] / (ab[rel_side] + MLU_EPSILON), gidx[rel_side])
        self.d3_abs.add(df[~rel_side], gidx[~rel_side])
        nz = ab != 0
        self.d3_1.add(df[nz] / ab[nz], gidx[nz])
        self.d3_2.add(df, gidx)
        if self.pairs is not None:
            self.pairs.add(vf, kf)
        n_gt = int(np.count_nonzero(kf > vf))
        self.all_gt += n_gt
        self.all_lt += kf.size - n_gt
        fail = df > self.atol + self.rtol * ab
        nfail = int(np.count_nonzero(fail))
        if nfail:
            self.close_fail += nfail
            first = int(gidx[int(np.argmax(fail))])
            self.close_first = first if self.close_first is None else min(self.close_first, first)

    def _float64_batch(self, v: np.ndarray, k: np.ndarray, d: np.ndarray,
                       gidx: np.ndarray) -> None:  # fmt: skip
        """The headline metrics over finite differing elements, in float64."""
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = d / spacing(np.minimum(np.abs(v), np.abs(k)), self.eps_fmt, "ulp")
        nz = v != 0
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(nz, d / np.abs(v), np.nan)
        old = np.abs(v) > REL_OLD_THRESHOLD
        self._common_batch(v, k, d, eps, rel, nz, old, gidx)
        self._rel_hist_batch(rel[old & nz], nan_bucket=False)

    def _study_batch(self, v: np.ndarray, k: np.ndarray, gidx: np.ndarray) -> None:
        """The study verifier's loop body over ``cpuVal != gpuVal``, vectorised
        (:mod:`validation.verify.study2022`)."""
        q = self.quirks
        assert q is not None
        c32, g32 = v.astype(np.float32), k.astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            abs32 = np.abs(c32 - g32)  # float absDiff = fabs(cpuVal - gpuVal)
            ac, ag = np.abs(c32), np.abs(g32)
            m32 = np.where(ag < ac, ag, ac)  # std::min(|c|, |g|)
            interval = q.interval(m32)
        with np.errstate(divide="ignore", invalid="ignore"):
            eps = (abs32 / interval).astype(np.float64)  # float division, exact (power of two)
        d = abs32.astype(np.float64)
        nz = c32 != 0  # NaN != 0 is true, as in C
        ac64 = ac.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(nz, d / ac64, np.nan)
        # Signs of NaN as x86 makes them: fabs gives +NaN; inf/inf the default −NaN.
        rel = np.where(np.isnan(d), math.nan, rel)
        rel = np.where(nz & np.isinf(d) & np.isinf(ac64), _NEG_NAN, rel)
        thr = q.rel_old_threshold
        old = (c32 > thr) if q.rel_old_signed else (ac > thr)  # NaN compares false
        self._common_batch(v, k, d, eps, rel, nz, old, gidx)
        in_dom = old & nz & ~np.isnan(v) & ~np.isnan(k)
        self._rel_hist_batch(rel[in_dom], nan_bucket=True)
        # ε histogram: NaN ε (a NaN input) is the "nonfinite" bucket, inf ε is ">100"
        nan_eps = np.isnan(eps)
        self.eps_hist[6] += int(np.count_nonzero(nan_eps))

    def _common_batch(self, v: np.ndarray, k: np.ndarray, d: np.ndarray, eps: np.ndarray,
                      rel: np.ndarray, nz: np.ndarray, old: np.ndarray,
                      gidx: np.ndarray) -> None:  # fmt: skip
        """Counts, maxima, sums, ε histogram and worst list of one batch of differing elements."""
        one = eps == 1.0
        ge2 = eps >= 2.0
        self.n_eps1 += int(np.count_nonzero(one))
        self.n_eps_ge2 += int(np.count_nonzero(ge2))
        self.n_eps_other += eps.size - int(np.count_nonzero(one)) - int(np.count_nonzero(ge2))
        self.max_eps.add(eps, gidx)
        self.max_abs.add(d, gidx)
        self.sum_abs.add(d)
        self.sum_sq.add(np.square(d))
        self.max_rel.add(rel[nz], gidx[nz])
        self.sum_rel.add(rel[nz])
        sel = old & nz
        self.max_rel_old.add(rel[sel], gidx[sel])
        # (0,1], (1,2], (2,10], (10,100], >100 from cumulative counts; NaN is in none of them
        at_most = [int(np.count_nonzero(eps <= e)) for e in _EPS_EDGES]
        at_most.append(at_most[-1] + int(np.count_nonzero(eps > _EPS_EDGES[-1])))
        self.eps_hist[1:6] += np.diff(np.array([0, *at_most]))
        self.topk.add(eps, gidx)

    def _rel_hist_batch(self, rel: np.ndarray, *, nan_bucket: bool) -> None:
        """relDiff_old buckets of differing elements inside the relDiff_old domain."""
        nan = np.isnan(rel)
        if nan_bucket:
            self.rel_hist[11] += int(np.count_nonzero(nan))
        r = rel[~nan]
        below = [int(np.count_nonzero(r < e)) for e in _REL_EDGES]  # (0,1e-6), [1e-6,1e-5), …
        self.rel_hist[1:9] += np.diff(np.array([0, *below, r.size]))

    def _rel_hist_static(self, v: np.ndarray, eq: np.ndarray, av: np.ndarray,
                         nan_any: np.ndarray | None,
                         nonfinite_mismatch: np.ndarray | None) -> None:  # fmt: skip
        """relDiff_old buckets that need no per-element error: nonfinite, v == 0, excluded, 0."""
        if self.study:
            bad = nan_any
        else:
            bad = nonfinite_mismatch
        valid = np.ones(v.size, bool) if bad is None else ~bad
        if bad is not None:
            self.rel_hist[11] += int(np.count_nonzero(bad))
        zero = valid & (v == 0)
        if self.study:
            assert self.quirks is not None
            thr = self.quirks.rel_old_threshold
            signed = self.quirks.rel_old_signed
            dom = (v > thr) if signed else (av > thr)
        else:
            dom = av > REL_OLD_THRESHOLD
        dom = dom & valid & ~zero
        self.rel_hist[9] += int(np.count_nonzero(zero))
        self.rel_hist[10] += int(np.count_nonzero(valid & ~zero & ~dom))
        self.rel_hist[0] += int(np.count_nonzero(dom & eq))

    def _native_rel(self, v: np.ndarray, k: np.ndarray) -> None:
        """max |(v − k)/v| in the data type's arithmetic (the old rocMLIR verifier, Aug 2022)."""
        if v.size == 0:
            return
        fmt = self.fmt
        with np.errstate(all="ignore"):
            if fmt.short_name == "fp16":
                # numpy's float16 ufuncs are slow; the same results in float64: c − g is exact
                # there, and one float64 rounding before the fp16 one is innocuous for − and ÷
                # of fp16 operands (53 >= 2·11 + 2, Figueroa 1995)
                c = v if self.v_on_grid else round_rne(v, fmt)
                g = k if self.k_on_grid else round_rne(k, fmt)
                diff = (c - g).astype(np.float16).astype(np.float64)
                rel = np.abs((diff / c).astype(np.float16)).astype(np.float64)
            else:
                c, g = cast_rne(v, fmt), cast_rne(k, fmt)
                rel = np.abs((c - g) / c).astype(np.float64)
            keep = c != g
            if self.native_thr is not None:
                keep &= np.abs(c) > self.native_thr
        r = rel[keep]
        self.native.add(r, np.zeros(r.size, dtype=np.int64))

    # -- finish ------------------------------------------------------------------------------------

    def result(self, *, shape: tuple[int, ...], element: Any, round_validation: str | None,
               input_dtypes: tuple[str, str]) -> ComparisonResult:  # fmt: skip
        n = self.n
        if self.study:
            ave_abs = _c_div(self.sum_abs.value, float(n))
            ave_rel = _c_div(self.sum_rel.value, float(n))
            s = self.sum_sq.value
            rms = _c_div(s if math.isnan(s) else math.sqrt(s), self.max_mag * math.sqrt(n))
        else:
            ave_abs = self.sum_abs.value / n if n else 0.0
            ave_rel = self.sum_rel.value / n if n else 0.0
            s = self.sum_sq.value
            rms = 0.0 if s == 0.0 else math.sqrt(s) / (math.sqrt(n) * self.f_max_mag)
        s2 = self.f_sum_d2.value
        mag = max(self.f_max_mag, np.finfo(np.float64).tiny)
        miopen_rms = 0.0 if n == 0 else math.sqrt(s2) / (math.sqrt(n) * mag)
        diff1 = self.f_sum_d.value / (self.f_sum_b.value + MLU_EPSILON)
        diff2 = math.sqrt(s2 / (self.f_sum_b2.value + MLU_EPSILON))
        distinct = None if self.pairs is None else self.pairs.counts()

        trackers = {"epsilon_diff": self.max_eps, "abs_diff": self.max_abs,
                    "rel_diff": self.max_rel, "rel_diff_old": self.max_rel_old}  # fmt: skip
        at_max = {key: None if t.index is None else element(t.index) for key, t in trackers.items()}
        nonfinite = NonFinite(**self.nf)
        return ComparisonResult(
            n=n,
            shape=shape,
            dtype=self.fmt.short_name,
            validation_dtype=input_dtypes[0],
            kernel_dtype=input_dtypes[1],
            epsilon_format=self.eps_fmt,
            round_validation=round_validation,
            study_quirks=self.quirks,
            n_exact=self.n_exact,
            n_eps1=self.n_eps1,
            n_eps_ge2=self.n_eps_ge2,
            n_eps_other=self.n_eps_other,
            max_epsilon_diff=self.max_eps.value,
            max_abs_diff=self.max_abs.value,
            ave_abs_diff=ave_abs,
            max_rel_diff=self.max_rel.value,
            max_rel_diff_old=self.max_rel_old.value,
            ave_rel_diff=ave_rel,
            rms=rms,
            miopen_rms=miopen_rms,
            diff1=diff1,
            diff2=diff2,
            diff3=(self.d3_rel.value, self.d3_abs.value),
            diff3_1=self.d3_1.value,
            diff3_2=self.d3_2.value,
            diff4=_shares(*distinct) if distinct else _shares(self.all_gt, self.all_lt),
            diff4_distinct=distinct is not None,
            diff4_all=_shares(self.all_gt, self.all_lt),
            diff4_measured=self.pairs is not None,
            allclose=AllClose(self.rtol, self.atol, self.equal_nan, self.close_fail, self.close_first),
            max_rel_diff_old_native=self.native.value,
            nonfinite=nonfinite,
            epsilon_histogram=Histogram(EPSILON_BUCKETS, tuple(int(c) for c in self.eps_hist), n),
            rel_old_histogram=Histogram(REL_OLD_BUCKETS, tuple(int(c) for c in self.rel_hist), n),
            at_max=at_max,
            worst=tuple(element(int(i)) for i in self.topk.index),
            nonfinite_elements=tuple(element(i) for i in sorted(self.nf_first)[: self.top]),
        )
