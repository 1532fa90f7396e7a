"""validation.explain: Shapley attribution of a kernel's error to its five sources.

Synthetic cases whose answer is known by construction (no subnormal inputs: no flush share;
small-integer inputs: exact sums, no order or accumulation-rounding share; a 1×1 NCHW forward
conv: the kernel's order is the reference's, no order share), Shapley efficiency, the two ends of
the design against ``validation.run``, and the 2022 study's findings on small suite tests.
"""

import argparse
import io
import json
import math
from contextlib import redirect_stdout
from itertools import combinations

import numpy as np
import pytest

import emu
from emu.conv import conv
from models import kernels as kernel_models
from models.units import unit
from validation import metrics
from validation.cli import main
from validation.cli.explain import register_cli
from validation.configs import parse_config
from validation.explain import SOURCES, explain, shapley
from validation.run import run

NHWC = "kyxc -in_layout=nhwc -out_layout=nhwk"
NCHW = "kcyx -in_layout=nchw -out_layout=nkhw"


def cfg(layout=NHWC, n=4, c=16, k=32, hw=8, fil=3, op="conv2d", kernel="-x2", rand_type="float"):
    return (
        f"-pv -rand 1 {kernel} --operation {op} --rand_type {rand_type} -fil_layout={layout} -batchsize={n} "
        f"-in_channels={c} -out_channels={k} -in_h={hw} -in_w={hw} -fil_h={fil} -fil_w={fil} -p=false -t f16"
    )


ALL_METRICS = (
    "rms",
    "max_abs_diff",
    "max_epsilon_diff",
    "max_rel_diff",
    "ave_abs_diff",
    "diff1",
    "diff2",
    "n_exact",
    "n_nonfinite",
)
SMALL_NHWC = "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16"  # 102,400 outputs, gemmK 36 (y,x,c)
SMALL_NCHW = "conv2d_host_validation_f16_fwd_CHECK_KCYX_NCHW_NKHW5_f16"  # the same shape, gemmK (c,y,x)


def assert_efficient(e):
    """Shapley efficiency: the shares sum to the total; the all-off variant is the reference."""
    for name, m in e.metrics.items():
        if name in ("n", "n_exact"):  # counts of agreement: v(∅) = N, not 0
            assert m.interaction == pytest.approx(m.values["none"], abs=1e-9 * max(1.0, abs(m.total)))
            continue
        assert m.values["none"] == 0, name
        assert math.fsum(m.shares.values()) + m.interaction == pytest.approx(m.total, rel=1e-12, abs=1e-300), name
        assert abs(m.interaction) <= 1e-12 * abs(m.total) + 1e-300, name


def zero_shares(e, source):
    return {name: m.shares[source] for name, m in e.metrics.items() if m.shares[source] != 0}


# ------------------------------------------------------------------------------------------------
# Shapley values


def test_shapley_axioms():
    rng = np.random.default_rng(0)
    v = rng.standard_normal(32)
    v[0] = 0.0
    phi = shapley(v)
    assert math.fsum(phi) == pytest.approx(v[31] - v[0], rel=1e-12)  # efficiency
    # an additive game gives each player its own contribution
    c = rng.standard_normal(5)
    add = [sum(c[i] for i in range(5) if m >> i & 1) for m in range(32)]
    assert shapley(add) == pytest.approx(list(c), rel=1e-12)
    # a dummy player (never changes the worth) gets 0; two symmetric players get the same
    game = [float((m & 0b011 != 0) + 2 * (m >> 2 & 1)) for m in range(32)]  # players 3, 4 are dummies
    phi = shapley(game)
    assert phi[3] == phi[4] == 0 and phi[0] == pytest.approx(phi[1]) == pytest.approx(0.5)
    assert phi[2] == pytest.approx(2.0)
    with pytest.raises(ValueError):
        shapley([0.0] * 8)


# ------------------------------------------------------------------------------------------------
# Synthetic cases, the answer known by construction


def test_no_subnormal_inputs_no_flush_share():
    e = explain(cfg(), hw="mi200", rand_min=1, rand_max=5, metrics=ALL_METRICS, top=3)
    assert "subnormal_flush" in e.inactive
    assert not zero_shares(e, "subnormal_flush")
    assert_efficient(e)
    # the same shape in [-1, 1] has subnormal inputs, and on MI200 the flush shows
    f = explain(cfg(), hw="mi200", rand_min=-1, rand_max=1, metrics=ALL_METRICS, top=3)
    assert "subnormal_flush" not in f.inactive
    assert f.metrics["max_abs_diff"].shares["subnormal_flush"] > 0
    assert_efficient(f)


