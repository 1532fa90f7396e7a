"""emu.conv's executor: the one loop over sub-GEMMs, groups and gemmN chunks (ConvGemm.execute)
and the hooks kernel models and mutants use (ConvArithmetic.operands, .gemm, .keep_partials with
tiles). Every result is compared bit for bit with a run that does the same thing by hand."""

from __future__ import annotations

import numpy as np
import pytest

import emu
import emu.conv.executor as executor
from emu.conv import ConvArithmetic, ConvGemm, ConvProblem, Step
from emu.gemm import GemmOrder
from models.units import unit

# bwd_data with strides and groups: several sub-GEMMs, two groups, padding that drops writes
BWD_DATA = ConvProblem(
    "bwd_data", n=2, c=4, h=7, w=8, k=6, y=3, x=2, groups=2, pad_h=(1, 1), pad_w=(0, 1), stride=(2, 2)
)
BWD_WEIGHT = ConvProblem("bwd_weight", n=3, c=4, h=5, w=6, k=6, y=2, x=3, groups=2, pad_h=(1, 0), pad_w=(1, 1))
FWD = ConvProblem("fwd", n=2, c=3, h=6, w=5, k=5, y=3, x=3, pad_h=(1, 1), pad_w=(1, 1), in_layout="nhwc")


def _tensors(p: ConvProblem, seed: int) -> dict[str, np.ndarray]:
    """Random fp16 tensors over 20 binades, subnormals included."""
    rng = np.random.default_rng(seed)
    return {
        role: (rng.standard_normal(p.tensor_size(role)) * 2.0 ** rng.integers(-16, 4, p.tensor_size(role))).astype(
            np.float16
        )
        for role in ("input", "filter", "output")
    }


def _op(p: ConvProblem, seed: int = 0) -> ConvGemm:
    t = _tensors(p, seed)
    return ConvGemm(p, x=t["input"], w=t["filter"], dy=t["output"])


def _bits(x) -> np.ndarray:
    return np.asarray(x).view(np.uint32)


class _Recorder(Step):
    def __init__(self, op):
        self.op, self.events = op, []

    def group(self, sub, group, a):
        assert np.array_equal(a.view(np.uint16), self.op.a(sub, group).view(np.uint16))
        self.events.append(("group", sub, group))

    def chunk(self, sub, group, start, a, b):
        want = self.op.b(sub, group, start, start + b.shape[1])
        assert np.array_equal(b.view(np.uint16), want.view(np.uint16))
        self.events.append(("chunk", sub, group, start, b.shape[1]))

    def sub_done(self, sub):
        self.events.append(("sub_done", sub))


@pytest.mark.parametrize("n_chunk", [1, 3, None, "whole"])
def test_execute_visits_every_sub_gemm_group_and_chunk_in_order(n_chunk):
    op = _op(BWD_DATA)
    assert len(op.subs) > 1 and BWD_DATA.groups == 2
    steps = [_Recorder(op), _Recorder(op)]
    progress = []
    chunk_arg = (lambda sg: sg.n) if n_chunk == "whole" else n_chunk
    op.execute(steps, chunk_arg, progress.append)
    want = []
    for sub, sg in enumerate(op.subs):
        size = sg.n if n_chunk == "whole" else (n_chunk or op.default_n_chunk())
        for group in range(BWD_DATA.groups):
            want.append(("group", sub, group))
            want += [("chunk", sub, group, s, min(size, sg.n - s)) for s in range(0, sg.n, size)]
        want.append(("sub_done", sub))
    assert steps[0].events == want and steps[1].events == want
    assert sum(progress) == BWD_DATA.groups * sum(sg.n for sg in op.subs)
    with pytest.raises(ValueError, match="n_chunk"):
        op.execute(steps, 0)


def test_gemm_hook_replaces_the_units_gemm_chunk_by_chunk():
    op = _op(BWD_DATA, 1)
    fma, order = unit("fma32"), GemmOrder(pad_k=4)
    plain = ConvArithmetic((unit("mi200"),) * len(op.subs), (order,) * len(op.subs))
    calls = []

    def hook(sub, a, b):
        calls.append((sub, a.shape, b.shape))
        return emu.gemm(a, b, None, fma, order)

    (got,) = op.compute([plain._replace(gemm=hook)], n_chunk=5)
    (want,) = op.compute([plain._replace(units=(fma,) * len(op.subs))])
    assert np.array_equal(_bits(got), _bits(want))
    assert {c[0] for c in calls} == set(range(len(op.subs)))
    assert all(b[1] <= 5 and a[0] == op.subs[s].m for s, a, b in calls)
    with pytest.raises(TypeError, match="float32"):
        op.compute([plain._replace(gemm=lambda sub, a, b: hook(sub, a, b).astype(np.float64))])
    with pytest.raises(ValueError, match="gemm hook"):
        op.compute([plain._replace(gemm=hook, keep_partials=True)])
    assert not op.same_arithmetic(plain._replace(gemm=hook), plain._replace(gemm=hook))


