"""Kernel bug mutants (models.bugs): each changes the emulated kernel's output, bit for bit, in
the place its bug describes; the unmutated path is the kernel of validation.run.run."""

import dataclasses

import numpy as np
import pytest

from emu.atomics import add_order
from models import bugs
from models.kernels import ATOMIC_ORDERS
from validation.run import plan, run

NHWC = "kyxc -in_layout=nhwc -out_layout=nhwk"


def cfg(op="conv2d", n=2, c=8, k=16, hw=6, fil=3, pad=1):
    return (
        f"-pv -rand 1 -x2 --operation {op} --rand_type float -fil_layout={NHWC} -batchsize={n} "
        f"-in_channels={c} -out_channels={k} -in_h={hw} -in_w={hw} -fil_h={fil} -fil_w={fil} "
        f"-padding_h={pad} -padding_w={pad} -t f16"
    )


FWD = cfg()  # gemm M 16 (k), N 72 (n, ho, wo), K 72 (y, x, c); tiles 32 x 64, KPerBlock 4
BWDW = cfg("conv2d_bwd_weight", n=4, c=64, k=32, hw=4, fil=1, pad=0)  # split-K 4, fp32 atomics


@pytest.fixture(scope="module")
def fwd():
    r = run(FWD, hw="mi200", progress=False)
    config, kmodel, _ = plan(FWD, hw="mi200")
    return config.problem, kmodel, r


@pytest.fixture(scope="module")
def bwdw():
    r = run(BWDW, hw="mi200", progress=False)
    config, kmodel, _ = plan(BWDW, hw="mi200")
    return config.problem, kmodel, r


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def changed(problem, kmodel, r, mutant):
    out = bugs.emulate(problem, kmodel, r.inputs, mutant).kernel_fp32
    diff = bits(out) != bits(r.kernel_fp32)
    assert diff.any(), f"{mutant.label} changed nothing"
    return out, diff


def nhwk(flat, problem):  # fwd output nhwk: (n, ho, wo, k) from memory order
    return np.asarray(flat).reshape(problem.n, problem.out_h, problem.out_w, problem.k)


class _Identity(bugs.Mutant):
    name = "identity"

    def operands(self, ctx, sub, group, start, a, b):
        return a, b


@pytest.mark.parametrize("which", ["fwd", "bwdw"])
def test_unmutated_and_identity_hook_are_the_run_kernel_bit_for_bit(which, request):
    problem, kmodel, r = request.getfixturevalue(which)
    plain = bugs.emulate(problem, kmodel, r.inputs)
    hooked = bugs.emulate(problem, kmodel, r.inputs, _Identity())
    np.testing.assert_array_equal(bits(plain.kernel_fp32), bits(r.kernel_fp32))
    np.testing.assert_array_equal(bits(hooked.kernel_fp32), bits(r.kernel_fp32))
    assert (plain.partials is None) == (r.ensemble is None)


def test_drop_last_k_block_changes_only_outputs_whose_last_tap_is_inside(fwd):
    problem, kmodel, r = fwd
    _, diff = changed(problem, kmodel, r, bugs.DropLastKBlock())
    # gemmK (y, x, c): the last 4 values are tap (y=2, x=2); in bounds for ho, wo <= 4 (pad 1)
    d = nhwk(diff, problem)
    assert not d[:, 5, :, :].any() and not d[:, :, 5, :].any()


def test_padding_border_lost_top_row_changes_only_the_rows_that_read_it(fwd):
    problem, kmodel, r = fwd
    _, diff = changed(problem, kmodel, r, bugs.PaddingBorder("top", "lost"))
    d = nhwk(diff, problem)
    assert not d[:, 2:].any() and d[:, 0].any() and d[:, 1].any()  # row 0 read by ho 0 (y=1), ho 1 (y=0)


def test_padding_border_duplicated_left_changes_only_column_zero(fwd):
    problem, kmodel, r = fwd
    _, diff = changed(problem, kmodel, r, bugs.PaddingBorder("left", "duplicated"))
    d = nhwk(diff, problem)
    assert not d[:, :, 1:].any() and d[:, :, 0].all()


def test_wrong_stride_keeps_column_zero_and_changes_the_others(fwd):
    problem, kmodel, r = fwd
    _, diff = changed(problem, kmodel, r, bugs.WrongGeometry("stride", "w"))
    d = nhwk(diff, problem)
    assert not d[:, :, 0].any() and d[:, :, 1:].any()