@pytest.mark.parametrize(
    "hw,kernel", [("mi200", "xdlops"), ("mi100", "xdlops"), ("mi300", "xdlops"), ("mi200", "nonxdlops")]
)
def test_small_integers_give_no_order_or_rounding_share(hw, kernel):
    # integers in [-5, 5), gemmK 144: every partial sum is an integer below 2^12, exact in fp32 and
    # fp16 alike, so no order, accumulation or output rounding can change a bit
    e = explain(
        cfg(c=16, fil=3),
        hw=hw,
        kernel=kernel,
        rand_type="int",
        rand_min=-5,
        rand_max=5,
        metrics=ALL_METRICS,
        top=3,
        keep_arrays=True,
    )
    assert "order" not in e.inactive  # the orders differ (kyxc filter vs the CPU's c, y, x loop) ...
    for source in ("order", "accumulation_rounding", "output_rounding", "subnormal_flush", "overflow"):
        assert not zero_shares(e, source), source  # ... and change nothing
    assert e.metrics["max_abs_diff"].total == 0 and e.elements == []
    ref = e.arrays["none"]
    assert np.abs(ref).max() > 16 and np.array_equal(ref, np.round(ref))
    assert "reproduces" in e.verdict


def test_one_by_one_nchw_forward_has_no_order_share():
    config = cfg(layout=NCHW, c=64, k=32, hw=7, fil=1)
    problem = parse_config(config).problem
    kplan = kernel_models.kernel("rocmlir-2022-xdlops", hw="mi200").plan(problem)
    vplan = kernel_models.kernel("cpu-validation-2022", validating="xdlops").plan(problem)
    # the precondition: the same gemmK sequence (the kernel's pad_k 4 pads nothing on K = 64), no split
    K = problem.c
    assert [(list(g.order.sequence(K)), g.order.split_k) for g in kplan] == [
        (list(g.order.sequence(K)), g.order.split_k) for g in vplan
    ]
    e = explain(config, hw="mi200", rand_min=-1, rand_max=1, metrics=ALL_METRICS, top=3)
    assert e.inactive["order"].startswith("the kernel's accumulation order")
    assert not zero_shares(e, "order")
    assert e.metrics["rms"].shares["accumulation_rounding"] != 0  # the other sources still act
    assert_efficient(e)
    # an NHWC 3×3 filter (gemmK y, x, c against the CPU's c, y, x) does get an order share
    g = explain(cfg(layout=NHWC, c=64, k=32, hw=7, fil=3), hw="mi200", rand_min=-1, rand_max=1, top=0)
    assert g.metrics["rms"].shares["order"] != 0


def test_overflow_and_efficiency_with_every_source_active():
    # inputs in [5, 10], gemmK 1152: the sums come near 65504 and a few outputs overflow
    e = explain(
        cfg(layout=NHWC, n=2, c=128, k=16, hw=6, fil=3),
        hw="mi200",
        rand_min=5,
        rand_max=10,
        metrics=ALL_METRICS,
        top=5,
        keep_arrays=True,
    )
    assert_efficient(e)
    n_inf = e.metrics["n_nonfinite"]
    assert n_inf.total > 0 and n_inf.shares["overflow"] >= 0.9 * n_inf.total
    assert n_inf.values["output_rounding"] == 0  # rounding alone keeps the overflowing values finite
    assert e.elements[0].kernel in (math.inf, -math.inf) and "overflow" in e.elements[0].sources
    assert e.verdict.startswith(f"{int(n_inf.total)} of 512 outputs") and "smaller input range" in e.verdict
    # without the overflow switch, the values that overflow stay finite
    assert np.isfinite(e.arrays["subnormal_flush+order+accumulation_rounding+output_rounding"]).all()


def test_bwd_weight_split_k_order_and_efficiency():
    # xdlops backward weight, no padding: split-K with fp32 atomic adds is part of the order
    config = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_70_1"  # 1,024 outputs, gemmK 4096, KBlocks 16
    problem = parse_config(config).problem
    assert kernel_models.kernel("rocmlir-2022-xdlops", hw="mi200").plan(problem)[0].order.split_k == 16
    e = explain(config, hw="mi200", rand_min=-1, rand_max=1, metrics=ALL_METRICS, top=5)
    assert_efficient(e)
    assert "order" not in e.inactive and e.metrics["max_abs_diff"].shares["order"] != 0


# ------------------------------------------------------------------------------------------------
# The two ends of the design


