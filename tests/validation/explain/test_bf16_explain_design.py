"""explain, design and the ``run --gpu-output`` match search on bf16 convolutions (issue 29).

Every expected value comes from how the case is built, not from the code under test: integer
inputs make every sum exact, so the exact reference is an integer convolution computed here and
its bf16 rounding is ``ml_dtypes``' cast; inputs that are small multiples of 2^-128 make the
flushed reference an integer convolution over the inputs ≥ 2^-126; a bf16 accumulator is replayed
product by product in float64 → float32 → bf16; planted GPU outputs are the emulation run with a
known other seed or unit. Tiny problems (≤ 2,304 outputs, K ≤ 144), three seeds at most.
"""

import json
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from models import bugs, harness
from models import kernels as kernel_models
from validation.cli import main
from validation.configs import ConfigError, parse_config
from validation.design import parse_functions, resolve_targets
from validation.design.functions import function
from validation.design.generators import parse_generator
from validation.design.sweep import SeedTask, seed_job
from validation.explain import SOURCES, explain, explain_problem
from validation.metrics import compare
from validation.run import run, search_matches

SHAPE = (
    "-fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 -in_channels=16 -out_channels=32 "
    "-in_h=8 -in_w=8 -fil_h=3 -fil_w=3 -p=false"
)
BF16 = f"-pv -rand 1 -x2 --operation conv2d --rand_type float {SHAPE} -t bf16"
BF16_INT = f"-pv -rand 1 -x2 --operation conv2d --rand_type int {SHAPE} -t bf16"
TINY = (
    "-pv -rand 1 --operation conv2d --rand_type float -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk "
    "-batchsize=1 -in_channels=4 -out_channels=2 -in_h=4 -in_w=4 -fil_h=3 -fil_w=3 -p=false -t bf16"
)
METRICS = ("rms", "max_abs_diff", "max_epsilon_diff", "n_nonfinite")


def conv_nhwc(x, w):
    """Σ_{y,x,c} in[n, h+y, w+x, c] · fil[k, y, x, c] (stride 1, no padding) in float64, output
    nhwk flat: the independent oracle of the integer cases (every sum exact)."""
    n, hh, ww, c = x.shape
    k, fy, fx, _ = w.shape
    out = np.zeros((n, hh - fy + 1, ww - fx + 1, k))
    for y in range(fy):
        for xx in range(fx):
            patch = x[:, y : y + hh - fy + 1, xx : xx + ww - fx + 1, :]
            out += np.einsum("nhwc,kc->nhwk", patch, w[:, y, xx, :])
    return out.reshape(-1)


def tensors(inputs, problem):
    """(input n h w c, filter k y x c) float64 of the harness's 5-D memrefs (groups 1)."""
    x = np.asarray(inputs["input"]).astype(np.float64).reshape(problem.n, problem.h, problem.w, problem.c)
    w = np.asarray(inputs["filter"]).astype(np.float64).reshape(problem.k, problem.y, problem.x, problem.c)
    return x, w


def efficient(e):
    for name, m in e.metrics.items():
        assert m.values["none"] == 0, name
        assert math.fsum(m.shares.values()) + m.interaction == pytest.approx(m.total, rel=1e-12, abs=1e-300), name


# --- explain ----------------------------------------------------------------------------------


def test_explain_bf16_integers_attribute_the_error_to_the_bf16_rounding_alone():
    # integers in [-5, 5), K = 144: every partial sum is an integer below 2^12, exact in fp32 in any
    # order and unit; only the final fp32 -> bf16 rounding (8 significant bits) can change a value
    e = explain(BF16_INT, hw="mi200", metrics=METRICS, top=3, keep_arrays=True, progress=False)
    problem = parse_config(BF16_INT).problem
    inputs = harness.harness_inputs(problem, 1, -5, 5, "int", dtype="bf16")
    exact = conv_nhwc(*tensors(inputs, problem))
    rounded = exact.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)  # RNE of an exact value
    assert np.abs(exact).max() > 256 and (rounded != exact).any()  # bf16 cannot hold every sum
    np.testing.assert_array_equal(e.arrays["none"].reshape(-1), exact.astype(np.float32))
    np.testing.assert_array_equal(e.arrays["+".join(SOURCES)].reshape(-1), rounded.astype(np.float32))
    assert e.format == "bf16" and e.to_dict()["format"] == "bf16"
    efficient(e)
    m = e.metrics["max_abs_diff"]
    assert m.total == np.abs(rounded - exact).max()
    assert m.shares["output_rounding"] == m.total
    for source in ("subnormal_flush", "order", "accumulation_rounding", "overflow"):
        assert all(t.shares[source] == 0 for t in e.metrics.values()), source
    # epsilonDiff in bf16 ulps: an RNE of an exact value is at most half a bf16 ulp away
    assert 0 < e.metrics["max_epsilon_diff"].total <= 0.5
    # the switches that cannot act say why, in bf16 terms
    assert "bf16-subnormal" in e.inactive["subnormal_flush"]
    assert "bf16's overflow" in e.inactive["overflow"]
    assert "final rounding to bf16" in e.verdict and "bf16 ulp" in e.verdict
    assert "fp16" not in e.verdict


