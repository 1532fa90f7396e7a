"""The capture kit's plan check without torch (issue 38.5), its bounded plan reader (issue 41.9),
the ops transformer layers call (``baddbmm``, broadcast ``matmul``, 3-D ``linear``; issue 37.5) and
the batch sweep (issue 40.3).

The contracts checked are torch's own (``aten/src/ATen/native/LinearAlgebra.cpp``, ``Convolution.cpp``,
``cuda/ScaledBlas.cpp``); each refusal must name the field to fix, exit 2, in one line. The
synthetic captures are emulated outputs of a schedule planted here (``emu.gemm`` on the operands,
batches broadcast by hand), which ``identify``'s search must find again bit for bit.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from validation.captures import kit, load_capture
from validation.captures.format import batch_axes, complete, generate_operands, save
from validation.captures.plan import MAX_PLAN_BYTES, check_contract, check_gpu, gpu_arch, read_plan

ROOT = Path(__file__).resolve().parents[3]
H200 = ROOT / "tests" / "data" / "captures" / "h200_s16"

#: the kit copied alone, run as ``python kit.py ARGS`` with torch, ml_dtypes and fp16emu made
#: unimportable (what a machine preparing a GPU run may lack)
_PLAIN = """
import runpy, sys
blocked = {"emu", "models", "validation", "tests", "ml_dtypes", "scipy", "torch"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{name} is not here")
sys.meta_path.insert(0, Block())
sys.argv = ["kit.py"] + sys.argv[1:]
runpy.run_path("kit.py", run_name="__main__")
"""


def _copied_kit(folder: Path, *args, timeout=60):
    import shutil

    for name in ("kit.py", "format.py", "plan.py"):
        shutil.copy(Path(kit.__file__).with_name(name), folder / name)
    return subprocess.run(
        [sys.executable, "-I", "-c", _PLAIN, *args], capture_output=True, text=True, cwd=folder, timeout=timeout
    )


# --- --check without torch ------------------------------------------------------------------


def test_check_refuses_mm_of_mismatched_shapes_without_torch(tmp_path):
    """The trial's case: mm of A (8, 8) and B (9, 8) was accepted; now one line naming shapes.B."""
    res = _copied_kit(tmp_path, "--check", "mm", "--A", "8", "8", "--B", "9", "8")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("capture_torch: shapes.B: A is 8×8, so B must be 8×N"), res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    res = _copied_kit(tmp_path, "--check", "mm", "--A", "8", "8", "--B", "8", "9", "--dtype", "bf16", "--gpu", "H100")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("ok ") and "what H100 accepts; nothing run" in res.stdout


def test_check_a_plan_for_a_gpu_without_torch(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "gpu": "NVIDIA A100-SXM4-80GB",
                "cases": [
                    {"name": "a", "op": "mm", "dtype": "bf16", "shapes": {"A": [4, 8], "B": [8, 2]}},
                    {"name": "b", "op": "scaled_mm", "shapes": {"A": [16, 32], "B": [32, 16]}},
                ],
            }
        )
    )
    res = _copied_kit(tmp_path, "--check", "--plan", "plan.json")
    assert res.returncode == 2
    assert res.stderr == (
        "capture_torch: --plan: entry 1 (b): gpu: torch._scaled_mm needs compute capability 8.9 or newer "
        "(Ada, Hopper, Blackwell); NVIDIA A100-SXM4-80GB (compute capability 8.0)\n"
    )
    res = _copied_kit(tmp_path, "--check", "--plan", "plan.json", "--gpu", "H200")  # the flag wins
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1].startswith("2 case(s) checked")


#: plans written for a GPU other than the H200 the others ran on (block scales need Blackwell)
PLAN_GPUS = {"plan_blockscaled.json": "NVIDIA B200"}


