"""emu.atomics: split-K partial sums added in counter-based orders, members and envelopes.

Every member must be a sum of the partials in some order, every order must be reachable, the
envelope must find each element's extreme outcomes over all orders (checked exhaustively for
small split counts), and nothing may depend on the thread count."""

import numpy as np

from emu.atomics import SplitPartials, add_order, extreme_elements


def _order_outcomes(col):
    """Every fp32 sum of one element's partials added onto +0 in some order."""
    import itertools

    outs = set()
    for perm in itertools.permutations(range(col.size)):
        ws = np.float32(0.0)
        for i in perm:
            ws = np.float32(ws + col[i])
        outs.add(float(ws))
    return outs


def test_ensemble_members_are_sums_in_some_order_and_draw_every_order():
    import numba

    rng = np.random.default_rng(7)
    s, size = 3, 4000
    parts = SplitPartials(s, size, seed=2022)
    # 1, 2^-24 and −1 in shuffled roles: the six orders give 0, 2^-24 or 2^-23-ish sums
    base = np.array([1.0, 2.0**-24, -1.0], np.float32)
    parts.parts[:] = np.stack([rng.permutation(base) for _ in range(size)], axis=1)
    parts.tiles[:] = np.arange(size) // 8
    seen = set()
    for index in range(4):
        m = parts.member(index, "element").astype(np.float32)
        for i in range(0, size, 97):
            assert float(m[i]) in _order_outcomes(parts.parts[:, i].copy())
        seen |= set(m.tolist())
    # every outcome an order can give appears somewhere (the orders are drawn, not fixed)
    assert {float(np.float16(x)) for x in _order_outcomes(base)} <= seen
    # tile granularity: the same order for every element of a tile (same partials → same value)
    parts.parts[:] = np.repeat(parts.parts[:, ::8], 8, axis=1)
    t = parts.member(1, "tile")
    assert np.array_equal(t.reshape(-1, 8).view(np.uint16), np.repeat(t[::8, None], 8, axis=1).view(np.uint16))
    # reproducible, and the same for any thread count
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = parts.member(2, "element")
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(one.view(np.uint16), parts.member(2, "element").view(np.uint16))


def test_envelope_reaches_the_extreme_orders():
    """The per-element envelope (many random orders plus the sorted ones) finds, for every
    element, the closest and the farthest outcome any order gives (s = 3: all 6 orders)."""
    rng = np.random.default_rng(11)
    s, size = 3, 500
    parts = SplitPartials(s, size, seed=2022)
    parts.parts[:] = (rng.standard_normal((s, size)) * 2.0 ** rng.integers(-12, 12, (s, size))).astype(np.float32)
    v16 = parts.parts.astype(np.float64).sum(axis=0).astype(np.float16).astype(np.float64)
    near, far = parts.envelope(v16, 256, "element")
    for i in range(size):
        outs = np.array(sorted(_order_outcomes(parts.parts[:, i].copy())), np.float32).astype(np.float16)
        d = np.abs(outs.astype(np.float64) - v16[i])
        assert abs(float(near[i]) - v16[i]) == d.min()
        assert abs(float(far[i]) - v16[i]) == d.max()