@pytest.mark.parametrize("split_k", [1, 3])
def test_operands_hook_feeds_the_gemm_what_it_returns(split_k):
    """A hook that reads B from other tensors gives the bits of the convolution over them, for
    the shared-decode path and the split-K partials path alike."""
    t, t2 = _tensors(FWD, 2), _tensors(FWD, 3)
    op, other = ConvGemm(FWD, x=t["input"], w=t["filter"]), ConvGemm(FWD, x=t2["input"], w=t["filter"])
    order = GemmOrder(split_k=split_k)
    arith = ConvArithmetic((unit("mi300"),), (order,), keep_partials=split_k > 1)
    starts = []

    def operands(sub, group, start, a, b):
        starts.append(start)
        return a, other.b(sub, group, start, start + b.shape[1])

    (got,) = op.compute([arith._replace(operands=operands)], n_chunk=4)
    (want,) = other.compute([arith])
    g, h = (got.parts, want.parts) if split_k > 1 else (got, want)
    assert np.array_equal(_bits(g), _bits(h))
    assert starts == list(range(0, op.subs[0].n, 4))


def test_partials_tile_ids_one_numbering_groups_sharing_or_apart():
    """compute's split-K tile ids and ConvOperands.tile_ids are one numbering: row-major over each
    sub-GEMM's tile grid, sub-GEMMs one after the other; the groups of a sub-GEMM share numbers
    in compute (what the atomic orders keyed per tile have always used) and are apart with
    ``groups_apart``."""
    op = _op(BWD_WEIGHT, 4)
    sg = op.subs[0]
    tiles = ((2, 5),)
    arith = ConvArithmetic((unit("mi200"),), (GemmOrder(split_k=3),), keep_partials=True, tiles=tiles, seed=3)
    (parts,) = op.compute([arith], n_chunk=4)
    count = -(-sg.m // 2) * -(-sg.n // 5)
    apart = op.new_result()
    shared = op.new_result()
    for group in range(BWD_WEIGHT.groups):
        ids = np.array([[(i // 2) * -(-sg.n // 5) + j // 5 for j in range(sg.n)] for i in range(sg.m)], np.float32)
        op.scatter(shared, ids, 0, group, 0)
        op.scatter(apart, ids + group * count, 0, group, 0)
    assert np.array_equal(_bits(parts.tiles), _bits(shared))
    assert np.array_equal(_bits(op.tile_ids(tiles, groups_apart=True)), _bits(apart))
    assert np.array_equal(_bits(op.tile_ids(tiles, groups_apart=False)), _bits(shared))
    # one sub-GEMM without tiles: none counted, its elements keep the fill
    assert (op.tile_ids((None,)) == -1).all()


def test_the_order_reaches_emu_gemm_unopened(monkeypatch):
    """The executor hands each sub-GEMM's order object itself to emu.gemm (an accumulation
    schedule may replace GemmOrder); only order_view reads it."""
    op = _op(BWD_DATA, 5)
    orders = tuple(GemmOrder(pad_k=2 + s) for s in range(len(op.subs)))
    seen = []
    real_decoded, real_gemm = executor.gemm_decoded, executor._unit_gemm
    monkeypatch.setattr(executor, "gemm_decoded", lambda a, b, c, u, o: seen.append(o) or real_decoded(a, b, c, u, o))
    monkeypatch.setattr(executor, "_unit_gemm", lambda a, b, c, u, o: seen.append(o) or real_gemm(a, b, c, u, o))
    viewed = []
    real_view = executor.order_view
    monkeypatch.setattr(executor, "order_view", lambda o, k: viewed.append(o) or real_view(o, k))
    arith = ConvArithmetic((unit("h100"),) * len(op.subs), orders)
    op.compute([arith, arith._replace(operands=lambda sub, group, start, a, b: (a, b))], n_chunk=6)
    assert seen and all(any(o is x for x in orders) for o in seen)
    assert viewed and all(any(o is x for x in orders) for o in viewed)


@pytest.mark.parametrize("order", [GemmOrder(), GemmOrder(split_k=3), GemmOrder(pad_k=4, split_k=2)])
def test_a_schedule_runs_in_the_executor_as_its_gemm_order(order):
    """emu.Schedule is what the executor passes to emu.gemm; a GemmOrder's schedule gives its bits,
    and a schedule beyond GemmOrder (k tiles split by ⌈tiles/splits⌉, a residue tile) runs too."""
    op = _op(BWD_DATA, 1)
    u = unit("h100")
    (want,) = op.compute([ConvArithmetic((u,) * len(op.subs), (order,) * len(op.subs))])
    (got,) = op.compute([ConvArithmetic((u,) * len(op.subs), (order.schedule(),) * len(op.subs))])
    assert np.array_equal(_bits(got), _bits(want))
    lib = emu.Schedule(splits=2, split_rule="ceil", residue_tile=4)
    (other,) = op.compute([ConvArithmetic((u,) * len(op.subs), (lib,) * len(op.subs))])
    assert other.shape == want.shape