@pytest.mark.parametrize("plan", sorted((ROOT / "benchmarks" / "captures").glob("plan_*.json")))
def test_the_project_plans_pass_the_check_for_the_gpu_they_are_for(plan):
    specs = read_plan(plan, gpu=PLAN_GPUS.get(plan.name, "NVIDIA H200"), check_gpus=True)
    assert specs and all("gpu" not in s for s in specs)


ENTRY = {"op": "mm", "shapes": {"A": [8, 16], "B": [16, 4]}}
CONV = {"op": "conv2d", "shapes": {"input": [2, 6, 9, 9], "weight": [4, 3, 3, 3]}, "groups": 2}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"op": "bmm", "shapes": {"A": [2, 8, 16], "B": [3, 16, 4]}}, "shapes.B: A holds 2 matrices, so B must too"),
        ({"op": "bmm", "shapes": {"A": [2, 8, 16], "B": [2, 15, 4]}}, "shapes.B: A is 2×8×16, so B must be 2×16×N"),
        ({**ENTRY, "op": "addmm", "shapes": {**ENTRY["shapes"], "C": [3, 4]}}, "shapes.C: (3, 4) does not broadcast"),
        (
            {"op": "baddbmm", "shapes": {"A": [2, 8, 16], "B": [2, 16, 4], "C": [3, 1, 4]}},
            "shapes.C: (3, 1, 4) does not broadcast to the output (b, M, N) (2, 8, 4)",
        ),
        ({**ENTRY, "op": "addmm", "shapes": {**ENTRY["shapes"], "C": [4]}, "beta": 0.1}, "beta: 0.1 is not an fp32"),
        ({"op": "matmul", "shapes": {"A": [2, 8, 16], "B": [3, 16, 4]}}, "shapes.B: batch dims (3,) do not broadcast"),
        ({"op": "matmul", "shapes": {"A": [16], "B": [16, 4]}}, "shapes.A: matmul captures take 2 or more dims"),
        ({"op": "linear", "shapes": {"input": [2, 5, 8], "weight": [4, 7]}}, "shapes.weight: input has 8 features"),
        ({"op": "linear", "shapes": {"input": [5, 8], "weight": [4, 8], "bias": [5]}}, "shapes.bias: expected [4]"),
        ({**CONV, "groups": 4}, "groups: 6 input channels do not divide into 4 groups"),
        ({**CONV, "shapes": {**CONV["shapes"], "weight": [5, 3, 3, 3]}}, "shapes.weight: 5 output channels"),
        ({**CONV, "shapes": {**CONV["shapes"], "weight": [4, 6, 3, 3]}}, "shapes.weight: expected 3 channels"),
        ({**CONV, "stride": [0, 1]}, "stride: expected two whole numbers ≥ 1"),
        ({**CONV, "padding": [-1, 0]}, "padding: expected two whole numbers ≥ 0"),
        ({**CONV, "dilation": [5, 5]}, "padding: the filter (3×3, dilation 5, 5) is larger than the padded input"),
        ({**CONV, "groups": 1.5}, "groups: expected a whole number ≥ 1, got 1.5"),
        ({**CONV, "groups": [1, 1]}, "groups: expected a whole number ≥ 1, got [1, 1]"),
        (
            {
                "op": "conv2d_bwd_data",
                "shapes": {"grad_output": [2, 4, 7, 6], "weight": [4, 6, 3, 3]},
                "input_shape": [2, 6, 9, 9],
            },
            "shapes.grad_output: expected [2, 4, 7, 7] (the forward output of these shapes)",
        ),
        ({"op": "scaled_mm", "shapes": {"A": [16, 40], "B": [40, 16]}}, "shapes: torch._scaled_mm needs K and N"),
        ({**ENTRY, "out_dtype": "float16", "dtype": "bf16"}, "out_dtype: torch.mm gives bfloat16"),
        ({"op": "bmm", "shapes": {"A": [2, 8, 16], "B": [2, 16, 4]}, "out_dtype": "float32"}, "out_dtype: only mm"),
        ({**ENTRY, "allow_tf32": True}, "allow_tf32: TF32 applies to float32 operands; dtype is float16"),
        ({**ENTRY, "memory_format": "channels_last"}, "memory_format: channels_last is a layout of 4-D convolution"),
        ({"op": "mm", "shapes": 5}, "shapes: expected an object of operand shapes"),
        ({"op": "mm", "shapes": {"A": [8, 0], "B": [0, 4]}}, "shapes.A: expected a list of sizes ≥ 1"),
        (
            {"op": "mm", "shapes": {"A": [2**20, 2**12], "B": [2**12, 2**10]}},
            "shapes: 5,372,903,424 elements in the operands",
        ),
    ],
)
def test_torchs_contracts_are_checked_naming_the_field(entry, message):
    with pytest.raises(ValueError) as err:
        check_contract(entry)
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize(
    ("name", "arch"),
    [
        ("NVIDIA H200", ("nvidia", (9, 0))),
        ("h100", ("nvidia", (9, 0))),
        ("NVIDIA GeForce RTX 4090", ("nvidia", (8, 9))),
        ("NVIDIA L4", ("nvidia", (8, 9))),
        ("A100-SXM4-80GB", ("nvidia", (8, 0))),
        ("NVIDIA A10G", ("nvidia", (8, 6))),
        ("Tesla V100-SXM2-16GB", ("nvidia", (7, 0))),
        ("Tesla T4", ("nvidia", (7, 5))),
        ("NVIDIA B200", ("nvidia", (10, 0))),
        ("sm_89", ("nvidia", (8, 9))),
        ("8.0", ("nvidia", (8, 0))),
        ("AMD Instinct MI300X", ("amd", "gfx942")),
        ("gfx90a", ("amd", "gfx90a")),
        ("MI355X", ("amd", "gfx950")),
    ],
)
def test_gpu_names(name, arch):
    assert gpu_arch(name) == arch


