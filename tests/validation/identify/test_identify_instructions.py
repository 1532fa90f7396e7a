"""``identify`` names the instruction when the rows tell it (issue 39.1): fp8 rows measured with
``mma.sync`` on B200 (Khattak & Mikaitis, tests/data/nvidia_tc_rows) are no point of the
searched space, and equal the per-instruction unit, named "b200 mma.sync" (Hopper's mma.sync
is the same arithmetic)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import validation.identify as ident
from validation.identify.search import instruction_matches

DATA = Path(__file__).resolve().parents[2] / "data" / "nvidia_tc_rows"


def _rows(gpu: str, fmt: str, output: str, n: int) -> ident.Rows:
    path = DATA / f"{gpu}_{fmt}.npz"
    if not path.exists():
        pytest.skip(f"measured rows not found: {path}")
    with np.load(path) as z:
        a, b, c, d32 = z["a"][:n], z["b"][:n], z["c"][:n], z["d_fp32"][:n]
        d16 = z["d_fp16"][:n] if "d_fp16" in z.files else None
    if output == "fp16":
        c = c.view(np.float32).astype(np.float16).view(np.uint16)  # C rounded to fp16 on the GPU
        d = d16.view(np.float32).astype(np.float16).view(np.uint16)
    else:
        d = d32
    return ident.Rows(a, b, c, d, source=str(path), input_format=fmt.lower())


@pytest.mark.parametrize("output", ["fp16", "fp32"])
def test_b200_mma_rows_are_named_by_their_instruction(output):
    rows = _rows("B200", "E5M2", output, 160)
    assert instruction_matches(rows) == ["h100 mma.sync", "b200 mma.sync"]
    result = ident.identify(rows, next_count=0)
    if not result.consistent:
        assert result.named == "h100 mma.sync = b200 mma.sync"
        assert result.explained == len(rows)
    assert "b200 mma.sync" in result.named_among
    assert any("b200 mma.sync" in n for n in result.notes)
    assert "b200 mma.sync" in result.format_text()


def test_wgmma_rows_name_no_other_instruction():
    """H100's fp32 fp8 rows are wgmma's (C = 0): no mma.sync unit reproduces them."""
    rows = _rows("H100", "E4M3", "fp32", 160)
    rows = ident.Rows(rows.a, rows.b, np.zeros_like(rows.c), rows.d, input_format="e4m3")
    assert instruction_matches(rows) == []
