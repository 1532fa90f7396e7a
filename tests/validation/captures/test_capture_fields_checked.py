"""Captures whose fields are hostile or malformed (issue 41, items 5, 10 and 12): the fields that
describe omitted operands (``shapes``, ``spec``, ``range``, ``input_shape``, ``dtype``, ``seed``)
checked for type and structure and sized against the memory limit before anything is drawn;
``groups`` checked as one whole number ≥ 1; an operand with a size-0 dimension refused by name.
Every refusal is one CaptureError line naming the field; ``fp16emu identify`` answers exit 2 with
that line alone."""

import contextlib
import io
import json
import time

import numpy as np
import pytest

from validation.captures import CaptureError, load_capture
from validation.captures.format import generate_operands, operand_digest
from validation.cli import main

SPEC = {"op": "mm", "dtype": "float16", "seed": 3, "range": [-1.0, 1.0], "shapes": {"A": [4, 8], "B": [8, 5]}}


def _omitted(**override) -> dict:
    """A valid mm capture written with omitted operands (what the kit writes), fields overridden."""
    ops = generate_operands(SPEC)
    fields = {
        "op": "mm",
        "dtype": "float16",
        "seed": SPEC["seed"],
        "range": np.asarray(SPEC["range"]),
        "shapes": json.dumps(SPEC["shapes"]),
        "A_sha256": operand_digest(ops["A"]),
        "B_sha256": operand_digest(ops["B"]),
        "out": (ops["A"].astype(np.float32) @ ops["B"].astype(np.float32)).astype(np.float16),
    }
    fields.update(override)
    return {k: v for k, v in fields.items() if v is not None}


def _write(tmp_path, fields, name="cap.npz"):
    path = tmp_path / name
    with open(path, "wb") as fh:
        np.savez(fh, **{k: np.asarray(v) for k, v in fields.items()})
    return path


def _identify_refuses(path):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["identify", str(path)])
    err = err.getvalue()
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.startswith("fp16emu identify: error: ") and "Traceback" not in err, err
    return err


def test_the_valid_omitted_capture_loads(tmp_path):
    cap = load_capture(_write(tmp_path, _omitted()))
    assert cap.operands["A"].shape == (4, 8) and cap.out.shape == (4, 5)


def test_omitted_operands_are_sized_against_the_memory_limit_before_drawing(tmp_path, monkeypatch):
    """A few hundred bytes that ask for 4096 x 4096 operands: refused naming shapes and the limit,
    without drawing (the old loader drew 2 x 128 MiB of float64 before the sha256 refused it)."""
    monkeypatch.setenv("FP16EMU_MAX_MEMORY_GIB", "0.1")
    path = _write(tmp_path, _omitted(shapes=json.dumps({"A": [4096, 4096], "B": [4096, 4096]})))
    t0 = time.perf_counter()
    with pytest.raises(CaptureError, match=r"^shapes: .*over the memory limit"):
        load_capture(path)
    assert time.perf_counter() - t0 < 1.0
    assert "FP16EMU_MAX_MEMORY_GIB" in _identify_refuses(path)


BAD_FIELDS = [
    ({"shapes": "5"}, "shapes"),
    ({"shapes": "null"}, "shapes"),
    ({"shapes": "[[4, 8], [8, 5]]"}, "shapes"),
    ({"shapes": '{"A": [[4], [8]], "B": [8, 5]}'}, "shapes.A"),
    ({"shapes": '{"A": [4, 8.5], "B": [8, 5]}'}, "shapes.A"),
    ({"shapes": '{"A": [4, 0], "B": [0, 5]}'}, "shapes.A"),
    ({"shapes": '{"A": "48", "B": [8, 5]}'}, "shapes.A"),
    ({"shapes": "[" * 100_000 + "]" * 100_000}, "shapes"),
    ({"shapes": '{"A": [4, NaN], "B": [8, 5]}'}, "shapes"),
    ({"shapes": "{not json"}, "shapes"),
    ({"shapes": np.asarray([1, 2])}, "shapes"),
    ({"shapes": None}, "shapes"),
    ({"range": np.float64(1.0)}, "range"),
    ({"range": np.asarray([0.0, np.nan])}, "range"),
    ({"range": np.asarray(["a", "b"])}, "range"),
    ({"dtype": np.asarray(["float16", "float32"])}, "dtype"),
    ({"dtype": np.float64(2.0)}, "dtype"),
    ({"dtype": "float64"}, "dtype"),
    ({"seed": "seven"}, "seed"),
    ({"seed": np.asarray([1, 2])}, "seed"),
    ({"op": np.asarray(["mm", "mm"])}, "op"),
    ({"spec": "[]"}, "spec"),
    ({"spec": "5"}, "spec"),
    ({"spec": "null"}, "spec"),
    ({"spec": '{"op": "mm", "shapes": 5}'}, "shapes"),
    ({"spec": "{" * 100_000}, "spec"),
    ({"spec": np.asarray([1.0])}, "spec"),
]