def _tiny_multiples(problem, seed):
    """Inputs k·2^-128 (k integer in [-5, 5)): |k| ≤ 3 are bf16 subnormals (below 2^-126), the rest
    normal; the filter small integers. Every product and sum is an exact multiple of 2^-128."""
    raw = harness.harness_inputs(problem, seed, -5, 5, "int", dtype="bf16")
    ints = np.asarray(raw["input"]).astype(np.float64)
    x = (ints * 2.0**-128).astype(np.float32).astype(ml_dtypes.bfloat16)
    return ints, {"input": x, "filter": raw["filter"]}


@pytest.mark.parametrize("hw,flushes", [("mi200", True), ("mi100", False)])
def test_explain_bf16_flush_acts_where_the_unit_flushes_bf16_subnormals(hw, flushes):
    problem = parse_config(BF16_INT).problem
    ints, inputs = _tiny_multiples(problem, 3)
    assert (np.abs(ints) <= 3).any() and (np.abs(ints) >= 4).any()
    kmodel = kernel_models.kernel("rocmlir-2022-xdlops", hw=hw, input="bf16")
    vmodel = kernel_models.kernel("cpu-validation-2022", validating="xdlops", input="bf16")
    e = explain_problem(
        problem, kmodel, vmodel, x=inputs["input"], w=inputs["filter"], metrics=METRICS, top=3, keep_arrays=True
    )
    efficient(e)
    _, w = tensors(inputs, problem)
    x = ints.reshape(problem.n, problem.h, problem.w, problem.c)
    exact = conv_nhwc(x, w) * 2.0**-128
    np.testing.assert_array_equal(e.arrays["none"].reshape(-1), exact.astype(np.float32))
    if flushes:
        # the flush alone: the reference over the inputs ≥ 2^-126 (|k| ≥ 4) only
        flushed = conv_nhwc(np.where(np.abs(x) >= 4, x, 0), w) * 2.0**-128
        np.testing.assert_array_equal(e.arrays["subnormal_flush"].reshape(-1), flushed.astype(np.float32))
        assert "subnormal_flush" not in e.inactive
        assert e.metrics["max_abs_diff"].shares["subnormal_flush"] > 0
    else:
        assert e.inactive["subnormal_flush"] == "neither end flushes subnormal inputs"
        assert all(m.shares["subnormal_flush"] == 0 for m in e.metrics.values())


# --- design -------------------------------------------------------------------------------------


def test_design_functions_take_their_bf16_form():
    torch = function("torch", "bf16").thresholds
    assert torch.allclose == (1.6e-2, 1e-5) and torch.dtype == "bf16"  # torch.testing's bf16 defaults
    proposal = function("study-proposal@away:1:3", "bf16").thresholds
    assert {c.metric: c.limit for c in proposal.checks} == {"rms": 8 * 3e-5, "max_rel_diff": 8 * 1e-3}
    assert proposal.round_validation == "bf16"
    with pytest.raises(ValueError, match="study-2022 has no bf16 form"):
        function("study-2022", "bf16")


def test_design_generators_draw_the_harness_bf16_values():
    problem = parse_config(TINY).problem
    got = parse_generator("away:1:3").inputs(problem, 5, 36, "bf16")
    for role, arr in got.items():
        assert arr.dtype == ml_dtypes.bfloat16 and (arr.astype(np.float32) < 0).any(), role
        # the float draw's top 16 bits, sign bit aside (drawn apart)
        draw = harness.harness_float_values(arr.size, 5, 1, 3)
        top = (draw.view(np.uint32) >> 16).astype(np.uint16)
        np.testing.assert_array_equal(arr.view(np.uint16).reshape(-1) & 0x7FFF, top & 0x7FFF, role)


