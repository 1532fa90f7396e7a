"""The search's shortcuts for a ``differs`` capture change no answer (issue 37: a ``differs``
answer under a minute).

- :class:`validation.captures.search.FullRunBound` skips the full run of a candidate that gets
  one of the outputs the nearest schedule got wrong wrong too, where that leaves it no nearer:
  never one that reproduces, and the search's answer, nearest schedule and stages are those of
  the search without it.
- :class:`validation.captures.samples.Sample` judges every sampled GEMM's outputs in one call and
  gathers every chain's operands at once: its count on sampled outputs is the count of
  :func:`validation.captures.gemms.run_candidate`'s full output there, candidate by candidate
  across the space (plain, batched with C and alpha/beta, a convolution's variants).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import emu
import models
from validation.captures import Capture, load_capture
from validation.captures import search as search_module
from validation.captures.gemms import Candidate, Variant, bits, run_candidate
from validation.captures.samples import Sample
from validation.captures.search import FullRunBound, search
from validation.captures.space import candidates

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"
PLANTED = emu.Schedule(k_tile=32, splits=3, split_rule="ceil", output="fp16")


def _mm(flip: bool) -> tuple[Capture, Candidate]:
    """A 16×96 @ 96×24 fp16 mm by a planted H100 schedule (3 splits of 32-wide k tiles);
    with ``flip``, out[3, 5]'s sign flipped (no schedule computes that)."""
    rng = np.random.default_rng(37)
    A, B = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((16, 96), (96, 24)))
    out = emu.gemm(A, B, None, models.unit("h100"), PLANTED).astype(np.float16)
    if flip:
        out.view(np.uint16)[3, 5] ^= 0x8000
    cap = Capture("planted", "mm", {"A": A.view(np.uint16), "B": B.view(np.uint16)}, out, gpu="NVIDIA H200")
    return cap, Candidate("h100", Variant(), PLANTED)


def test_the_bound_never_skips_a_reproducing_candidate():
    """The nearest so far is wrong at two outputs (its output made so by hand); the planted
    schedule, which reproduces every output, is never skipped, however near the nearest; a
    schedule wrong at one of those outputs is skipped only where it cannot be nearer."""
    cap, planted = _mm(flip=False)
    want = bits(cap.out).reshape(-1)
    n = want.size
    near = cap.out.copy().reshape(-1)
    near.view(np.uint16)[[7, 100]] ^= 1  # the nearest so far: two outputs off by one bit
    bound = FullRunBound(cap, want)
    assert not bound.cannot_beat(planted, n - 2)  # no sample yet: nothing skipped
    bound.nearest(near)
    for best_same in (n - 2, n - 1):
        assert not bound.cannot_beat(planted, best_same)
    # a schedule that gets the capture's output wrong at those outputs: one chain of 96
    one = Candidate("h100", Variant(), emu.Schedule(output="fp16"))
    got = bits(run_candidate(cap, one)).reshape(-1)
    w = int(np.count_nonzero(got[[7, 100]] != want[[7, 100]]))
    if w:  # skipped exactly where n − w ≤ best_same
        assert bound.cannot_beat(one, n - w) and not bound.cannot_beat(one, n - w - 1)
    assert int(np.count_nonzero(got == want)) <= n - w


def test_a_flipped_output_searches_alike_with_and_without_the_bound(monkeypatch):
    """One output's sign flipped: the search gives the same answer, nearest schedule, outputs
    and stages with the bound as without it (``BOUND_OUTPUTS`` 0), with fewer full runs."""
    cap, _ = _mm(flip=True)
    runs = []
    real = search_module.run_candidate

    def counted(c, cand):
        runs.append(cand)
        return real(c, cand)

    monkeypatch.setattr(search_module, "run_candidate", counted)
    fast = search(cap)
    with_bound = len(runs)
    runs.clear()
    monkeypatch.setattr(search_module, "BOUND_OUTPUTS", 0)
    slow = search(cap)
    assert fast.answer == slow.answer == "differs"
    assert fast.n_identical == slow.n_identical == cap.out.size - 1
    assert fast.best == slow.best and fast.stages == slow.stages and fast.hints == slow.hints
    assert (bits(fast.emulated) == bits(slow.emulated)).all()
    assert fast.nearest_distance == slow.nearest_distance
    assert with_bound < len(runs), (with_bound, len(runs))


def _spread(cands: list[Candidate], count: int) -> list[Candidate]:
    return [cands[i] for i in np.unique(np.linspace(0, len(cands) - 1, count).round().astype(int))]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: _mm(flip=True)[0], id="mm"),
        pytest.param(lambda: load_capture(DATA / "h200_dev" / "c3x3_c3_k16_h32_nchw_fwd.npz"), id="conv-fwd"),
        pytest.param(lambda: load_capture(DATA / "h200_s16" / "t_addmm_128x1024x96_ab_bf16.npz"), id="addmm-bf16"),
    ],
)
def test_sample_counts_are_the_full_runs_counts(make):
    """On 24 sampled outputs, each of 40 candidates drawn across the space counts the outputs it
    gets right as its full run does there (the sample's chains are gathered for every candidate
    at once and every GEMM's outputs combined in one call)."""
    cap = make()
    want = bits(cap.out).reshape(-1)
    outs = np.random.default_rng(5).choice(want.size, 24, replace=False)
    sample = Sample.of_outputs(cap, outs)
    assert sample.size == 24
    cands = _spread(candidates(cap, search_module.resolve_unit(cap, None))[0], 40)
    sample.prepare(cands)
    assert sample.counts(cands) == [sample.identical(c) for c in cands]  # judged together, alone
    for c in cands:
        got = bits(run_candidate(cap, c)).reshape(-1)
        assert sample.wrong(c) == int(np.count_nonzero(got[outs] != want[outs])), c.describe()
