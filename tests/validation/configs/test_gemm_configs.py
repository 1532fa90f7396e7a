"""rocmlir-gen GEMM configs (``--operation gemm``): parsing, and the run's 1×1-convolution mapping
checked bit for bit (issue 29).

The oracles are independent of the convolution path: the kernel's fp32 result must equal
``emu.gemm(A, B, None, unit, order)`` on the harness's A and B read back as matrices (transposes
undone here, by hand), and the xdlops-run CPU validation (fp64 loop, cast to fp32) a plain
Python fp64 dot in ascending k. Tiny GEMMs (2 groups of 5×3, K 37, so the padding kernel pads
gemmK) on units the suite already compiles (fp16 and bf16 on MI200).
"""

import json

import numpy as np
import pytest

import emu
from models import bugs, harness
from validation.cli import main
from validation.configs import ConfigError, parse_config
from validation.design import parse_functions, resolve_targets
from validation.design.generators import parse_generator
from validation.design.sweep import SeedTask, seed_job
from validation.explain import SOURCES, explain
from validation.metrics import compare
from validation.run import run

BASE = "rocmlir-gen --operation gemm -g 2 -m 5 -k 37 -n 3 -rand 1 -rand_type float -rand_min -1 -rand_max 1"


@pytest.mark.parametrize(
    ("text", "shape", "layouts"),
    [
        ("--operation gemm -t f16 -m 8 -k 16 -n 4", (1, 8, 4, 16), ("gkcyx", "gcnhw", "gknhw")),
        (
            "-operation=gemm -t bf16 -g 3 -m 2 -k 5 -n 7 -transA -transB=true -transC",
            (3, 2, 7, 5),
            ("gckyx", "gnchw", "gnkhw"),
        ),
        ("--operation gemm -t f16 -groupsize 2 -p", (1, 1024, 512, 769), ("gkcyx", "gcnhw", "gknhw")),
    ],
)
def test_gemm_config_is_the_1x1_forward_convolution(text, shape, layouts):
    c = parse_config(text)
    g, m, n, k = shape
    assert (c.gemm.g, c.gemm.m, c.gemm.n, c.gemm.k) == shape
    p = c.problem
    assert (p.direction, p.n, p.c, p.k, p.h, p.w, p.y, p.x, p.groups) == ("fwd", n, g * k, g * m, 1, 1, 1, 1, g)
    assert (p.fil_layout, p.in_layout, p.out_layout) == layouts
    sub = c.gemms[0]
    assert (sub.g, sub.m, sub.n, sub.k) == (g, m, n, k)  # the convolution's GEMM is the GEMM itself


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("--operation gemm -t f16 -m 8 -k 16", "n: not given"),
        ("--operation gemm -t f16 -m 0 -k 16 -n 2", "m: 0 is not allowed"),
        ("--operation gemm -t f16 -m 8 -k 16 -n 2 -fil_h 3", "fil_h: a convolution option; -operation gemm takes"),
        ("--operation gemm -t f16 -m 8 -k 16 -n 2 -store-method atomic_add", "allowed: set"),
        ("--operation gemm -t f16 -m 8 -k 16 -n 2 -store-method add", "not one of set, atomic_add"),
        ("--operation gemm -t f16 -m 8 -k 16 -n 2 -transA=maybe", "transA: 'maybe' is not a boolean"),
        ("--operation conv2d -t f16 -m 8", "m: a GEMM option"),
        ("--operation gemmm -m 8", "is not one of conv2d, conv2d_bwd_data, conv2d_bwd_weight, conv, conv_bwd_data"),
    ],
)
def test_gemm_config_errors_name_the_flag(text, needle):
    with pytest.raises(ConfigError, match=None) as err:
        parse_config(text)
    assert needle in str(err.value)