@pytest.mark.parametrize(
    ("entry", "gpu", "message"),
    [
        ({**ENTRY, "dtype": "bfloat16"}, "Tesla V100", "dtype: bfloat16 needs compute capability 8.0"),
        (
            {**ENTRY, "dtype": "float32", "allow_tf32": True},
            "Tesla T4",
            "allow_tf32: TF32 needs compute capability 8.0",
        ),
        ({**ENTRY, "dtype": "float32", "allow_tf32": True}, "MI300X", "allow_tf32: TF32 is NVIDIA's"),
        ({"op": "scaled_mm", "shapes": {"A": [16, 32], "B": [32, 16]}}, "MI300X", "dtype: MI300 (gfx942) multiplies"),
        ({"op": "scaled_mm", "dtype": "e5m2", "shapes": {"A": [16, 32], "B": [32, 16]}}, "H100", "b_dtype: cuBLASLt"),
        (ENTRY, "TPU v5", "gpu: 'TPU v5' is not a GPU the kit knows"),
    ],
)
def test_what_the_named_gpu_accepts(entry, gpu, message):
    with pytest.raises(ValueError) as err:
        check_gpu(check_contract(entry), gpu)
    assert str(err.value).startswith(message), str(err.value)


# --- the plan file, read safely (issue 41.9) ------------------------------------------------


def _plan_error(tmp_path, path) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "validation.captures.kit", "--plan", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    return res.stderr


