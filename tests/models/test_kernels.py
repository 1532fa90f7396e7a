"""Named kernels and validators: units, sources, and the validators' loop orders as permutations of
the kernel's gemmK order (kyxc vs kcyx), checked by running the convolution."""

import dataclasses

import numpy as np
import pytest

import emu
from emu.conv import ConvProblem, conv
from emu.units import Family
from models import kernels as K
from models import tuning as T

FWD_KCYX = ConvProblem("fwd", 2, 8, 6, 6, 16, 3, 3, pad_h=(1, 1), pad_w=(1, 1))
FWD_KYXC = dataclasses.replace(FWD_KCYX, in_layout="nhwc", fil_layout="kyxc", out_layout="nhwk")


def _all_models():
    for name in K.NAMES:
        for validating in ("rocmlir-2022-xdlops", "rocmlir-2022-nonxdlops"):
            yield K.kernel(name, hw="mi200", validating=validating)


def test_every_field_cites_a_source():
    fields = [f.name for f in dataclasses.fields(K.KernelModel) if f.name != "sources"]
    for model in _all_models():
        missing = [f for f in fields if not model.sources.get(f)]
        assert not missing, f"{model.name}: fields without a source: {missing}"


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(ValueError) as err:
        K.kernel("rocmlir-2023-xdlops")
    for name in K.NAMES:
        assert name in str(err.value)


def test_xdlops_units_by_hw():
    for hw, family in (
        ("mi100", Family.FUSED_EXACT),
        ("mi200", Family.PAIRWISE),
        ("mi300", Family.TWO_STAGE),
        ("MI250X", Family.PAIRWISE),
    ):
        m = K.kernel("rocmlir-2022-xdlops", hw=hw)
        assert m.unit.family == family and m.xdlops and not m.validator and m.order == "rocmlir-xdlops"
    assert K.kernel("rocmlir-2022-xdlops", hw="mi200").flush_inputs
    with pytest.raises(ValueError, match="mi100, mi200, mi300"):
        K.kernel("rocmlir-2022-xdlops", hw="h100")


def test_mi300_group_follows_the_instruction():
    """MI300 groups min(8, k): 4 for 32x32x4f16, 8 for the k-reduction 16x16x16f16 (matrix_units.md)."""
    m = K.kernel("rocmlir-2022-xdlops", hw="mi300")
    assert [u.group_size for u in m.gemm_units(FWD_KCYX)] == [4]
    issue_71_1 = ConvProblem("bwd_weight", 32, 32, 7, 7, 32, 1, 1)
    assert [u.group_size for u in m.gemm_units(issue_71_1)] == [8]
    assert [u.group_size for u in K.kernel("rocmlir-2022-xdlops", hw="mi100").gemm_units(issue_71_1)] == [4]


def test_validator_units():
    cpu_n = K.kernel("cpu-validation-2022", validating="rocmlir-2022-nonxdlops")
    cpu_x = K.kernel("cpu-validation-2022", validating="xdlops")
    assert cpu_n.unit.family == cpu_x.unit.family == Family.FP64
    assert (cpu_n.unit.group_size, cpu_n.unit.round_each_group, cpu_n.fp32_round_every) == (1, True, 1)
    assert (cpu_x.unit.round_each_group, cpu_x.fp32_round_every) == (False, 0)
    acc4 = K.kernel("cpu-acc4")
    assert (acc4.unit.group_size, acc4.unit.round_each_group, acc4.unit.flush_inputs) == (4, True, False)
    ftz = K.kernel("cpu-ftz", validating="nonxdlops")
    assert ftz.unit.flush_inputs and ftz.flush_inputs and ftz.unit.round_each_group
    for name in ("cpu-validation-mlir", "gpu-validation", "rocmlir-2022-nonxdlops"):
        assert K.kernel(name).unit.family == Family.FMA
    assert all(m.validator for m in map(K.kernel, ("gpu-validation", "cpu-acc4", "cpu-validation-mlir")))


def test_cpu_validation_needs_the_validated_kernel():
    with pytest.raises(ValueError, match="validating"):
        K.kernel("cpu-validation-2022")
    with pytest.raises(ValueError, match="validating"):
        K.kernel("cpu-ftz", validating="tensor-core")
    with pytest.raises(ValueError, match="tuning"):
        K.kernel("cpu-acc4", tuning="64,32,32,4,2,2")