def test_wrong_dilation_and_swapped_layout_change_most_outputs(fwd):
    problem, kmodel, r = fwd
    for m in (bugs.WrongGeometry("dilation", "h"), bugs.SwappedLayout()):
        _, diff = changed(problem, kmodel, r, m)
        assert diff.mean() > 0.5, m.label


def test_fp16_accumulator_moves_outputs_by_more_than_the_fp16_output_rounding(fwd):
    problem, kmodel, r = fwd
    out, diff = changed(problem, kmodel, r, bugs.Fp16Accumulator())
    assert (out.astype(np.float16) != r.kernel_output).any()
    assert np.array_equal(out.astype(np.float16).astype(np.float32), out)  # fp16 values


def test_channel_sign_flip_negates_exactly_that_channel(fwd):
    problem, kmodel, r = fwd
    out, diff = changed(problem, kmodel, r, bugs.ChannelSignFlip(3))
    d, o, ref = nhwk(diff, problem), nhwk(out, problem), nhwk(r.kernel_fp32, problem)
    assert not np.delete(d, 3, axis=3).any()
    np.testing.assert_array_equal(bits(o[..., 3]), bits(-ref[..., 3]))


def test_uninitialised_edge_tile_is_nan_exactly_on_the_last_gemm_n_tile(fwd):
    problem, kmodel, r = fwd
    out, diff = changed(problem, kmodel, r, bugs.UninitialisedTile(-1, "nan"))
    gemm_n = np.arange(problem.n * problem.out_h * problem.out_w).reshape(problem.n, problem.out_h, problem.out_w)
    expect = np.broadcast_to((gemm_n >= 64)[..., None], nhwk(diff, problem).shape)  # tiles of 64 columns
    np.testing.assert_array_equal(np.isnan(nhwk(out, problem)), expect)
    np.testing.assert_array_equal(nhwk(diff, problem), expect)
    for fill in ("zeros", "stale"):
        out, diff = changed(problem, kmodel, r, bugs.UninitialisedTile(-1, fill))
        assert not (nhwk(diff, problem) & ~expect).any()


def test_edge_tile_wrap_repeats_tile_zero_on_the_edge_tile(fwd):
    problem, kmodel, r = fwd
    out, diff = changed(problem, kmodel, r, bugs.EdgeTileWrap("n"))
    # C is (k, gemmN) scattered into nhwk: gemmN column j + 64 gets column j's values
    o = out.reshape(-1, problem.k)
    ref = r.kernel_fp32.reshape(-1, problem.k)
    np.testing.assert_array_equal(bits(o[64:]), bits(ref[: o.shape[0] - 64]))
    assert not diff.reshape(-1, problem.k)[:64].any()
    changed(problem, kmodel, r, bugs.EdgeTileWrap("k"))


def test_scaled_element_changes_one_element_by_its_factor(fwd):
    problem, kmodel, r = fwd
    out, diff = changed(problem, kmodel, r, bugs.ScaledElement(5, 2.0))
    assert np.flatnonzero(diff).tolist() == [5]
    assert out[5] == 2 * r.kernel_fp32[5]


def test_split_k_partial_mutants_change_the_atomic_sum(bwdw):
    problem, kmodel, r = bwdw
    parts = r.ensemble.parts
    for m, order_sum in (
        (bugs.SplitKPartialCount(-1, 0), parts[:-1]),
        (bugs.SplitKPartialCount(-1, 2), np.concatenate([parts, parts[-1:]])),
        (bugs.SplitKPartialScale(-1, -1.0), np.concatenate([parts[:-1], -parts[-1:]])),
    ):
        out, diff = changed(problem, kmodel, r, m)
        ws = np.zeros(parts.shape[1], np.float32)
        for p in order_sum:  # the partials as the buggy kernel adds them, in ascending order
            ws = ws + p
        np.testing.assert_array_equal(bits(out), bits(ws))


def _member_order_sum(parts, seed, member, order_of):
    """Per element, the fp32 sum of the rows ``order_of(order)`` lists, where ``order`` is the
    element's add order in ``member`` (emu.atomics.add_order, element granularity), by hand."""
    out = np.zeros(parts.shape[1], np.float32)
    for e in range(parts.shape[1]):
        ws = np.float32(0.0)
        for j, factor in order_of(list(add_order(parts.shape[0], seed, member, e))):
            ws = np.float32(ws + np.float32(parts[j, e] * np.float32(factor)))
        out[e] = ws
    return out


