"""``fp16emu units --input`` with block-scaled recipes (issue 39.5): mxf4, nvf4, mx<format>."""

from __future__ import annotations

import pytest

import models
from validation.cli import main


def _rows(out: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = out.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("unit "))
    rows = {}
    for line in lines[top + 2 :]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return lines[top].split(), rows


@pytest.mark.parametrize(
    ("recipe", "family", "scale", "block", "subgroup", "cdna4"),
    [
        ("mxf4", "grouped_scaled", "ue8m0", "32", "16", True),
        ("nvfp4", "grouped_scaled", "ue4m3", "16", "16", False),
        ("mxf4nvf4", "grouped_scaled", "ue8m0", "16", "16", False),
        ("mxe4m3", "scaled_fused", "ue8m0", "32", "0", True),
        ("mxe5m2xe2m1", "scaled_fused", "ue8m0", "32", "0", True),
    ],
)
def test_units_input_block_scaled(capsys, recipe, family, scale, block, subgroup, cdna4):
    """The NVIDIA units with each recipe's instruction; the CDNA4 unit (one f8f6f4 instruction,
    E8M0 per 32, issue 39.3) where the recipe has that scale and block."""
    assert main(["units", "--input", recipe]) == 0
    out = capsys.readouterr().out
    head, rows = _rows(out)
    assert set(rows) == {"b200", "rtx-blackwell"} | ({"mi355"} if cdna4 else set())
    for name, r in rows.items():
        got = [r[head.index(h)] for h in ("family", "scale", "block", "subgroup")]
        assert got == ([family, scale, block, subgroup] if name != "mi355" else ["scaled_fused", scale, block, "0"])
    fa, fb, sc, bl, kind = models.scaled_input(recipe)
    assert f"scale={sc!r}, block={bl}, kind={kind!r}" in out.splitlines()[0]
    assert f"kind::{kind}" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["--input", "e2m1"],
            "--input: e2m1 is multiplied by block-scaled units only: ask for a recipe (mxe2m1, mxf4, nvf4)",
        ),
        (["--input", "mxfp12"], "block-scaled: mxf4, mxfp4, nvf4"),
        (["--input", "mxf4", "--units", "h100"], "--units: unit: 'h100' has no block-scaled instructions"),
    ],
)
def test_units_input_block_scaled_errors(capsys, argv, needle):
    assert main(["units", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