def test_kernel_tuning_and_kblocks():
    m = K.kernel("rocmlir-2022-xdlops", tuning="16,16,16,16,16,1,0,0")
    assert m.tuning == T.XdlopsTuning(16, 16, 16, 16, 16, 1)
    assert m.gemm_orders(ConvProblem("fwd", 8, 64, 8, 8, 128, 1, 1))[0].k_order[:4] == (0, 4, 8, 12)
    with pytest.raises(T.InvalidTuning, match="isValidGemm"):  # gemmK 72 is not a multiple of 16
        m.gemm_orders(FWD_KCYX)
    with pytest.raises(T.PerfConfigError):
        K.kernel("rocmlir-2022-nonxdlops", tuning="16,16,16,16,16,1,0,0")
    bw = ConvProblem("bwd_weight", 64, 64, 7, 7, 64, 1, 1)
    assert K.kernel("rocmlir-2022-xdlops", kblocks=16).gemm_orders(bw)[0].split_k == 16
    with pytest.raises(ValueError, match="kblocks"):
        K.kernel("rocmlir-2022-nonxdlops", kblocks=4)


def test_gpu_validation_has_the_nonxdlops_orders():
    padded = ConvProblem("fwd", 2, 3, 9, 9, 6, 7, 7, pad_h=(3, 3), pad_w=(3, 3))  # gemmK 147
    for p in (FWD_KYXC, padded):
        assert K.kernel("gpu-validation").gemm_orders(p) == K.kernel("rocmlir-2022-nonxdlops").gemm_orders(p)
    assert K.kernel("gpu-validation").gemm_orders(padded)[0].pad_k == 16


def test_cpu_loop_orders_kcyx_vs_kyxc():
    assert K.cpu_loop_k_order(FWD_KCYX) is None
    order = K.cpu_loop_k_order(FWD_KYXC)
    C, Y, X = 8, 3, 3
    expected = [(y * X + x) * C + c for c in range(C) for y in range(Y) for x in range(X)]
    assert order == tuple(expected) and sorted(order) == list(range(C * Y * X))
    for model in _all_models():
        orders = model.gemm_orders(FWD_KYXC)
        if model.order == "cpu-loop":
            assert [o.k_order for o in orders] == [order]
        else:
            assert all(o.k_order is None for o in orders)  # kernels follow the filter layout (groups of 4)
    bwd_w = dataclasses.replace(FWD_KYXC, direction="bwd_weight")
    bwd_d = dataclasses.replace(FWD_KYXC, direction="bwd_data", stride=(2, 2))
    assert K.cpu_loop_k_order(bwd_w) is None
    assert K.kernel("cpu-acc4").gemm_orders(bwd_d) == [emu.GemmOrder()] * len(K.kernel("cpu-acc4").plan(bwd_d))


def _run(model, problem, x, w):
    (g,) = model.plan(problem)
    return conv(problem, x=x, w=w, gemm=lambda a, b: emu.gemm(a, b, None, g.unit, g.order))


def test_cpu_order_makes_kyxc_equal_kcyx_and_the_kernel_does_not():
    """On the same convolution, the CPU validation loops (c, y, x) on both filter layouts, so its
    kyxc result equals its kcyx result bit for bit; the non-xdlops kernel follows the filter layout
    and does not (rocmlir_kernels_2022.md §2(b): non-exact exactly for NHWC/yxck filters > 1×1)."""
    rng = np.random.default_rng(7)

    def draw(shape):
        return (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 6, shape))).astype(np.float16)

    x, w = draw((2, 8, 6, 6)), draw((16, 8, 3, 3))
    xb, wb = x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy()
    cpu = K.kernel("cpu-validation-2022", validating="rocmlir-2022-nonxdlops")
    kern = K.kernel("rocmlir-2022-nonxdlops")
    cpu_a, cpu_b = _run(cpu, FWD_KCYX, x, w), _run(cpu, FWD_KYXC, xb, wb).transpose(0, 3, 1, 2)
    assert np.array_equal(cpu_a.view(np.uint32), cpu_b.view(np.uint32))
    kern_a, kern_b = _run(kern, FWD_KCYX, x, w), _run(kern, FWD_KYXC, xb, wb).transpose(0, 3, 1, 2)
    assert np.array_equal(kern_a.view(np.uint32), cpu_a.view(np.uint32))  # NCHW: kernel = CPU (73/107 exact)
    assert not np.array_equal(kern_b.view(np.uint32), cpu_b.view(np.uint32))


