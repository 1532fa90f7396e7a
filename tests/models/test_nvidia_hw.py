"""The NVIDIA units against measured tensor-core outputs: every row, bit for bit.

Data: ``../shared/reference/nvidia_tensor_core_hw/<GPU>/fp16/`` (Khattak & Mikaitis,
north-numerical-computing/MATLAB-tensor-core ``model_validation/`` @b12b5a7), 5000 rows per GPU of
``d = c + Σ_k a_k·b_k`` with K = the GPU's fused block (4 on V100, 8 on A100/A2/Ada/L40S, 16 on
H100/H200/B200), taken with CUDA wmma. For the fp16-output runs the authors rounded C to fp16
(RNE) on the GPU side before the operation, so the test does the same.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_data as ref  # noqa: E402  (registered by conftest.py)

import emu
import models

SHOW = 5  # mismatching rows printed on failure


def _mismatch_report(rows: ref.TensorCoreRows, c_bits, expected, got, output: str) -> str:
    bad = np.flatnonzero(expected != got)
    hx = ref.hex16 if output == "fp16" else ref.hex32
    lines = [f"{rows.gpu} fp16 inputs, {output} output: {bad.size} of {len(rows)} rows differ"]
    for i in bad[:SHOW]:
        a = " ".join(ref.hex16(x) for x in rows.a[i])
        b = " ".join(ref.hex16(x) for x in rows.b[i])
        lines.append(
            f"  row {i}: a=[{a}] b=[{b}] c={hx(c_bits[i])} expected={ref.hex32(expected[i])} got={ref.hex32(got[i])}"
        )
    return "\n".join(lines)


@pytest.mark.parametrize("output", ["fp32", "fp16"])
@pytest.mark.parametrize("gpu", ref.NVIDIA_HW_GPUS)
def test_unit_reproduces_measured_rows(gpu: str, output: str):
    rows = ref.load_nvidia_hw(gpu, "fp16")
    unit = models.unit(ref.NVIDIA_HW_UNIT[gpu], output=output)
    a = rows.a.view(np.float16)
    b = rows.b.view(np.float16)
    c32 = rows.c.view(np.float32)
    if output == "fp16":
        c = c32.astype(np.float16)  # RNE, as the GPU side did
        c_bits = c.view(np.uint16)
        expected = rows.d_fp16
        assert expected is not None, f"{gpu}: no d_{gpu}_fp16.txt"
    else:
        c = c32
        c_bits = rows.c
        expected = rows.d_fp32

    d = np.asarray(emu.dot_add(a, b, c, unit))

    assert d.shape == (len(rows),)
    assert d.dtype == (np.float16 if output == "fp16" else np.float32)
    got = ref.f32_bits(d)  # an fp16 result is widened exactly, as the data file stores it
    mismatches = int(np.count_nonzero(got != expected))
    assert mismatches == 0, _mismatch_report(rows, c_bits, expected, got, output)


@pytest.mark.parametrize("gpu", ref.NVIDIA_HW_GPUS)
def test_reference_rows_load(gpu: str):
    """The loader's own checks: shapes, K per GPU, every input an fp16 value, fp16 outputs fp16."""
    rows = ref.load_nvidia_hw(gpu, "fp16")
    assert len(rows) == 5000
    assert rows.k == {"v100": 4, "a100": 8, "ada": 8, "h100": 16, "b200": 16}[ref.NVIDIA_HW_UNIT[gpu]]
    assert rows.a.dtype == rows.b.dtype == np.uint16
    assert rows.c.dtype == rows.d_fp32.dtype == rows.d_fp16.dtype == np.uint32
    # the unit's fused block is the file's K, so each row is one hardware step
    assert models.unit(ref.NVIDIA_HW_UNIT[gpu]).group_size == rows.k
