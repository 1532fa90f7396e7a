"""Units per instruction (``models.unit(..., instruction=…)``) against silicon, bit for bit.

Data: ``tests/data/nvidia_tc_rows/`` (Khattak & Mikaitis, arXiv 2512.07004;
north-numerical-computing/MATLAB-tensor-core ``model_validation/`` @b12b5a7, subsets: see its
README): fp8 rows of H100, H200, B200, Ada and L40S (K = 32, ``mma.sync.aligned.m16n8k32``; the
H100 and H200 fp32-output rows with ``wgmma`` and a zero C, as the authors' Validate_TC_models.m
says) and tf32 rows of seven GPUs (K = 4). For the fp16-output runs C was rounded to fp16 (RNE)
on the GPU before the instruction, so the tests do the same.

Each GPU is held against the unit its instruction names: fp8 ``mma.sync`` on Hopper and
Blackwell is ``instruction="mma"`` (fp16 steps, emu.steps), Hopper's wgmma and Ada's mma.sync
the default units. The negative controls show the rows tell the units apart.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import emu
import models
from emu.steps import step_order

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia_tc_rows"
FP8 = {"E4M3": ml_dtypes.float8_e4m3fn, "E5M2": ml_dtypes.float8_e5m2}
SHOW = 4

# (GPU, format, output) → (unit name, instruction, C as measured: "file" or "zero")
FP8_CASES = {}
for _fmt in FP8:
    for _gpu in ("H100", "H200"):
        FP8_CASES[(_gpu, _fmt, "fp16")] = ("h100", "mma", "file")
        FP8_CASES[(_gpu, _fmt, "fp32")] = ("h100", "wgmma", "zero")
    FP8_CASES[("B200", _fmt, "fp16")] = ("b200", "mma", "file")
    FP8_CASES[("B200", _fmt, "fp32")] = ("b200", "mma", "file")
    FP8_CASES[("Ada", _fmt, "fp16")] = ("ada", "mma", "file")
    FP8_CASES[("Ada", _fmt, "fp32")] = ("ada", "mma", "file")
    FP8_CASES[("L40S", _fmt, "fp32")] = ("l40s", "mma", "file")
TF32_GPUS = {"A100": "a100", "A2": "a2", "Ada": "ada", "L40S": "l40s", "H100": "h100", "H200": "h200", "B200": "b200"}


def _load(gpu: str, fmt: str) -> dict:
    path = DATA / f"{gpu}_{fmt}.npz"
    if not path.exists():
        pytest.skip(f"measured rows not found: {path}")
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _operands_c(rows: dict, fmt: str, output: str, c_mode: str):
    a = rows["a"].view(FP8[fmt])
    b = rows["b"].view(FP8[fmt])
    c32 = rows["c"].view(np.float32)
    if c_mode == "zero":
        c32 = np.zeros_like(c32)
    return a, b, (c32.astype(np.float16) if output == "fp16" else c32)


def _compare(rows: dict, got: np.ndarray, output: str) -> np.ndarray:
    """Row numbers (in the source files) where ``got`` differs from the measured output."""
    want = rows["d_fp16" if output == "fp16" else "d_fp32"]
    got_bits = np.asarray(got).astype(np.float32).view(np.uint32)  # fp16 widened exactly
    return rows["rows"][got_bits != want]


@pytest.mark.parametrize("case", sorted(FP8_CASES), ids=lambda c: "-".join(c))
def test_fp8_rows_equal_the_instructions_unit(case):
    gpu, fmt, output = case
    name, instruction, c_mode = FP8_CASES[case]
    rows = _load(gpu, fmt)
    unit = models.unit(name, input=fmt.lower(), output=output, instruction=instruction)
    a, b, c = _operands_c(rows, fmt, output, c_mode)
    bad = _compare(rows, emu.dot_add(a, b, c, unit), output)
    assert bad.size == 0, (
        f"{gpu} {fmt} {output} ({name}, {instruction}): {bad.size} of {len(rows['rows'])} rows differ, "
        f"rows {bad[:SHOW].tolist()}"
    )


@pytest.mark.parametrize("gpu,name", sorted(TF32_GPUS.items()))
def test_tf32_rows_equal_every_instruction_of_the_unit(gpu, name):
    rows = _load(gpu, "tf32")
    c = rows["c"].view(np.float32)
    for instruction in models.UNIT_INSTRUCTIONS[models.ALIASES.get(name, name)]:
        unit = models.unit(name, input="tf32", instruction=instruction)
        bad = _compare(rows, emu.dot_add(rows["a"], rows["b"], c, unit), "fp32")
        assert bad.size == 0, f"{gpu} tf32 ({name}, {instruction}): rows {bad[:SHOW].tolist()} differ"


@pytest.mark.parametrize("gpu", ["H100", "B200"])
@pytest.mark.parametrize("output", ["fp16", "fp32"])
def test_the_rows_tell_the_instructions_apart(gpu, output):
    """Negative controls: the other instruction's unit misses some of the mma.sync rows (H100's
    fp32 rows are wgmma's: there the mma unit must miss), and with fp16 output so do the
    emulated steps over consecutive halves (k 0–15, 16–31, either first) instead of the
    pair-interleaved ones. (The fp32 rows do not tell the halves apart: with F = 25 and RZ, all
    10,000 B200 fp32 rows come out the same either way.)"""
    name = gpu.lower()
    other = {"H100": "wgmma", "B200": "tcgen05"}[gpu]
    rows = _load(gpu, "E5M2")
    fmt = "E5M2"
    if (gpu, output) == ("H100", "fp32"):
        a, b, c = _operands_c(rows, fmt, output, "zero")
        mma = models.unit(name, input="e5m2", output=output, instruction="mma")
        assert _compare(rows, emu.dot_add(a, b, c, mma), output).size > 0
        return
    a, b, c = _operands_c(rows, fmt, output, "file")
    wrong = models.unit(name, input="e5m2", output=output, instruction=other)
    assert _compare(rows, emu.dot_add(a, b, c, wrong), output).size > 0
    mma = models.unit(name, input="e5m2", output=output, instruction="mma")
    assert _compare(rows, emu.dot_add(a, b, c, mma), output).size == 0
    order = step_order(32, 16)  # the unit's groups: positions order[:16], then order[16:]
    for halves in (np.arange(32), np.r_[16:32, 0:16]) if output == "fp16" else ():
        # the same steps over consecutive halves (k 0–15 first, or k 16–31 first)
        a2, b2 = np.empty_like(a), np.empty_like(b)
        a2[:, order], b2[:, order] = a[:, halves], b[:, halves]
        assert _compare(rows, emu.dot_add(a2, b2, c, mma), output).size > 0


def test_instruction_argument_and_errors():
    assert models.unit("h100", input="e4m3").step_size == 0  # the default: wgmma, as before
    assert models.unit("h100", input="e4m3", instruction="wgmma") == models.unit("h100", input="e4m3")
    assert models.unit("b200", input="e5m2", instruction="tcgen05") == models.unit("b200", input="e5m2")
    assert models.unit("b200", input="e5m2", instruction="mma.sync").step_size == 32
    for name in ("h100", "b200"):  # fp16, bf16 and tf32: one arithmetic for every instruction
        for fmt in ("fp16", "bf16", "tf32"):
            units = {models.unit(name, input=fmt, instruction=i).params for i in models.UNIT_INSTRUCTIONS[name]}
            assert len(units) == 1
    with pytest.raises(ValueError, match=r"^instruction: ada has no 'wgmma' instruction; its instructions: mma"):
        models.unit("ada", instruction="wgmma")
    with pytest.raises(ValueError, match=r"instruction: mi300 has no 'mma' instruction; its instructions: mfma"):
        models.unit("mi300", instruction="mma")
    with pytest.raises(ValueError, match=r"instruction: 'fma32' is not a matrix unit"):
        models.unit("fma32", instruction="mma")
    with pytest.raises(ValueError, match=r"instruction: b200 \(block-scaled\) has no 'mma'"):
        models.unit("b200", input="e2m1", scale="ue8m0", block=32, instruction="mma")
    unit = models.unit("b200", input=("e4m3", "e5m2"), output="fp16", instruction="mma")
    assert unit.b_input_format == emu.units.InputFormat.E5M2 and "mma.sync" in unit.description
    assert "Khattak" in unit.sources["step_size"] and "0:" in models.unit("a100").sources["step_size"]


def test_gemm_takes_the_steps_as_dot_add_does():
    """emu.gemm (run_kernel's steps) equals emu.dot_add row by row, K = 80 (a padded step)."""
    rng = np.random.default_rng(39)
    unit = models.unit("b200", input="e4m3", instruction="mma")
    A = rng.integers(0, 256, size=(5, 80), dtype=np.uint8)
    A[(A & 0x7F) == 0x7F] = 0x38  # no NaN patterns: the GEMM checks finite results below
    B = rng.integers(0, 256, size=(80, 7), dtype=np.uint8)
    B[(B & 0x7F) == 0x7F] = 0x40
    C = rng.standard_normal((5, 7)).astype(np.float32)
    got = emu.gemm(A.view(ml_dtypes.float8_e4m3fn), B.view(ml_dtypes.float8_e4m3fn), C, unit)
    want = emu.dot_add(A[:, None, :], B.T[None, :, :], C, unit)
    assert np.array_equal(np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32))


def test_step_size_is_checked():
    """check_params: steps for TRUNCATED_FUSED units only, a multiple of the group whose pairs
    deal evenly, fp16 or fp8 operands."""
    from emu.units import check_params

    mma = models.unit("b200", input="e4m3", instruction="mma").params
    assert check_params(mma._replace(step_size=64)) is not None  # two steps' worth: four groups
    with pytest.raises(ValueError, match=r"^unit\.step_size: must be 0 or a multiple"):
        check_params(mma._replace(step_size=24))
    with pytest.raises(ValueError, match=r"^unit\.step_size: must be 0 or a multiple"):
        check_params(mma._replace(step_size=-32))
    with pytest.raises(ValueError, match=r"^unit\.step_size: only a TRUNCATED_FUSED unit"):
        check_params(models.unit("mi100").params._replace(step_size=8))
    with pytest.raises(ValueError, match=r"^unit\.step_size: emulated steps widen fp8 or fp16 operands"):
        check_params(models.unit("h100", input="bf16").params._replace(step_size=32))