def test_one_envelope_pass_serves_every_validation_and_keeps_the_members():
    """envelopes() over several validations at once equals one envelope() per validation, its
    kept sums are the members' (before fp16 rounding), and the sorted orders equal a plain numpy
    stable sort of each element's partials summed in fp32."""
    rng = np.random.default_rng(5)
    s, size = 6, 3000
    parts = SplitPartials(s, size, seed=2022)
    parts.parts[:] = (rng.standard_normal((s, size)) * 2.0 ** rng.integers(-20, 20, (s, size))).astype(np.float32)
    parts.parts[:, :50] = np.float32(1.0)  # ties: the stable order decides
    parts.parts[1, 50:100] = -parts.parts[0, 50:100]  # x and −x tie in magnitude
    parts.parts[2, 100:110] = np.inf
    truth = parts.parts.astype(np.float64).sum(axis=0)
    with np.errstate(over="ignore", invalid="ignore"):
        vals = [truth.astype(np.float16).astype(np.float64), (truth * 1.001).astype(np.float16).astype(np.float64)]
    pairs, kept = parts.envelopes(vals, 40, "element", keep=7)
    for v, (near, far) in zip(vals, pairs):
        n1, f1 = parts.envelope(v, 40, "element")
        assert np.array_equal(near.view(np.uint16), n1.view(np.uint16))
        assert np.array_equal(far.view(np.uint16), f1.view(np.uint16))
    assert kept.shape == (7, size)
    for i in range(7):
        with np.errstate(over="ignore"):
            k16 = kept[i].astype(np.float16)
        assert np.array_equal(k16.view(np.uint16), parts.member(i, "element").view(np.uint16))
    fresh = SplitPartials(s, size, seed=2022)
    fresh.parts[:] = parts.parts
    for key, got in zip((parts.parts, -parts.parts, np.abs(parts.parts), -np.abs(parts.parts)), fresh.sorted_members()):
        order = np.argsort(key, axis=0, kind="stable")
        ws = np.zeros(size, np.float32)
        for row in np.take_along_axis(parts.parts, order, axis=0):
            ws += row
        with np.errstate(over="ignore", invalid="ignore"):
            want = ws.astype(np.float16)
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_deep_search_reaches_every_elements_extremes_and_only_widens():
    """With few orders the envelope misses extremes; the deep search continues the same order
    streams on the farthest elements (here: all of them) and finds, for every element, the closest
    and farthest outcome of all 120 orders of 5 partials; it never narrows the envelope."""
    rng = np.random.default_rng(13)
    s, size = 5, 40
    parts = SplitPartials(s, size, seed=2022)
    parts.parts[:] = (rng.standard_normal((s, size)) * 2.0 ** rng.integers(-12, 12, (s, size))).astype(np.float32)
    v16 = parts.parts.astype(np.float64).sum(axis=0).astype(np.float16).astype(np.float64)
    (shallow,), _ = parts.envelopes([v16], 2, "element")
    (both,), _ = parts.envelopes([v16], 2, "element", deep_elements=size, deep_orders=3000)
    assert len(shallow) == 2 and len(both) == 4
    for a, b in zip(shallow, both[:2]):  # the plain envelope stays as it was: the range only widens
        assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    deep = both[2:]
    for i in range(size):
        outs = np.array(sorted(_order_outcomes(parts.parts[:, i].copy())), np.float32).astype(np.float16)
        d = np.abs(outs.astype(np.float64) - v16[i])
        dn, df = abs(float(deep[0][i]) - v16[i]), abs(float(deep[1][i]) - v16[i])
        assert dn == d.min() and df == d.max()
        assert dn <= abs(float(shallow[0][i]) - v16[i]) and df >= abs(float(shallow[1][i]) - v16[i])
    # the picked elements: the farthest by absolute, relative and ulp distance
    far = np.array([0.0, 3.0, 0.001, 1.0, 0.0], np.float16)
    v = np.array([0.0, 1.0, 0.0, 1.0, 1e-5])
    assert extreme_elements(v, far, 1).tolist() == [1, 2]  # abs: 1; relative and ulps: 2
    # elements already infinitely far (overflow to inf, inf − inf) cannot go farther: they must
    # not crowd out the finite ones (NHWC_3 r1, where thousands of outputs overflow fp16)
    far_inf = np.concatenate([far, np.array([np.inf, np.inf, 1.0], np.float16)])
    v_inf = np.concatenate([v, [1.0, np.inf, np.inf]])
    assert extreme_elements(v_inf, far_inf, 1).tolist() == [1, 2]
    assert extreme_elements(v_inf, far_inf, 8).tolist() == [0, 1, 2, 3, 4]