def test_bf16_accumulator_rounds_the_running_sum_to_bf16_after_every_fma():
    problem = parse_config(TINY).problem
    kmodel = kernel_models.kernel("rocmlir-2022-nonxdlops", hw="mi200", input="bf16")
    assert kmodel.plan(problem)[0].unit.group_size == 1  # one FMA per step
    inputs = harness.harness_inputs(problem, 3, -1, 1, "float", dtype="bf16")
    got = bugs.emulate(problem, kmodel, inputs, bugs.Bf16Accumulator()).kernel_fp32
    x, w = tensors(inputs, problem)
    want = []
    for ho in range(problem.h - 2):
        for wo in range(problem.w - 2):
            for k in range(problem.k):
                acc = 0.0
                for y in range(3):  # gemmK of a kyxc filter: y, x, c ascending
                    for xx in range(3):
                        for c in range(problem.c):
                            fma = np.float32(acc + x[0, ho + y, wo + xx, c] * w[k, y, xx, c])  # exact, one RNE32
                            acc = float(fma.astype(ml_dtypes.bfloat16))
                want.append(acc)
    np.testing.assert_array_equal(got, np.array(want, np.float32))
    good = bugs.emulate(problem, kmodel, inputs).kernel_fp32
    assert (got != good).any()


def test_mutants_that_do_not_make_sense_in_bf16_say_why():
    problem = parse_config(TINY).problem
    kmodel = kernel_models.kernel("rocmlir-2022-nonxdlops", hw="mi200", input="bf16")
    inputs = harness.harness_inputs(problem, 3, -1, 1, "float", dtype="bf16")
    with pytest.raises(bugs.NotApplicable, match="bf16-accumulator"):
        bugs.emulate(problem, kmodel, inputs, bugs.Fp16Accumulator())
    with pytest.raises(bugs.NotApplicable, match="f16-only"):
        bugs.emulate(problem, kmodel, inputs, bugs.SplitKPartialCount())
    names = {m.name for m in bugs.default_mutants("bf16")}
    assert "bf16-accumulator" in names and not names & {"fp16-accumulator", "split-k-count", "stale-partial-race"}
    assert "bf16-accumulator" not in {m.name for m in bugs.default_mutants()}  # the fp16 set is unchanged


def test_design_bf16_seed_job_measures_in_bf16_terms():
    (target,) = resolve_targets([BF16], hw="mi200", kernel=None, validator="cpu")
    assert target.input == "bf16"
    fns = tuple(parse_functions(["torch"], "bf16"))
    out = seed_job(SeedTask(target, parse_generator("float:-1:1"), 2, fns, (bugs.ScaledElement(None, 1.125),)))
    # the same test through run(): the kernel's bf16 output against the validation rounded to bf16
    r = run(BF16, hw="mi200", seed=2, rand_min=-1, rand_max=1, progress=False)
    want = compare(r.validation_output, r.kernel_output, dtype_hint="bf16", round_validation="bf16")
    assert out["metrics"]["max_epsilon_diff"] == want.max_epsilon_diff
    assert out["metrics"]["rms"] == want.rms
    # one element times 1.125: bf16 keeps 1.125·x exactly (3 significant bits more): changed
    assert out["exact"]["scaled-element(element=None, factor=1.125)"] is True