@pytest.mark.parametrize("hw,kernel,validator", [("mi200", "xdlops", "cpu"), ("mi100", "nonxdlops", "gpu")])
def test_ends_are_the_kernel_and_the_fp64_reference(hw, kernel, validator):
    name = SMALL_NHWC
    e = explain(name, hw=hw, kernel=kernel, validator=validator, top=5, keep_arrays=True)
    r = run(name, hw=hw, kernel=kernel, validator=validator, progress=False)
    kern = e.arrays["+".join(SOURCES)]
    np.testing.assert_array_equal(kern.reshape(-1).view(np.uint32), r.kernel_output.astype(np.float32).view(np.uint32))
    vplan = r.validator.plan(r.problem)
    fp64 = unit("fp64")
    ref = conv(
        r.problem,
        x=r.inputs.get("input"),
        w=r.inputs.get("filter"),
        gemm=lambda a, b: emu.gemm(a, b, None, fp64, vplan[0].order),
    )
    np.testing.assert_array_equal(e.arrays["none"].view(np.uint32), ref.reshape(e.arrays["none"].shape).view(np.uint32))
    assert e.comparison.to_dict() == metrics.compare(ref, kern, dtype_hint="fp16", top=5).to_dict()


def test_smallest_reproducing_set():
    e = explain(SMALL_NHWC, hw="mi200", rand_min=-1, rand_max=1, top=8, keep_arrays=True)
    assert len(e.elements) == 8
    kern = e.arrays["+".join(SOURCES)].reshape(-1)
    eps = [x.epsilon_diff for x in e.elements]
    assert eps == sorted(eps, reverse=True) and eps[0] == e.comparison.max_epsilon_diff
    for x in e.elements:
        label = "+".join(x.sources) or "none"
        assert e.arrays[label].reshape(-1)[x.index] == kern[x.index]
        assert x.kernel == kern[x.index]
        for size in range(x.size):  # no smaller set reproduces it
            for subset in combinations(SOURCES, size):
                assert e.arrays["+".join(subset) or "none"].reshape(-1)[x.index].view(np.uint32) != kern[x.index].view(
                    np.uint32
                )
        assert math.fsum(x.epsilon_shares.values()) == pytest.approx(x.epsilon_diff, rel=1e-9)


# ------------------------------------------------------------------------------------------------
# The study's findings (reference/study_results_2022.md), on small suite tests


def test_study_mi200_subnormal_flush_dominates_the_extra_error_over_mi100():
    mi100 = explain(SMALL_NHWC, hw="mi100", rand_min=-1, rand_max=1, top=3)
    mi200 = explain(SMALL_NHWC, hw="mi200", rand_min=-1, rand_max=1, top=3)
    assert mi100.metrics["max_epsilon_diff"].shares["subnormal_flush"] == 0  # MI100 keeps subnormals
    m = mi200.metrics["max_epsilon_diff"]
    extra = m.total - mi100.metrics["max_epsilon_diff"].total
    assert extra > 1
    assert max(SOURCES, key=lambda s: m.shares[s]) == "subnormal_flush"
    assert m.shares["subnormal_flush"] >= 0.5 * m.total and m.shares["subnormal_flush"] >= 0.8 * extra
    assert "subnormal" in mi200.verdict and "cpu-ftz" in mi200.verdict
    assert all("subnormal_flush" in x.sources for x in mi200.elements)


@pytest.mark.parametrize("hw", ["mi100", "mi200"])
def test_study_inputs_in_1_5_stay_within_one_ulp(hw):
    e = explain(SMALL_NHWC, hw=hw, rand_min=1, rand_max=5, top=3)
    assert e.comparison.max_epsilon_diff <= 1
    assert "within one fp16 ulp" in e.verdict


def test_study_nonxdlops_orders_differ_from_the_cpu_loop_only_in_nhwc_filters_above_1x1():
    """Over the whole suite: the non-xdlops kernel's gemmK sequence differs from the 2022 CPU
    loop's (beyond trailing zero padding, which adds +0 products) in exactly the 34 NHWC fwd tests
    with Y·X > 1 (reference/study_results_2022.md §2)."""
    from validation.suites import suite_entries

    differing = []
    for entry in suite_entries():
        config = parse_config(entry.name)
        problem = config.problem
        k = kernel_models.kernel("rocmlir-2022-nonxdlops").plan(problem)
        v = kernel_models.kernel("cpu-validation-2022", validating="nonxdlops").plan(problem)
        for g_k, g_v, sub in zip(k, v, config.gemms):
            seq_k, seq_v = g_k.order.sequence(sub.k), g_v.order.sequence(sub.k)
            if not np.array_equal(seq_k[seq_k >= 0], seq_v[seq_v >= 0]) or g_k.order.split_k != g_v.order.split_k:
                differing.append(entry.name)
                assert (
                    problem.direction == "fwd" and problem.gemm_k_order == ("y", "x", "c") and problem.y * problem.x > 1
                )
                break
    assert len(differing) == 34