def test_deep_search_of_several_validations_equals_each_alone():
    """envelopes() runs one deep pass over the union of every validation's extreme elements; each
    validation's deep outcomes must be exactly those of a call with that validation alone (its
    own elements searched, the others left at their plain envelope)."""
    rng = np.random.default_rng(21)
    s, size = 16, 3000
    parts = SplitPartials(s, size, seed=2022)
    parts.parts[:] = (rng.standard_normal((s, size)) * 2.0 ** rng.integers(-6, 6, (s, size))).astype(np.float32)
    exact = parts.parts.astype(np.float64).sum(axis=0)
    v_a = exact.astype(np.float16).astype(np.float64)
    v_b = (exact + rng.standard_normal(size) * 0.01).astype(np.float16).astype(np.float64)
    v_b[:50] = np.inf  # elements infinitely far for one validation only
    together, _ = parts.envelopes([v_a, v_b], 8, "element", deep_elements=20, deep_orders=500)
    for v, got in zip((v_a, v_b), together):
        (alone,), _ = parts.envelopes([v], 8, "element", deep_elements=20, deep_orders=500)
        assert len(got) == len(alone) == 4
        for g, a in zip(got, alone):
            assert np.array_equal(g.view(np.uint16), a.view(np.uint16))
    # the two validations pick different elements, so the union is searched for neither alone
    far_a, far_b = together[0][1], together[1][1]
    picks_a = extreme_elements(v_a, far_a, 20)
    picks_b = extreme_elements(v_b, far_b, 20)
    assert set(picks_a.tolist()) != set(picks_b.tolist())


def test_envelope_equals_one_order_at_a_time():
    """The envelope draws orders several at a time; it must equal, value and tie for tie, a plain
    loop over the orders one by one (``add_order``, members 0 … count−1, then the four stable
    sorted orders only where strictly closer / farther; the deep search continuing with orders
    count … count + deep − 1, strictly), for order counts that are not multiples of 4, and keep
    each order's fp32 sum. Many outcomes tie, at the same distance on either side."""
    rng = np.random.default_rng(21)
    s, size, count, deep = 6, 23, 10, 13
    parts = SplitPartials(s, size, seed=99)
    # 2^24 absorbs a 1 or not, by order: outcomes v − 1/2 and v + 1/2 tie around a reference v
    cols = np.concatenate([np.full((2, size), 2.0**24) * [[1], [-1]], rng.choice([1.0, -1.0], (s - 2, size))])
    parts.parts[:] = rng.permuted(cols, axis=0).astype(np.float32)
    v16 = cols[2:].sum(axis=0) + rng.choice([-0.5, 0.5], size)
    (got,), kept = parts.envelopes([v16], count, "element", keep=count, deep_elements=size, deep_orders=deep)

    def f16(x):
        return np.float16(x)

    def order_sum(col, order):
        ws = np.float32(0.0)
        for j in order:
            ws = np.float32(ws + col[j])
        return ws

    for i in range(size):
        col = parts.parts[:, i].copy()
        sums = [order_sum(col, add_order(s, 99, k, i)) for k in range(count + deep)]
        assert np.array_equal(kept[:, i].view(np.uint32), np.float32(sums[:count]).view(np.uint32))
        keys = (col, -col, np.abs(col), -np.abs(col))
        by_sort = [f16(order_sum(col, np.argsort(key, kind="stable"))) for key in keys]
        outs = [f16(x) for x in sums[:count]] + by_sort + [f16(x) for x in sums[count:]]
        dist = [abs(float(x) - v16[i]) for x in outs]
        near = far = 0
        for k in range(1, len(outs)):
            near = k if dist[k] < dist[near] else near
            far = k if dist[k] > dist[far] else far
            if k == count + 3:  # the plain envelope ends after the sorted orders
                plain = (near, far)
        want = [outs[plain[0]], outs[plain[1]], outs[near], outs[far]]
        assert [f16(g[i]).view(np.uint16) for g in got] == [w.view(np.uint16) for w in want], i