def test_a_fifo_or_device_plan_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    assert "plan.json is not a regular file (a FIFO, device or folder)" in _plan_error(tmp_path, fifo)
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    assert "zero.json is not a regular file" in _plan_error(tmp_path, link)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nests JSON 100000 deep; a plan needs 16 at most"),
        ('[{"op": "mm", "shapes": 5}]', "entry 0 (unnamed): shapes: expected an object of operand shapes"),
        ('[{"op": "mm", "seed": NaN, "shapes": {}}]', "holds NaN; plans take finite numbers"),
        (
            '[{"op": "mm", "aplha": 2, "shapes": {"A": [1, 2], "B": [2, 1]}}]',
            "entry 0 (unnamed): aplha: not a plan key",
        ),
        ('[{"op": "mm"', "is not JSON (Expecting"),
        ('{"cases": 3}', "must hold a JSON list of objects"),
        ('"[]"', "must hold a JSON list of objects"),
    ],
)
def test_bad_plans_are_one_line_naming_the_fault(tmp_path, text, message):
    path = tmp_path / "plan.json"
    path.write_text(text)
    assert message in _plan_error(tmp_path, path)


def test_an_oversized_plan_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "plan.json"
    with open(path, "wb") as f:
        f.truncate(MAX_PLAN_BYTES + 1)
    assert "is larger than 16 MiB" in _plan_error(tmp_path, path)


# --- batch sweeps (issue 40.3) --------------------------------------------------------------


def test_batch_sweep_files_hold_the_leading_rows_of_one_draw(tmp_path, monkeypatch, capsys):
    """``--batch-sweep 1,3,8`` on CPU torch (the GPU path with the device stood in): one file per
    size, NAME_bN.npz; every file's swept operands are the leading rows of the largest's, the
    others equal; written with --omit-operands, each is drawn again from its fields alone."""
    torch = pytest.importorskip("torch")
    real = kit.capture_case
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "CPU stand-in")
    monkeypatch.setattr(kit, "check_device", lambda *a: None)

    def on_the_cpu(t, spec, ops=None, **kw):
        with monkeypatch.context() as m:
            m.setattr(torch.cuda, "is_available", lambda: False)
            return real(t, spec, ops, **{**kw, "device": "cpu"})

    monkeypatch.setattr(kit, "capture_case", on_the_cpu)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            [
                {"name": "lin", "op": "linear", "shapes": {"input": [8, 5, 24], "weight": [6, 24], "bias": [6]}},
                {"name": "add", "op": "addmm", "shapes": {"A": [8, 24], "B": [24, 6], "C": [8, 6]}, "seed": 4},
                {"name": "mat", "op": "matmul", "shapes": {"A": [1, 4, 24], "B": [8, 24, 3]}, "seed": 6},
                {
                    "name": "conv",
                    "op": "conv2d_bwd_data",
                    "input_shape": [8, 2, 5, 5],
                    "padding": 1,
                    "shapes": {"grad_output": [8, 3, 5, 5], "weight": [3, 2, 3, 3]},
                    "seed": 2,
                },
            ]
        )
    )
    out = tmp_path / "out"
    args = ["--plan", str(plan), "--out-dir", str(out), "--batch-sweep", "3,1,8", "--omit-operands"]
    assert kit.main(args) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{n}_b{b}.npz" for n in ("lin", "add", "mat", "conv") for b in (1, 3, 8)
    )
    for name, swept in (("lin", {"input"}), ("add", {"A", "C"}), ("mat", {"B"}), ("conv", {"grad_output"})):
        big = load_capture(out / f"{name}_b8.npz")
        for b in (1, 3, 8):
            raw = np.load(out / f"{name}_b{b}.npz")
            assert int(raw["batch"]) == b and raw["batch_sweep"].tolist() == [1, 3, 8]
            assert str(raw["batch_of"]) == f"{name}_b8.npz"
            assert set(json.loads(str(raw["batch_axes"]))) == swept | {"out"}
            cap = load_capture(out / f"{name}_b{b}.npz")  # operands drawn again, sha256 checked
            for k, v in cap.operands.items():
                want = big.operands[k][:b] if k in swept else big.operands[k]
                np.testing.assert_array_equal(v, want)
            assert cap.out.shape[0] == b
    raw = dict(np.load(out / "add_b3.npz"))
    raw["batch"] = np.asarray(9)
    with pytest.raises(ValueError, match="^batch: expected a whole number from 1 to the sweep's largest, 8"):
        complete(raw)