@pytest.mark.parametrize(
    "name,differs",
    [
        (SMALL_NHWC, True),
        (SMALL_NCHW, False),
        ("padding_kernel_all_fwd_CHECK_RESNET50_CONFIG4_f16", True),
        ("padding_kernel_all_fwd_CHECK_RESNET50_CONFIG2_f16", False),
        ("conv2d_host_validation_f16_fwd_CHECK_ISSUE_114_1_f16", False),
    ],
)
def test_study_nonxdlops_vs_cpu_differs_by_order_alone(name, differs):
    """Non-xdlops kernel against the 2022 CPU validation: they differ only in NHWC tests with a
    filter larger than 1×1 (gemmK y, x, c against the CPU's c, y, x), and there by order alone."""
    if "ISSUE_114" in name:  # 16.7 M outputs: too big for a unit test; its plan says it all
        problem = parse_config(name).problem
        k = kernel_models.kernel("rocmlir-2022-nonxdlops").plan(problem)
        v = kernel_models.kernel("cpu-validation-2022", validating="nonxdlops").plan(problem)
        K = problem.c
        assert problem.y * problem.x == 1
        assert [list(g.order.sequence(K)) for g in k] == [list(g.order.sequence(K)) for g in v]
        return
    e = explain(
        name,
        hw="mi200",
        kernel="nonxdlops",
        validator="cpu",
        reference="validator",
        rand_type="float",
        rand_min=-1,
        rand_max=1,
        metrics=ALL_METRICS,
        top=5,
    )
    assert_efficient(e)
    for source in ("subnormal_flush", "accumulation_rounding", "output_rounding", "overflow"):
        assert not zero_shares(e, source), source
    if differs:
        assert e.metrics["max_abs_diff"].total > 0
        for mname in ("rms", "max_abs_diff", "max_epsilon_diff"):
            assert e.metrics[mname].shares["order"] == pytest.approx(e.metrics[mname].total, rel=1e-12)
        assert all(x.sources == ("order",) for x in e.elements)
    else:
        assert all(m.total == 0 for n, m in e.metrics.items() if n not in ("n", "n_exact"))


# ------------------------------------------------------------------------------------------------
# Results, CLI and plot


def _cli(argv):
    parser = argparse.ArgumentParser(prog="fp16emu")
    sub = parser.add_subparsers(dest="command", required=True)
    register_cli(sub)
    args = parser.parse_args(argv)
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = args.func(args)
    return code, buf.getvalue()


def test_cli_json():
    code, out = _cli(
        [
            "explain",
            SMALL_NCHW,
            "--hw",
            "mi200",
            "--rand-min",
            "-1",
            "--rand-max",
            "1",
            "--metric",
            "rms,max_epsilon_diff",
            "--top",
            "4",
            "--format",
            "json",
        ]
    )
    assert code == 0
    doc = json.loads(out)
    assert list(doc)[:3] == ["metrics", "elements", "verdict"]
    assert set(doc["metrics"]) == {"rms", "max_epsilon_diff"}
    for m in doc["metrics"].values():
        assert set(m["shares"]) == set(SOURCES) and {"total", "interaction"} <= set(m)
    assert len(doc["elements"]) == 4 and {"coords", "sources", "size"} <= set(doc["elements"][0])
    assert isinstance(doc["verdict"], str) and doc["verdict"]


def test_cli_text_and_bad_options(capsys):
    code, out = _cli(["explain", SMALL_NCHW, "--top", "2"])
    assert code == 0 and "verdict:" in out and "subnormal_flush" in out
    for argv, words in [
        (["--metric", "rms,nope"], ("metric", "max_abs_diff")),
        (["--top", "-1"], ("--top",)),
        (["--hw", "mi999"], ("hw", "mi100, mi200, mi300")),
        (["--reference", "gpu"], ("reference", "exact, validator")),
        (["--validator", "fpga"], ("validator", "cpu")),
    ]:
        with pytest.raises(ValueError) as err:
            _cli(["explain", SMALL_NCHW] + argv)
        assert all(w in str(err.value) for w in words), (argv, str(err.value))
    # --format is the one shared option (validation.cli.common): refused by the parser, one error line
    assert main(["explain", SMALL_NCHW, "--format", "xml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fp16emu explain: error:") and "--format" in err and "text, json" in err, err


def test_plot_and_dict():
    import matplotlib

    matplotlib.use("Agg")
    e = explain(SMALL_NCHW, hw="mi200", rand_min=-1, rand_max=1, top=2)
    ax = e.plot()
    assert len(ax.patches) == len(e.metrics) * (len(SOURCES) + 1)
    json.dumps(e.to_dict(), allow_nan=False)
    assert e.to_dict()["element_sizes"]