@pytest.mark.parametrize("override,field", BAD_FIELDS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_FIELDS)])
def test_a_malformed_field_of_an_omitted_capture_is_named(tmp_path, override, field):
    path = _write(tmp_path, _omitted(**override))
    with pytest.raises(CaptureError) as info:
        load_capture(path)
    msg = str(info.value)
    assert msg.startswith(f"{field}: ") and "\n" not in msg and len(msg) < 400, msg
    _identify_refuses(path)


def test_conv_input_shape_as_a_0d_array_is_named(tmp_path):
    spec = {
        "op": "conv2d_bwd_data",
        "dtype": "float16",
        "seed": 1,
        "range": [-1.0, 1.0],
        "shapes": {"grad_output": [1, 2, 3, 3], "weight": [2, 2, 1, 1]},
        "input_shape": [1, 2, 3, 3],
    }
    ops = generate_operands(spec)
    fields = {
        "op": spec["op"],
        "dtype": "float16",
        "seed": 1,
        "range": np.asarray([-1.0, 1.0]),
        "shapes": json.dumps(spec["shapes"]),
        "input_shape": np.int64(4),
        "stride": np.asarray([1, 1]),
        "padding": np.asarray([0, 0]),
        "dilation": np.asarray([1, 1]),
        "grad_output_sha256": operand_digest(ops["grad_output"]),
        "weight_sha256": operand_digest(ops["weight"]),
        "out": np.zeros((1, 2, 3, 3), np.float16),
    }
    path = _write(tmp_path, fields)
    with pytest.raises(CaptureError, match=r"^input_shape: expected 4 whole numbers"):
        load_capture(path)
    _identify_refuses(path)


def _conv(**extra) -> dict:
    fields = {
        "op": "conv2d",
        "input": np.ones((1, 2, 3, 3), np.float16),
        "weight": np.ones((2, 2, 1, 1), np.float16),
        "stride": np.asarray([1, 1]),
        "padding": np.asarray([0, 0]),
        "dilation": np.asarray([1, 1]),
        "out": np.full((1, 2, 3, 3), 2, np.float16),
    }
    fields.update(extra)
    return fields


@pytest.mark.parametrize(
    "groups",
    [
        np.asarray([1, 1]),
        np.asarray([], np.int64),
        np.complex64(1),
        np.float64(1.5),
        np.asarray("a"),
        np.float64(np.nan),
    ],
    ids=["pair", "empty", "complex", "fraction", "text", "nan"],
)
def test_groups_is_one_whole_number(tmp_path, groups):
    """[1, 1], [], complex, 1.5 (was truncated to 1), 'a' and NaN: each refused naming groups."""
    path = _write(tmp_path, _conv(groups=groups))
    with pytest.raises(CaptureError, match=r"^groups: expected a whole number ≥ 1"):
        load_capture(path)
    _identify_refuses(path)


def test_groups_as_a_0d_whole_number_still_reads(tmp_path):
    assert load_capture(_write(tmp_path, _conv(groups=np.int64(1)))).conv.groups == 1


def test_a_k_of_zero_is_refused_by_name(tmp_path):
    """A (2, 0) · B (0, 3): "cannot reshape array of size 0" later; now refused as it is read."""
    path = _write(
        tmp_path,
        {
            "op": "mm",
            "A": np.ones((2, 0), np.float16),
            "B": np.ones((0, 3), np.float16),
            "out": np.zeros((2, 3), np.float16),
        },
    )
    with pytest.raises(CaptureError, match=r"^A: has a dimension of size 0"):
        load_capture(path)
    _identify_refuses(path)


def test_a_capture_past_the_work_limit_is_refused_before_any_gemm(tmp_path, monkeypatch):
    """4 x 8 x 5 = 160 multiply-adds under FP16EMU_MAX_MACS=100: refused naming the limit."""
    monkeypatch.setenv("FP16EMU_MAX_MACS", "100")
    path = _write(tmp_path, _omitted())
    with pytest.raises(CaptureError, match=r"^out: work: the capture \(mm\) needs 160 multiply-adds.*FP16EMU_MAX_MACS"):
        load_capture(path)
    _identify_refuses(path)
    monkeypatch.setenv("FP16EMU_MAX_MACS", "160")
    assert load_capture(path).out.shape == (4, 5)
