"""Explain a failure: attribute the kernel's error to its sources.

Five error sources, each a *switch* of the kernel model that can be turned on alone:

==========================  =====================================================================
``subnormal_flush``         inputs below the format's smallest normal (fp16 2^-14, bf16 2^-126)
                            set to +0: the ``flush_inputs`` field of the unit (MI200 matrix cores;
                            the cpu-ftz validator)
``order``                   the accumulation order: the kernel's gemmK order, zero padding and
                            split-K (with its fp32 atomic adds) vs the reference's loop order
``accumulation_rounding``   rounding inside the accumulation: the kernel's unit (fused exact,
                            pairwise, truncated, per-step fp32 FMA) vs an fp64 accumulator
``output_rounding``         the final fp32 → fp16 (or bf16) rounding (RNE) of the outputs that
                            stay finite
``overflow``                outputs beyond the fp16 (or bf16) range becoming ±inf
==========================  =====================================================================

**Formats.** The tensors are fp16 or bf16 (the config's ``-t``; the kernel model's ``input``):
every switch, the reference's fp64 unit, epsilonDiff and the verdict take that format. A switch
that cannot act says why in :attr:`Explanation.inactive`; in bf16, whose exponent range is
fp32's, ``overflow`` is inactive unless an output reaches about 3.4e38, and the harness's bf16
inputs are never subnormal.

**The two ends.** With every switch off the model is the *reference*: ``reference="exact"``
(default) is the convolution accumulated in fp64 in the validator's loop order, nothing flushed,
rounded once to fp32 at the end and left there. It is not the exact real sum: it differs from it
by at most one fp32 rounding (2^-24 relative, 1/8192 of an fp16 ulp) plus K fp64 roundings —
exact enough to measure fp16 errors against, and it is what ``models.unit("fp64")`` computes.
``reference="validator"`` puts the chosen validation function at that end instead (its flush,
unit, order, and the fp16 rounding, RNE (MLIR's ``arith.truncf``), that the 2022 verifier applied
to the validation value before comparing): that explains the failing comparison itself.
With every switch on the model is the emulated kernel, bit for bit what ``validation.run.run``
gives. A variant S (the set of switches on) is computed by ``emu``: a unit from
``dataclasses.replace`` of the kernel's or the reference's :class:`models.units.Unit` with
``flush_inputs`` set by the flush switch, the kernel's or the reference's
:class:`emu.gemm.GemmOrder`, then an elementwise post-pass (the kernel's own fp32 → fp16 cast, on
the elements that stay finite and/or on those that overflow). ``validation`` implements no
arithmetic: the fp16 cast is numpy's (RNE, overflow to ±inf: the kernel's output conversion, as in
``validation.run``).

**Shared work.** Only flush, order and accumulation rounding change the GEMMs, so at most
2^3 = 8 GEMM variants run, in one pass over the convolution that gathers every operand chunk once;
a switch that cannot change anything is not computed twice (no subnormal or −0 input: flush is a
no-op; the kernel's order equals the reference's: order is a no-op; equal GEMM outputs are shared).
The 2^5 = 32 variants are then post-passes, and every distinct array is measured once with
:func:`validation.metrics.compare` against the reference.

**Shares.** v(S) = metric(reference, variant S). The Shapley share (Shapley 1953; Lundberg & Lee
2017) of source i is Σ_{S∌i} |S|!(n−|S|−1)!/n! · (v(S∪{i}) − v(S)); the shares sum to
v(all) − v(∅), and the *interaction* reported is total − Σ shares = v(∅), which is 0 when the
all-off variant is the reference itself (always so here; reported so a non-zero value would
show). ``main_effects`` gives v({i}) − v(∅) as well: total − Σ main effects is how far the
sources are from additive. Metrics that skip non-finite elements (maxima, RMS) lose an element
that overflows, so overflow's share there can be negative; its count is the metric
``n_nonfinite``.

**Elements.** For the ``top`` elements by epsilonDiff (non-finite mismatches first), the smallest
set of sources whose variant reproduces the kernel's value bit for bit (by size, then by the
sources' Shapley rank), and each source's Shapley share of that element's epsilonDiff.

Public API: :func:`explain` (a config), :func:`explain_problem` (a problem and tensors),
:class:`Explanation` (``.to_dict()``, ``.format_text()``, ``.plot()``), :func:`shapley`;
the command line: :mod:`validation.cli.explain`.

The stages, one module each: :mod:`.sources` (the switches, subsets as bit masks, Shapley values),
:mod:`.variants` (the two ends, the GEMM settings, the one-pass GEMMs, the output post-passes),
:mod:`.design` (the 2^5 variants measured, the shares, the worst elements; :func:`explain` for a
config), :mod:`.verdict` (the paragraph in words), :mod:`.results` (the result records, their text
and chart) and :mod:`.cli` (the ``explain`` subcommand).
"""

from __future__ import annotations

from .explainer import DEFAULT_METRICS, REFERENCES, explain, explain_problem
from .results import ElementExplanation, Explanation, MetricShares
from .sources import SOURCE_TITLES, SOURCES, shapley

__all__ = [
    "DEFAULT_METRICS",
    "REFERENCES",
    "SOURCES",
    "SOURCE_TITLES",
    "ElementExplanation",
    "Explanation",
    "MetricShares",
    "explain",
    "explain_problem",
    "shapley",
]
