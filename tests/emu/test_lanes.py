"""emu.lanes against a pure-Python reference: exact rationals rounded to fp32 by integer
arithmetic (round to nearest, ties to even), one rounding per FMA and per add."""

from fractions import Fraction

import numpy as np
import pytest

from emu.lanes import lane_gemm, lane_of_k, reduce_lanes


def _rn32(x: Fraction) -> Fraction:
    """x rounded to the nearest fp32 value, ties to even (finite, normal or subnormal)."""
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    e = max(e, -126)  # subnormals share the smallest normal's quantum
    q = Fraction(2) ** (e - 23)
    n, r = divmod(x, q)
    if r * 2 > q or (r * 2 == q and n % 2 == 1):
        n += 1
    return sign * n * q


def _f(v) -> Fraction:
    return Fraction(float(v))


def _reference(A, B, C, lanes, grain, layout, reduction, alpha, beta):
    M, K = A.shape
    N = B.shape[1]
    if layout == "strided":
        owner = [(k // grain) % lanes for k in range(K)]
    else:
        w = -(-K // lanes)
        w = -(-w // grain) * grain
        owner = [k // w for k in range(K)]
    out = np.empty((M, N), np.float32)
    for m in range(M):
        for n in range(N):
            parts = []
            for j in range(lanes):
                acc = Fraction(0)
                for k in range(K):
                    if owner[k] == j:
                        acc = _rn32(_f(A[m, k]) * _f(B[k, n]) + acc)
                parts.append(acc)
            if reduction == "sequential":
                acc = parts[0]
                for p in parts[1:]:
                    acc = _rn32(acc + p)
            else:
                while len(parts) > 1:
                    if reduction == "halving":
                        h = (len(parts) + 1) // 2
                        parts = [_rn32(parts[i] + parts[i + h]) if i + h < len(parts) else parts[i] for i in range(h)]
                    else:
                        parts = [
                            _rn32(parts[i] + parts[i + 1]) if i + 1 < len(parts) else parts[i]
                            for i in range(0, len(parts), 2)
                        ]
                acc = parts[0]
            if C is None:
                res = _rn32(_f(alpha) * acc)
            else:
                res = _rn32(_f(alpha) * acc + _rn32(_f(beta) * _f(C[m, n])))
            out[m, n] = np.float32(float(res))
    return out


def _operands(rng, M, K, N):
    # wide exponent spread so that the order of every FMA and add shows in the bits
    A = (rng.uniform(-1, 1, (M, K)) * 2.0 ** rng.integers(-12, 12, (M, K))).astype(np.float32)
    B = (rng.uniform(-1, 1, (K, N)) * 2.0 ** rng.integers(-12, 12, (K, N))).astype(np.float32)
    C = rng.uniform(-4, 4, (M, N)).astype(np.float32)
    return A, B, C


@pytest.mark.parametrize(
    "K, lanes, grain, layout, reduction",
    [
        (45, 32, 1, "strided", "halving"),
        (45, 8, 4, "strided", "tree"),
        (70, 32, 1, "chunked", "halving"),
        (37, 4, 2, "chunked", "sequential"),
        (9, 16, 1, "strided", "halving"),  # lanes without k take their place as +0
        (23, 1, 1, "strided", "halving"),  # one chain
    ],
)
def test_lane_gemm_matches_exact_reference(K, lanes, grain, layout, reduction):
    rng = np.random.default_rng(K * 100 + lanes)
    A, B, C = _operands(rng, 3, K, 2)
    for c, alpha, beta in ((None, 1.0, 1.0), (C, 0.5, 2.0), (C, 1.0, 1.0)):
        got = lane_gemm(A, B, c, lanes=lanes, grain=grain, layout=layout, reduction=reduction, alpha=alpha, beta=beta)
        want = _reference(A, B, c, lanes, grain, layout, reduction, alpha, beta)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_orders_differ():
    """The layouts and reductions are distinct orders: on these operands each gives other bits
    (so a capture can tell them apart)."""
    rng = np.random.default_rng(7)
    A, B, _ = _operands(rng, 4, 200, 4)
    outs = {
        (layout, red): lane_gemm(A, B, lanes=32, layout=layout, reduction=red).view(np.uint32).tobytes()
        for layout in ("strided", "chunked")
        for red in ("halving", "tree", "sequential")
    }
    assert len(set(outs.values())) == len(outs)


def test_lane_of_k_layouts():
    assert lane_of_k(10, 4).tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert lane_of_k(10, 4, grain=2).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 0, 0]
    assert lane_of_k(10, 4, layout="chunked").tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert lane_of_k(10, 4, grain=4, layout="chunked").tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    # tiles of 3 k to 2 blocks in turn, a lane per position: block 0 lanes 0-2, block 1 lanes 3-5
    assert lane_of_k(14, 6, grain=3, layout="tiled").tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1]
    with pytest.raises(ValueError):
        lane_of_k(14, 7, grain=3, layout="tiled")  # not whole blocks
    with pytest.raises(ValueError):
        lane_of_k(10, 0)
    with pytest.raises(ValueError):
        lane_of_k(10, 4, layout="diagonal")


def test_reduce_lanes_halving_pairs_i_with_i_plus_half():
    big, tiny = np.float32(2.0**25), np.float32(1.0)
    # halving: (big + -big) + (tiny + tiny) = 2; tree: (big + tiny) + (-big + tiny) = 0 (ties to even)
    p = np.array([[big], [tiny], [-big], [tiny]], np.float32)
    assert reduce_lanes(p, "halving")[0] == 2
    assert reduce_lanes(p, "tree")[0] == 0
    with pytest.raises(ValueError):
        reduce_lanes(p, "butterfly")


def test_rejects_float64():
    with pytest.raises(TypeError):
        lane_gemm(np.ones((2, 2)), np.ones((2, 2), np.float32))


def _program_reference(parts, program):
    """A reduction program on exact rationals, one fp32 rounding per add, written from the step
    definitions of emu.schedule.REDUCTION_STEPS."""
    x = list(parts)
    for name, w in program:
        if name == "strided":
            x = x + [Fraction(0)] * (-len(x) % w)
            y = []
            for t in range(w):
                acc = x[t]
                for r in range(t + w, len(x), w):
                    acc = _rn32(acc + x[r])
                y.append(acc)
            x = y
        elif name == "fold":
            x = [_rn32(x[g + i] + x[g + i + w // 2]) for g in range(0, len(x), w) for i in range(w // 2)]
        elif name == "merge":
            x = x[:w] + [_rn32(x[w] + x[w + 1])] + x[w + 2 :]
        else:
            y = []
            for g in range(0, len(x), w):
                acc = Fraction(0) if name == "chunks" else x[g]
                for v in x[g + (name == "chunks-first") : g + w]:
                    acc = _rn32(acc + v)
                y.append(acc)
            x = y
    assert len(x) == 1
    return np.float32(float(x[0]))


def test_a_thread_block_reduction_program_matches_exact_reference():
    """cuBLAS dot_kernel's shape at a small scale: 3 blocks × 8 threads × 2 registers of FMA chains
    over "tiled" lanes, each thread's registers onto +0, the block's threads by a count-down
    butterfly, then the blocks strided by 4, folded, strided by 2, in order — through
    emu.simt.fma_gemm against exact rationals (every FMA and add rounded once)."""
    from emu.gemm import run_reduction_program
    from emu.schedule import Schedule
    from emu.simt import fma_gemm

    rng = np.random.default_rng(3)
    K, blocks, threads, regs = 100, 3, 8, 2
    lanes, tile = blocks * threads * regs, threads * regs
    A, B, _ = _operands(rng, 2, K, 3)
    owner = lane_of_k(K, lanes, grain=tile, layout="tiled")
    program = (("chunks", regs), ("fold", 8), ("fold", 4), ("fold", 2), ("strided", 4), ("fold", 4), ("strided", 1))
    seq = np.concatenate([np.flatnonzero(owner == j) if (owner == j).any() else [-1] for j in range(lanes)])
    bounds = [0]
    for j in range(lanes):
        bounds.append(bounds[-1] + max(int((owner == j).sum()), 1))
    A_seq = np.where(seq < 0, 0, A[:, np.maximum(seq, 0)]).astype(np.float32)
    B_seq = np.where((seq < 0)[:, None], 0, B[np.maximum(seq, 0)]).astype(np.float32)
    sch = Schedule(
        splits=lanes, split_bounds=tuple(bounds), split_rule="ceil", reduction="program", reduction_program=program
    )
    got = fma_gemm(A_seq, B_seq, None, sch)
    for m in range(2):
        for n in range(3):
            parts = []
            for j in range(lanes):
                acc = Fraction(0)
                for k in np.flatnonzero(owner == j):
                    acc = _rn32(_f(A[m, k]) * _f(B[k, n]) + acc)
                parts.append(acc)
            want = _program_reference(parts, program)
            assert got[m, n].view(np.uint32) == want.view(np.uint32), (m, n)
    # merges build any binary tree: six partials as ((((p0 + p3) + p5) + (p1 + p4)) + p2) from the
    # order p0, p3, p5, p1, p4, p2 (cuBLAS's six-split xmma split-K on an H200), against rationals
    six = [Fraction(int(v)) * Fraction(1, 1 << 20) for v in rng.integers(-(1 << 40), 1 << 40, 6)]
    merges = (("merge", 0), ("merge", 0), ("merge", 1), ("merge", 0), ("merge", 0))
    as_fp32 = np.array([[float(_rn32(v))] for v in six], np.float32)
    got_six = run_reduction_program(as_fp32[[0, 3, 5, 1, 4, 2]], merges)
    p = [_rn32(v) for v in six]
    want_six = _rn32(_rn32(_rn32(_rn32(p[0] + p[3]) + p[5]) + _rn32(p[1] + p[4])) + p[2])
    assert got_six[0].view(np.uint32) == np.float32(float(want_six)).view(np.uint32)
    assert _program_reference([p[i] for i in (0, 3, 5, 1, 4, 2)], merges) == np.float32(float(want_six))
    with pytest.raises(ValueError, match="merge 5 on 6"):
        run_reduction_program(np.ones((6, 1), np.float32), (("merge", 5),))
    # the program's own checks: a step that does not fit, a program that leaves more than one
    with pytest.raises(ValueError, match="not a multiple"):
        run_reduction_program(np.ones((6, 1), np.float32), (("fold", 4),))
    with pytest.raises(ValueError, match="leaves 2"):
        run_reduction_program(np.ones((4, 1), np.float32), (("fold", 4),))
    with pytest.raises(ValueError, match="reduction_program"):
        Schedule(splits=2, reduction="program")
    with pytest.raises(ValueError, match="reduction_program"):
        Schedule(splits=2, reduction="program", reduction_program=(("spiral", 2),))