def test_design_bf16_end_to_end_and_its_refusals(capsys):
    def cli(*argv):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = cli(
        "design", BF16, "--seeds", "2", "--validators", "torch", "exact", "--bugs", "bf16-accumulator",
        "drop-last-k-block", "--no-progress", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["inputs"]["format"] == "bf16"
    assert doc["inputs"]["mutants"] == ["drop-last-k-block(block=None)", "bf16-accumulator()"]
    assert {r["validator"] for r in doc["records"]} >= {"torch@float:-1:1", "recommended@float:-1:1"}
    code, out, err = cli("design", BF16, "--seeds", "2", "--validators", "torch", "--bugs", "none", "--no-progress")
    assert code == 0 and "format: bf16 tensors and bf16 outputs" in out, err
    for argv, words in (
        (("--bugs", "split-k-count"), ("--bugs: split-k-count does not apply to bf16", "f16-only")),
        (("--bugs", "fp16-accumulator"), ("bf16-accumulator",)),
        (("--validators", "study-2022"), ("study-2022 has no bf16 form",)),
    ):
        code, out, err = cli("design", BF16, "--seeds", "1", *argv, "--no-progress")
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert all(w in err for w in words), err
    code, out, err = cli("design", BF16, BF16.replace("-t bf16", "-t f16"), "--seeds", "1", "--no-progress")
    assert code == 2 and "one data type at a time" in err and "Traceback" not in err, err
    with pytest.raises(ConfigError, match="one data type"):
        resolve_targets([BF16, BF16.replace("-t bf16", "-t f16")], hw="mi200", kernel=None, validator="cpu")


def test_explain_cli_on_bf16(capsys):
    code = main(["explain", BF16, "--no-progress", "--format", "json", "--top", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["format"] == "bf16" and "overflow" in doc["inactive"]


# --- the --gpu-output match search --------------------------------------------------------------


def test_match_search_finds_a_bf16_output_of_another_seed():
    r = run(BF16, hw="mi200", progress=False)
    planted = run(BF16, hw="mi200", seed=2, progress=False).kernel_output  # the config's seed is 1
    s = search_matches(r, planted, stages=("array", "inputs"))
    assert s.matches == [{"seed": 2}] and s.format == "bf16"
    assert s.differences["format"] == "bf16" and "bf16 ulps apart" in s.format_text()


def test_match_search_finds_a_bf16_output_of_another_unit():
    # inputs with bf16 subnormals: MI200 flushes them, MI100 keeps them, so the outputs differ
    problem = parse_config(BF16_INT).problem
    _, inputs = _tiny_multiples(problem, 3)
    user = {"x": inputs["input"], "w": inputs["filter"]}
    r = run(BF16_INT, hw="mi200", inputs=user, progress=False)
    planted = run(BF16_INT, hw="mi100", inputs=user, progress=False).kernel_output
    assert (planted.view(np.uint16) != r.kernel_output.view(np.uint16)).any()
    s = search_matches(r, planted, stages=("model",))
    assert {"hw": "mi100"} in s.matches and {"hw": "mi200"} not in s.matches


def test_design_never_recommends_zero_where_bf16_rounding_acts():
    """Issue 38: fit seeds that happen to round alike gave ``assert_close(rtol=0, atol=0)`` for a
    bf16 convolution whose other seeds differ by one ulp. The floors are one bf16 ulp at the
    largest reference magnitude (absolute), 2^-7 (relative) and one such element over all of them
    (RMS over the largest magnitude), computed here from run()'s own validation output."""
    from validation.design.sweep import rounding_floors

    (target,) = resolve_targets([BF16], hw="mi200", kernel=None, validator="cpu")
    fns = tuple(parse_functions(["torch"], "bf16"))
    rows = [seed_job(SeedTask(target, parse_generator("float:-1:1"), s, fns, ())) for s in (1, 2)]
    r = run(BF16, hw="mi200", seed=1, rand_min=-1, rand_max=1, progress=False)
    ref = np.abs(np.asarray(r.validation_output, np.float64))
    top = max(ref.max(), max(row["max_ref"] for row in rows))
    ulp = 2.0 ** (math.floor(math.log2(top)) - 7)
    floors = rounding_floors(rows)
    assert floors["max_abs_diff"] == ulp and floors["max_rel_diff"] == 2.0**-7
    assert floors["rms"] == pytest.approx(ulp / (top * math.sqrt(ref.size)), rel=1e-12)
    from validation.design.sweep import fit_noise

    fit = fit_noise(
        [{**row, "metrics": {**row["metrics"], "max_abs_diff": 0.0, "rms": 0.0, "max_rel_diff": 0.0}} for row in rows],
        0.01,
    )
    for m in ("max_abs_diff", "max_rel_diff", "rms"):
        assert fit["metrics"][m]["threshold"] == floors[m] > 0
    # integer-exact inputs: both sides hold the exact result, zero stays a legitimate rule
    exact = [{**row, "generator": "exact"} for row in rows]
    assert rounding_floors(exact) == {}