@pytest.mark.parametrize(
    "fil_layout, in_layout, out_layout, groups",
    [
        ("kcyx", "nchw", "nkhw", 1),  # gemmN (c, y, x): a tap's columns spread over the whole row
        ("kyxc", "nhwc", "nhwk", 2),  # gemmN (y, x, c): a tap's columns side by side
    ],
)
def test_in_bounds_cpu_loop_equals_each_weight_summed_alone(monkeypatch, fil_layout, in_layout, out_layout, groups):
    """fair_3's backward-weight CPU loop skips the products whose input pixel is padding. Every
    weight, summed alone over exactly the (n, ho, wo) whose pixel is inside (found here by plain
    loops), in the loop's gemmK order, equals the grouped pass bit for bit, with B gathered in
    one chunk or in chunks of 3 columns that split the taps, with and without input flush."""
    import emu
    import emu.conv
    from emu.conv import ConvGemm, ConvProblem
    from emu.gemm import GemmOrder
    from models.kernels import kernel

    p = ConvProblem(
        "bwd_weight",
        n=2,
        c=2 * groups,
        h=5,
        w=6,
        k=3 * groups,
        y=3,
        x=2,
        groups=groups,
        pad_h=(1, 2),
        pad_w=(1, 0),
        stride=(2, 1),
        dilation=(1, 2),
        in_layout=in_layout,
        fil_layout=fil_layout,
        out_layout=out_layout,
    )
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(p.tensor_size("input")) * 2.0 ** rng.integers(-16, 4, p.tensor_size("input"))).astype(
        np.float16
    )
    dy = (rng.standard_normal(p.tensor_size("output")) * 2.0 ** rng.integers(-16, 4, p.tensor_size("output"))).astype(
        np.float16
    )
    op = ConvGemm(p, x=x, dy=dy)
    acc4 = kernel("cpu-acc4").counting_inbounds()
    specs = [acc4, acc4.with_input_flush()]
    whole = dict(zip(specs, op.compute([m.arithmetic(p) for m in specs])))
    monkeypatch.setattr(emu.conv.executor, "INBOUNDS_B_BYTES", 1)
    monkeypatch.setattr(ConvGemm, "default_n_chunk", lambda self: 3)
    chunked = dict(zip(specs, op.compute([m.arithmetic(p) for m in specs])))

    kd, nd = tuple(p.gemm_k_order), tuple(p.gemm_n_order)
    for spec in specs:
        want = op.new_result()
        for sub, sg in enumerate(op.subs):
            g = spec.plan(p)[sub]
            full = g.order.sequence(sg.k)
            full = full[full >= 0]
            kdig = np.unravel_index(full, [{"n": p.n, "ho": p.out_h, "wo": p.out_w}[d] for d in kd])
            for group in range(p.groups):
                a, b = op.a(sub, group), op.b(sub, group)
                res = np.zeros((sg.m, sg.n), np.float32)
                for col in range(sg.n):
                    ndig = dict(
                        zip(nd, np.unravel_index(col, [{"c": p.c // p.groups, "y": p.y, "x": p.x}[d] for d in nd]))
                    )
                    keep = []
                    for j in range(full.size):
                        ho, wo = int(kdig[kd.index("ho")][j]), int(kdig[kd.index("wo")][j])
                        hi = ho * p.stride[0] + int(ndig["y"]) * p.dilation[0] - p.pad_h[0]
                        wi = wo * p.stride[1] + int(ndig["x"]) * p.dilation[1] - p.pad_w[0]
                        keep.append(0 <= hi < p.h and 0 <= wi < p.w)
                    seq = full[np.array(keep, bool)]
                    res[:, col] = emu.gemm(
                        np.ascontiguousarray(a[:, seq]),
                        np.ascontiguousarray(b[seq, col : col + 1]),
                        None,
                        g.unit,
                        GemmOrder(),
                    )[:, 0]
                op.scatter(want, res, sub, group, 0)
        assert np.array_equal(whole[spec].view(np.uint32), want.view(np.uint32))
        assert np.array_equal(chunked[spec].view(np.uint32), want.view(np.uint32))


def test_shipped_sources_cite_public_material_only():
    """Units and kernel models cite papers, repositories and commits, never files that are not
    shipped (the project's spec or reference notes)."""
    from models.units import UNIT_NAMES, unit

    texts = []
    for name in UNIT_NAMES:
        texts += list(unit(name).sources.values())
    models = [K.kernel(n, hw="mi200", validating="xdlops") for n in K.NAMES]
    models += [m.with_input_flush() for m in models] + [K.kernel("cpu-acc4").counting_inbounds()]
    for m in models:
        texts += list(m.sources.values()) + list(m.unit.sources.values())
    bad = [t for t in texts if any(s in t for s in ("shared/", "reference/", "SPEC", ".md", "§", "code-index"))]
    assert not bad, bad[:5]


def _pickled_without_global_rules(obj):
    """pickle.loads(pickle.dumps(obj)) with no copyreg rule (a worker imports no engine)."""
    import io
    import pickle

    buf = io.BytesIO()
    pickler = pickle.Pickler(buf)
    pickler.dispatch_table = {}  # ignore copyreg.dispatch_table: the object must pickle itself
    pickler.dump(obj)
    return pickle.loads(buf.getvalue())


@pytest.mark.parametrize("hw", K.HW_NAMES)
@pytest.mark.parametrize("name", K.NAMES)
def test_a_kernel_model_pickles_to_an_equal_one_with_read_only_sources(name, hw):
    # jobs carry kernel models to worker processes (process pool, Dask)
    from types import MappingProxyType

    original = K.kernel(name, hw, validating="xdlops")
    again = _pickled_without_global_rules(original)
    assert again == original and dict(again.sources) == dict(original.sources)
    assert isinstance(again.sources, MappingProxyType) and isinstance(again.unit.sources, MappingProxyType)


def _inbounds_reference(op, p, unit, order):
    """Every output of a backward-weight convolution from its in-bounds products only, one
    column at a time through ``emu.gemm`` (independent of ConvGemm's tap grouping)."""
    from emu.gemm import GemmOrder

    kd, nd = tuple(p.gemm_k_order), tuple(p.gemm_n_order)
    want = op.new_result()
    for sub, sg in enumerate(op.subs):
        full = order.sequence(sg.k)
        full = full[full >= 0]
        kdig = np.unravel_index(full, [{"n": p.n, "ho": p.out_h, "wo": p.out_w}[d] for d in kd])
        ho, wo = kdig[kd.index("ho")], kdig[kd.index("wo")]
        for group in range(p.groups):
            a, b = op.a(sub, group), op.b(sub, group)
            res = np.zeros((sg.m, sg.n), np.float32)
            for col in range(sg.n):
                nds = np.unravel_index(col, [{"c": p.c // p.groups, "y": p.y, "x": p.x}[d] for d in nd])
                ndig = dict(zip(nd, (int(v) for v in nds)))
                hi = ho * p.stride[0] + ndig["y"] * p.dilation[0] - p.pad_h[0]
                wi = wo * p.stride[1] + ndig["x"] * p.dilation[1] - p.pad_w[0]
                seq = full[(hi >= 0) & (hi < p.h) & (wi >= 0) & (wi < p.w)]
                res[:, col] = emu.gemm(
                    np.ascontiguousarray(a[:, seq]),
                    np.ascontiguousarray(b[seq, col : col + 1]),
                    None,
                    unit,
                    GemmOrder(),
                )[:, 0]
            op.scatter(want, res, sub, group, 0)
    return want


@pytest.mark.parametrize("unit_name", ["mi100", "mi200", "h100", "fma32", "fp64"])
@pytest.mark.parametrize("channels,filters", [(2, 5), (7, 2)])
def test_inbounds_pass_any_unit_either_orientation(unit_name, channels, filters):
    """The in-bounds pass runs a tap with fewer channels than filters as (B^T A^T)^T and one with
    more as A·B: both give the bits of a column-by-column loop, for every unit family (exact,
    pairwise, truncated, FMA, fp64), with subnormal inputs and input flush."""
    from emu.conv import ConvArithmetic, ConvGemm, ConvProblem
    from emu.gemm import GemmOrder
    from models import unit

    p = ConvProblem(
        "bwd_weight",
        n=2,
        c=channels,
        h=6,
        w=5,
        k=filters,
        y=3,
        x=3,
        pad_h=(1, 1),
        pad_w=(2, 0),
        stride=(1, 2),
        in_layout="nchw",
        fil_layout="kcyx",
        out_layout="nkhw",
    )
    rng = np.random.default_rng(channels * 100 + filters)
    x = (rng.standard_normal(p.tensor_size("input")) * 2.0 ** rng.integers(-16, 4, p.tensor_size("input"))).astype(
        np.float16
    )
    dy = (rng.standard_normal(p.tensor_size("output")) * 2.0 ** rng.integers(-16, 4, p.tensor_size("output"))).astype(
        np.float16
    )
    op = ConvGemm(p, x=x, dy=dy)
    assert not op.flush_inert  # subnormals: the flushed unit must decode apart
    base = unit(unit_name)
    units = [base, dataclasses.replace(base, flush_inputs=not base.flush_inputs)]
    k_total = op.subs[0].k
    order = GemmOrder(k_order=tuple(int(v) for v in np.random.default_rng(1).permutation(k_total)))
    arith = [
        ConvArithmetic(units=(u,) * len(op.subs), orders=(order,) * len(op.subs), inbounds_only=True) for u in units
    ]
    got = op.compute(arith)
    for u, g in zip(units, got):
        want = _inbounds_reference(op, p, u, order)
        assert np.array_equal(g.view(np.uint32), want.view(np.uint32)), u.name
