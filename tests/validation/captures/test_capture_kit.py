"""The capture kit (validation.capture_torch) and the capture reader (validation.captures): the
fixed format round-trips, every bad field is named, and generated operands are the same on any
machine. The torch path itself runs under ``make test-oracle`` (torch installed there)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from validation.captures import CaptureError, is_capture, kit, load_capture
from validation.captures.cli import identify_capture


def _write(path, **fields):
    np.savez(path, **{k: np.asarray(v) for k, v in fields.items()})
    return path


def _mm_capture(tmp_path, **overrides):
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (8, 40)).astype(np.float16)
    B = rng.uniform(-1, 1, (40, 6)).astype(np.float16)
    out = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    fields = {
        "op": "mm",
        "A": A,
        "B": B,
        "out": out,
        "gpu": "NVIDIA H200",
        "kernels": np.array(["nvjet_sm90_hss_64x8"]),
    }
    fields.update(overrides)
    return _write(tmp_path / "cap.npz", **fields)


def test_generated_operands_are_reproducible_and_checked():
    spec = {"op": "conv2d", "seed": 7, "shapes": {"input": [1, 2, 5, 5], "weight": [3, 2, 3, 3]}, "padding": 1}
    a, b = kit.generate_operands(spec), kit.generate_operands(spec)
    assert set(a) == {"input", "weight"}
    for name in a:
        assert a[name].dtype == np.float16
        np.testing.assert_array_equal(a[name].view(np.uint16), b[name].view(np.uint16))
    other = kit.generate_operands({**spec, "seed": 8})
    assert not np.array_equal(a["input"], other["input"])


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"op": "gemm"}, "op"),
        ({"op": "mm", "shapes": {"A": [2, 3]}}, "shapes.B"),
        ({"op": "mm", "shapes": {"A": [2, 3], "B": [3, 2], "weight": [1]}}, "shapes.weight"),
        ({"op": "mm", "dtype": "float64", "shapes": {"A": [2, 3], "B": [3, 2]}}, "dtype"),
        ({"op": "mm", "range": [1, -1], "shapes": {"A": [2, 3], "B": [3, 2]}}, "range"),
        ({"op": "conv2d_bwd_data", "shapes": {"grad_output": [1, 1, 2, 2], "weight": [1, 1, 1, 1]}}, "input_shape"),
        ({"op": "conv2d", "stride": [1, 2, 3], "shapes": {"input": [1, 1, 2, 2], "weight": [1, 1, 1, 1]}}, "stride"),
    ],
)
def test_a_bad_plan_entry_names_its_field(spec, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        kit.generate_operands(spec)


def test_omitted_operands_come_back_from_the_seed_and_are_checked(tmp_path):
    spec = {"op": "mm", "seed": 3, "shapes": {"A": [4, 9], "B": [9, 2]}, "range": [-2, 2]}
    ops = kit.generate_operands(spec)
    fields = {"op": "mm", "dtype": "float16", "seed": 3, "range": [-2.0, 2.0], "memory_format": "contiguous"}
    fields["shapes"] = json.dumps(spec["shapes"])
    for name, array in ops.items():
        import hashlib

        fields[f"{name}_sha256"] = hashlib.sha256(array.tobytes()).hexdigest()
    done = kit.complete(dict(fields))
    np.testing.assert_array_equal(done["A"].view(np.uint16), ops["A"].view(np.uint16))
    fields["B_sha256"] = "0" * 64
    with pytest.raises(ValueError, match="^B: the operand drawn from seed 3"):
        kit.complete(dict(fields))


def test_the_kit_refuses_without_a_gpu_or_an_op(capsys):
    assert kit.main([]) == 2
    assert "op:" in capsys.readouterr().err
    assert kit.main(["mm", "--A", "2", "3", "--B", "3", "2"]) == 2
    assert "--out" in capsys.readouterr().err


def test_a_capture_round_trips(tmp_path):
    path = _mm_capture(tmp_path)
    assert is_capture(path)
    cap = load_capture(path)
    assert cap.op == "mm" and cap.out_format == "fp32" and cap.gpu == "NVIDIA H200"
    assert cap.operands["A"].dtype == np.uint16 and cap.operands["A"].shape == (8, 40)
    probe_rows = _write(tmp_path / "rows.npz", a=np.zeros((2, 4), np.uint16))
    assert not is_capture(probe_rows)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"op": "gemm"}, "op"),
        ({"out": np.zeros((8, 5), np.float32)}, "out"),
        ({"out": np.zeros((8, 6), np.int32)}, "out"),
        ({"A": np.zeros((8, 39), np.float16)}, "A"),
        ({"A": np.zeros((8, 40), np.float64)}, "A"),
        ({"gpu": np.array([1, 2])}, "gpu"),
        ({"alpha": np.float64("nan")}, "alpha"),
    ],
)
def test_a_bad_capture_names_its_field(tmp_path, overrides, field):
    path = _mm_capture(tmp_path, **overrides)
    with pytest.raises(CaptureError, match=f"^{field}:"):
        load_capture(path)


def test_pickles_and_huge_headers_are_refused(tmp_path):
    obj = tmp_path / "obj.npz"
    np.savez(obj, op=np.asarray("mm"), A=np.array([object()], dtype=object))
    with pytest.raises(CaptureError, match="pickles are never loaded"):
        load_capture(obj)
    missing = _write(tmp_path / "missing.npz", op="conv2d", input=np.zeros((1, 1, 3, 3), np.float16))
    with pytest.raises(CaptureError, match="^weight: conv2d needs it"):
        load_capture(missing)


def test_identify_exit_codes(tmp_path, capsys):
    bad = _mm_capture(tmp_path, op="gemm")
    assert identify_capture(bad) == 2
    assert capsys.readouterr().err.startswith("fp16emu identify: error: op:")
    unknown_gpu = _mm_capture(tmp_path, gpu="Some Accelerator")
    assert identify_capture(unknown_gpu) == 2
    assert "--hw" in capsys.readouterr().err


#: run a copied kit as ``python kit.py ARGS`` would, with fp16emu's packages, ml_dtypes, scipy and
#: (where asked) torch made unimportable: what the GPU machine may lack
_PLAIN = """
import runpy, sys
blocked = set(sys.argv[1].split(","))
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{name} is not on the GPU machine")
sys.meta_path.insert(0, Block())
sys.argv = ["kit.py"] + sys.argv[2:]
runpy.run_path("kit.py", run_name="__main__")
"""


def _run_copied_kit(folder, *args, torch=False):
    import shutil

    for name in ("kit.py", "format.py", "plan.py"):
        shutil.copy(Path(kit.__file__).with_name(name), folder / name)
    blocked = "emu,models,validation,tests,ml_dtypes,scipy" + ("" if torch else ",torch")
    return subprocess.run(
        [sys.executable, "-I", "-c", _PLAIN, blocked, *args], capture_output=True, text=True, cwd=folder
    )


def test_the_kit_runs_as_a_plain_file_without_fp16emu(tmp_path):
    """On the GPU machine the kit may be copied alone with format.py (docs/library.md): it imports
    numpy (and torch) only. Its help, its plan checks (exit 2 naming the field) and its refusal
    without PyTorch (exit 2) all run from the copied files."""
    res = _run_copied_kit(tmp_path, "--help")
    assert res.returncode == 0, res.stderr
    assert "scaled_mm" in res.stdout
    (tmp_path / "plan.json").write_text(json.dumps([{"op": "scaled_mm", "shapes": {"A": [4, 40], "B": [40, 16]}}]))
    res = _run_copied_kit(tmp_path, "--plan", "plan.json")
    assert res.returncode == 2
    assert res.stderr.startswith("capture_torch: --plan: entry 0 (unnamed): shapes: torch._scaled_mm needs K and N"), (
        res.stderr
    )
    res = _run_copied_kit(tmp_path, "scaled_mm", "--A", "4", "32", "--B", "32", "16", "--out", "f.npz")
    assert res.returncode == 2
    assert res.stderr.startswith("capture_torch: PyTorch is not installed here"), res.stderr


def test_the_old_kit_name_still_works(tmp_path):
    """``python -m validation.capture_torch`` and ``from validation.capture_torch import capture``:
    the kit under its old name."""
    from validation import capture_torch

    assert capture_torch.capture is kit.capture and capture_torch.main is kit.main
    assert set(capture_torch.__all__) == set(kit.__all__)
    res = subprocess.run(
        [sys.executable, "-m", "validation.capture_torch", "mm", "--A", "2", "3", "--out", str(tmp_path / "x.npz")],
        capture_output=True,
        text=True,
        cwd=Path(kit.__file__).parents[2],
    )
    assert res.returncode == 2 and res.stderr.startswith("capture_torch: shapes.B: mm needs the shape of B"), res.stderr


def test_bf16_and_tf32_captures_load_as_their_formats_bit_patterns(tmp_path):
    """bf16 operands (np.savez writes ml_dtypes arrays as plain voids, the capture's dtype names
    them) load as uint16 bf16 patterns; float32 operands with allow_tf32 as tf32 (uint32 fp32
    patterns); float32 without TF32, fp8, and convolutions of other formats are refused by name."""
    import ml_dtypes

    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (8, 40)).astype(ml_dtypes.bfloat16)
    B = rng.uniform(-1, 1, (40, 6)).astype(ml_dtypes.bfloat16)
    out = (A.astype(np.float64) @ B.astype(np.float64)).astype(ml_dtypes.bfloat16)
    cap = load_capture(_mm_capture(tmp_path, A=A, B=B, out=out, dtype="bfloat16"))
    assert cap.input == "bf16" and cap.out_format == "bf16" and cap.operands["A"].dtype == np.uint16
    np.testing.assert_array_equal(cap.operands["B"], B.view(np.uint16))
    assert "(bf16 operands)" in cap.describe()
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    cap = load_capture(_mm_capture(tmp_path, A=A32, B=B32, dtype="float32", allow_tf32=True))
    assert cap.input == "tf32" and cap.operands["A"].dtype == np.uint32
    named = load_capture(_mm_capture(tmp_path, A=A32, B=B32, kernels=np.array(["sm80_xmma_gemm_tf32f32_tn"])))
    assert named.input == "tf32"
    fp32 = load_capture(_mm_capture(tmp_path, A=A32, B=B32, allow_tf32=False))  # the fp32 FMA unit's (issue 37)
    assert fp32.input == "fp32" and fp32.operands["A"].dtype == np.uint32
    with pytest.raises(CaptureError, match="^B: expected bfloat16 values like the other operands"):
        load_capture(_mm_capture(tmp_path, A=A, B=B32, dtype="bfloat16"))
    with pytest.raises(CaptureError, match="^A: float8_e4m3fn operands in mm: fp8 GEMMs are captured as scaled_mm"):
        load_capture(_mm_capture(tmp_path, A=A.astype(ml_dtypes.float8_e4m3fn), dtype="float8_e4m3fn"))
    conv = _write(
        tmp_path / "conv.npz",
        op="conv2d",
        input=np.zeros((1, 2, 4, 4), ml_dtypes.bfloat16),
        weight=np.zeros((3, 2, 1, 1), ml_dtypes.bfloat16),
        stride=[1, 1],
        padding=[0, 0],
        dilation=[1, 1],
        dtype="bfloat16",
        out=np.zeros((1, 3, 4, 4), np.float32),
    )
    assert load_capture(conv).input == "bf16"  # convolutions of bf16, tf32 and fp32 operands load (issue 37)


def test_a_bf16_output_without_its_dtype_names_the_field_to_add(tmp_path):
    """Issue 38.5: np.savez writes bfloat16 as 2-byte voids; a capture without ``dtype`` was told
    "got |V2 (fp8 outputs: not modelled)". Now the error names the field to add."""
    import ml_dtypes

    from validation.captures import CaptureError, load_capture

    a = np.ones((2, 3), ml_dtypes.bfloat16)
    path = tmp_path / "bf16.npz"
    np.savez(path, op="mm", A=a, B=np.ones((3, 2), ml_dtypes.bfloat16), out=np.ones((2, 2), ml_dtypes.bfloat16))
    with pytest.raises(CaptureError, match='add the field dtype = "bfloat16"') as err:
        load_capture(path)
    assert "fp8" not in str(err.value)