def test_split_k_mutants_add_in_the_order_of_the_compared_ensemble_member(bwdw):
    problem, kmodel, r = bwdw
    member = 5
    parts = r.ensemble.parts
    last = parts.shape[0] - 1
    seed = ATOMIC_ORDERS.seed
    good = bugs.emulate(problem, kmodel, r.inputs, member=member)
    want = _member_order_sum(parts, seed, member, lambda o: [(j, 1) for j in o])
    np.testing.assert_array_equal(bits(good.kernel_fp32), bits(want))
    for m, order_of in (
        (bugs.SplitKPartialCount(-1, 0), lambda o: [(j, 1) for j in o if j != last]),
        (bugs.SplitKPartialCount(-1, 2), lambda o: [(j, 1) for j in o] + [(last, 1)]),  # the repeat comes last
        (bugs.SplitKPartialScale(-1, -1.0), lambda o: [(j, -1 if j == last else 1) for j in o]),
    ):
        out = bugs.emulate(problem, kmodel, r.inputs, m, member=member).kernel_fp32
        np.testing.assert_array_equal(bits(out), bits(_member_order_sum(parts, seed, member, order_of)), m.label)
        assert (bits(out) != bits(good.kernel_fp32)).any(), m.label


@pytest.mark.parametrize("which", ["fwd", "bwdw"])
@pytest.mark.parametrize("member", [None, 5])
def test_emulate_mutants_shares_gemms_and_gives_what_emulate_gives(which, member, request):
    problem, kmodel, r = request.getfixturevalue(which)
    good, results = bugs.emulate_mutants(problem, kmodel, r.inputs, bugs.default_mutants(), member=member)
    alone = bugs.emulate(problem, kmodel, r.inputs, member=member)
    np.testing.assert_array_equal(bits(good.kernel_fp32), bits(alone.kernel_fp32))
    for m in bugs.default_mutants():
        try:
            want = bugs.emulate(problem, kmodel, r.inputs, m, member=member).kernel_fp32
        except bugs.NotApplicable:
            assert isinstance(results[m.label], bugs.NotApplicable), m.label
            continue
        np.testing.assert_array_equal(bits(results[m.label].kernel_fp32), bits(want), m.label)


def test_stale_partial_race_stays_inside_its_tile(bwdw):
    problem, kmodel, r = bwdw
    t = kmodel.plan(problem)[0].tuning_plan.tuning
    _, diff = changed(problem, kmodel, r, bugs.StalePartialRace(0, 0))
    d = diff.reshape(problem.k, problem.c)  # filter kyxc with 1x1: (k, c); gemm M = k, N = c
    assert not d[t.m_per_block :].any() and not d[:, t.n_per_block :].any()


def test_wrong_tensors_compared_hands_the_verifier_something_else(fwd):
    problem, kmodel, r = fwd
    m = bugs.WrongTensorsCompared("input")
    seen = m.seen(r.kernel_output, r.validation_output, r.inputs)
    assert seen.shape == r.kernel_output.shape and (seen != r.kernel_output).any()
    ref = bugs.WrongTensorsCompared("reference").seen(r.kernel_output, r.validation_output, r.inputs)
    np.testing.assert_array_equal(ref, r.validation_output.astype(np.float16))


def test_mutants_that_cannot_apply_say_why_and_every_mutant_has_its_bug(fwd):
    problem, kmodel, r = fwd
    with pytest.raises(bugs.NotApplicable, match="split-K"):
        bugs.emulate(problem, kmodel, r.inputs, bugs.SplitKPartialCount())
    with pytest.raises(ValueError, match="side"):
        bugs.PaddingBorder("middle")
    with pytest.raises(ValueError, match="not one of"):
        bugs.mutant("nonsense")
    with pytest.raises(ValueError, match="unknown parameter"):
        bugs.mutant("scaled-element", tile=3)
    assert set(bugs.MUTANTS) == {m.name for f in ("fp16", "bf16") for m in bugs.default_mutants(f)}
    for cls in bugs.MUTANTS.values():
        assert cls.bug.endswith(".") and len(cls.bug) > 40
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls().x = 1