def test_batch_sweep_is_checked_without_torch(tmp_path):
    res = _copied_kit(
        tmp_path, "--check", "bmm", "--A", "4", "8", "16", "--B", "4", "16", "2", "--batch-sweep", "1,2,4"
    )
    assert res.returncode == 0 and "each at batch sizes 1,2,4" in res.stdout, res.stderr
    res = _copied_kit(tmp_path, "--check", "linear", "--input", "16", "--weight", "2", "16", "--batch-sweep", "1,2")
    assert res.returncode == 2 and res.stderr.startswith("capture_torch: shapes.input: a 1-D linear input has no batch")
    res = _copied_kit(tmp_path, "--check", "mm", "--A", "4", "8", "--B", "8", "2", "--batch-sweep", "0,2")
    assert res.returncode == 2 and res.stderr.startswith("capture_torch: --batch-sweep: expected batch sizes ≥ 1")


def test_batch_axes_per_op():
    assert batch_axes(check_contract({**ENTRY, "op": "addmm", "shapes": {**ENTRY["shapes"], "C": [1, 4]}})) == {
        "A": 0,
        "out": 0,
    }
    spec = check_contract({"op": "baddbmm", "shapes": {"A": [3, 8, 16], "B": [3, 16, 4], "C": [3, 8, 4]}})
    assert batch_axes(spec) == {"A": 0, "B": 0, "C": 0, "out": 0}
    scaled = check_contract({"op": "scaled_mm", "rowwise": True, "shapes": {"A": [16, 32], "B": [32, 16]}})
    assert batch_axes(scaled) == {"A": 0, "scale_a": 0, "out": 0}
    bcast = check_contract({"op": "matmul", "shapes": {"A": [1, 8, 16], "B": [4, 16, 2]}})
    assert batch_axes(bcast) == {"B": 0, "out": 0}
    assert batch_axes(check_contract({"op": "matmul", "shapes": {"A": [3, 8, 16], "B": [16, 2]}})) == {"A": 0, "out": 0}
    ops = generate_operands(scaled)
    small = kit.take_batch(scaled, ops, 5)
    assert small["A"].shape == (5, 32) and small["scale_a"].shape == (5, 1) and small["scale_b"] is ops["scale_b"]


# --- the ops transformer layers call, captured on CPU torch ---------------------------------


def test_baddbmm_and_matmul_capture_and_load(tmp_path):
    """The kit runs torch.baddbmm (alpha, beta) and a broadcast torch.matmul (CPU here) and the
    reader takes the files back, alpha and beta included."""
    torch = pytest.importorskip("torch")
    spec = {"op": "baddbmm", "shapes": {"A": [2, 8, 40], "B": [2, 40, 6], "C": [1, 8, 6]}, "alpha": 0.5, "beta": 2.0}
    fields = kit.capture_case(torch, spec, device="cpu", omit_operands=True)
    cap = load_capture(save(tmp_path / "b.npz", fields))
    assert (cap.op, cap.alpha, cap.beta, cap.out.shape) == ("baddbmm", 0.5, 2.0, (2, 8, 6))
    A, B, C = (torch.from_numpy(cap.operands[k].view(np.float16)).float() for k in "ABC")
    want = (2.0 * C.double() + 0.5 * (A.double() @ B.double())).numpy()
    assert np.abs(cap.out.astype(np.float64) - want).max() < 0.05  # fp16 rounding of a K = 40 sum
    spec = {"op": "matmul", "shapes": {"A": [1, 8, 40], "B": [3, 40, 6]}, "dtype": "float32"}
    cap = load_capture(save(tmp_path / "m.npz", kit.capture_case(torch, spec, device="cpu")))
    assert cap.op == "matmul" and cap.out.shape == (3, 8, 6) and cap.input == "fp32"