def _fp64_dot(a, b):
    """C[g, i, j] = Σ_k a[g, i, k]·b[g, k, j], one float64 add per term in ascending k."""
    g_, m_, k_ = a.shape
    out = np.zeros((g_, m_, b.shape[2]))
    for g in range(g_):
        for i in range(m_):
            for j in range(b.shape[2]):
                s = 0.0
                for kk in range(k_):
                    s += float(a[g, i, kk]) * float(b[g, kk, j])
                out[g, i, j] = s
    return out


@pytest.mark.parametrize(
    ("dtype", "flags"),
    [("f16", ""), ("f16", "-transA -transB -transC"), ("bf16", "-transB")],
)
def test_gemm_run_equals_emu_gemm_and_fp64_dot(dtype, flags):
    config = parse_config(f"{BASE} -t {dtype} {flags}")
    result = run(config, hw="mi200", kernel="xdlops", progress=False)
    gs = config.gemm
    a = np.asarray(result.inputs["filter"]).reshape(gs.a_shape)  # memory order of A as stored
    b = np.asarray(result.inputs["input"]).reshape(gs.b_shape)
    if gs.trans_a:
        a = a.transpose(0, 2, 1)
    if gs.trans_b:
        b = b.transpose(0, 2, 1)
    (plan,) = result.kernel.plan(config.problem)
    direct = np.stack(
        [
            emu.gemm(np.ascontiguousarray(a[g]), np.ascontiguousarray(b[g]), None, plan.unit, plan.order)
            for g in range(2)
        ]
    )
    assert np.array_equal(gs.c_matrix(result.kernel_fp32).view(np.uint32), direct.view(np.uint32))
    expected_validation = _fp64_dot(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    got_validation = gs.c_matrix(result.validation_output).astype(np.float32)
    assert np.array_equal(got_validation.view(np.uint32), expected_validation.view(np.uint32))


def test_run_cli_names_the_gemm(capsys):
    code = main(["run", f"{BASE} -t f16 -transC", "--kernel", "xdlops", "--format", "json", "--no-progress"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    assert doc["gemm"]["M"] == 5 and doc["gemm"]["N"] == 3 and doc["gemm"]["K"] == 37 and doc["gemm"]["G"] == 2
    assert doc["axes"] == ["g", "n", "m"]
    assert "GEMM G=2 M=5 N=3 K=37" in doc["operation"] and "fp16" in doc["format"]


def test_run_check_says_which_order_is_assumed(capsys):
    assert main(["run", f"{BASE} -t bf16", "--check", "--kernel", "xdlops"]) == 0
    out = capsys.readouterr().out
    assert "GEMM G=2 M=5 N=3 K=37" in out and "bf16" in out
    assert "no GEMM entries" in out


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_explain_on_a_gemm_spans_the_fp64_dot_to_the_kernel(dtype):
    config = parse_config(f"{BASE} -t {dtype} -transA")
    out = explain(config, hw="mi200", kernel="xdlops", top=3, progress=False, keep_arrays=True)
    gs = config.gemm
    assert out.gemm == gs and out.shape == (2, 5, 3) and out.format == ("fp16" if dtype == "f16" else "bf16")
    assert all(len(e.coords) == 3 for e in out.elements)
    inputs = harness.harness_inputs(config.problem, **config.harness_kwargs())
    a = np.asarray(inputs["filter"]).reshape(gs.a_shape).transpose(0, 2, 1).astype(np.float64)
    b = np.asarray(inputs["input"]).reshape(gs.b_shape).astype(np.float64)
    reference = gs.c_matrix(out.arrays["none"]).astype(np.float32)
    assert np.array_equal(reference.view(np.uint32), _fp64_dot(a, b).astype(np.float32).view(np.uint32))
    kernel = run(config, hw="mi200", kernel="xdlops", progress=False).kernel_output
    everything = out.arrays["+".join(SOURCES)].astype(kernel.dtype)
    assert np.array_equal(everything.reshape(-1).view(np.uint16), np.asarray(kernel).reshape(-1).view(np.uint16))
    assert "GEMM G=2 M=5 N=3 K=37" in out.format_text() and out.to_dict()["gemm"]["transA"] is True


def test_design_on_a_gemm_measures_the_run_and_skips_geometry_bugs():
    text = f"{BASE} -t f16 -x2"
    (target,) = resolve_targets([text], hw="mi200", kernel=None, validator="cpu")
    fns = tuple(parse_functions(["torch"], "fp16"))
    mutants = (bugs.PaddingBorder(), bugs.WrongGeometry(), bugs.ScaledElement(None, 1.125))
    out = seed_job(SeedTask(target, parse_generator("float:-1:1"), 2, fns, mutants))
    r = run(text, hw="mi200", seed=2, rand_min=-1, rand_max=1, progress=False)
    want = compare(r.validation_output, r.kernel_output, dtype_hint="fp16", round_validation="fp16")
    assert out["metrics"]["max_epsilon_diff"] == want.max_epsilon_diff and out["metrics"]["rms"] == want.rms
    skipped = out["not_applicable"]
    assert set(skipped) == {mutants[0].label, mutants[1].label}
    assert "a GEMM has no padding" in skipped[mutants[0].label]
    assert out["exact"][mutants[2].label] is True  # 1.125·x differs from x in fp16 unless x is 0


def test_design_cli_names_the_gemm(capsys):
    argv = ["design", f"{BASE} -t bf16 -x2", "--seeds", "1", "--validators", "torch", "--bugs", "none"]
    assert main([*argv, "--no-progress", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["format"] == "bf16"
    assert doc["inputs"]["tests"][0]["gemm"].startswith("GEMM G=2 M=5 N=3 K=37")


def test_bad_gemm_config_is_exit_2_naming_the_flag(capsys):
    for command in ("run", "explain", "design"):
        assert main([command, "--operation gemm -t f16 -m 4 -k 8", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "n: not given" in err and "Traceback" not in err and err.count("\n") == 1, err


def test_gpu_output_of_a_gemm_is_read_as_c_and_its_seed_found(tmp_path, capsys):
    planted = run(parse_config(f"{BASE.replace('-rand 1', '-rand 2')} -t f16 -x2 -transC"), hw="mi200", progress=False)
    path = tmp_path / "c.npy"
    np.save(path, planted.kernel_output.reshape(2, 3, 5))  # C as (G, N, M), its memory order
    argv = ["run", f"{BASE} -t f16 -x2 -transC", "--gpu-output", str(path), "--format", "json", "--no-progress"]
    assert main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu"]["answer"] == "differs" and set(doc["gpu"]["suspects"][0]["coords"]) == {"g", "n", "m"}
    assert doc["gpu"]["matches"] == [{"seed": 2}]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gemm_with_a_k_reduction_instruction_order_equals_emu_gemm(dtype):
    # 64x320 · 320x48: the 2022 default tuning picks v_mfma_f32_16x16x16f16, whose strided k
    # groups ({b, b+4, b+8, b+12} per 16-wide tile) are a custom gemmK order
    config = parse_config(
        f"rocmlir-gen --operation gemm -t {dtype} -m 64 -k 320 -n 48 -transB -rand 1 -rand_type float "
        "-rand_min -1 -rand_max 1 -x2"
    )
    result = run(config, hw="mi200", progress=False)
    gs = config.gemm
    (plan,) = result.kernel.plan(config.problem)
    assert plan.order.k_order is not None and "16x16x16" in plan.order.notes
    a = np.asarray(result.inputs["filter"]).reshape(gs.a_shape)[0]
    b = np.ascontiguousarray(np.asarray(result.inputs["input"]).reshape(gs.b_shape)[0].T)
    direct = emu.gemm(a, b, None, plan.unit, plan.order)
    assert np.array_equal(gs.c_matrix(result.kernel_fp32)[0].view(np.uint32), direct.view(np.uint32))
