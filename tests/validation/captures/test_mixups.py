"""identify reads the user's own mix-ups as mix-ups, and a planted kernel bug as a bug suspect
with its cause (issue 38).

Every case is a real H200 capture (operands drawn again from the capture's seed) changed as a
user might have saved it: the output transposed, a square B transposed, the fp16 or bf16 result
saved as float32, an NHWC output buffer labelled NCHW, the ``gpu`` string of another GPU. Each
must read ``mix-up`` with the right match, exit 1, and never say "bug". A planted bug (one 64×64
output tile missing the products of its last k block) must read ``bug-suspect`` with the tile
and the k block named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from validation.captures import load_capture, read_capture
from validation.captures.cli import identify_capture
from validation.captures.format import complete
from validation.captures.report import ulps_between
from validation.captures.search import search

DATA = Path(__file__).resolve().parents[2] / "data" / "captures"


def _members(name: str) -> dict:
    """A capture's fields with its operands drawn again (written back whole, no sha256)."""
    return dict(complete(dict(np.load(DATA / name))))


def _save(tmp_path, members: dict) -> Path:
    path = tmp_path / "mixed.npz"
    np.savez(path, **members)
    return path


def _check_mixup(path, capsys, match: dict):
    reading = read_capture(path)
    assert reading.reading == "mix-up", reading.text()
    assert reading.matches == [match]
    assert reading.exit_code == 1
    text = reading.report()
    assert "bug" not in text.lower() and "reading: mix-up (exit 1)" in text
    doc = reading.json()
    assert doc["reading"] == "mix-up" and doc["matches"] == [match]
    assert "bug" not in json.dumps(doc).lower()
    assert len(repr(reading)) < 400 and "mix-up" in repr(reading)
    return reading


def test_output_saved_transposed(tmp_path, capsys):
    m = _members("h200_holdout/h_mm_96x2048x96_19.npz")
    m["out"] = np.ascontiguousarray(m["out"].T)
    path = _save(tmp_path, m)
    _check_mixup(path, capsys, {"out": "transposed"})
    # the command says the same: exit 1, the reading in the JSON and in the plot's title
    import matplotlib

    matplotlib.rcParams["svg.fonttype"] = "none"  # the SVG keeps its text
    plot = tmp_path / "plot.svg"
    assert identify_capture(path, fmt="json", plot=str(plot)) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["reading"] == "mix-up" and doc["matches"] == [{"out": "transposed"}]
    svg = plot.read_text()
    assert "MIX-UP" in svg and "bug" not in svg.lower()


def test_square_b_saved_transposed(tmp_path, capsys):
    m = _members("h200_holdout/h_mm_16x256x256_12.npz")
    assert m["B"].shape == (256, 256)
    m["B"] = np.ascontiguousarray(m["B"].T)
    _check_mixup(_save(tmp_path, m), capsys, {"B": "transposed"})


def test_fp16_result_saved_as_fp32(tmp_path, capsys):
    m = _members("h200_holdout/h_mm_16x256x256_12.npz")
    m["out"] = m["out"].astype(np.float32)
    m["out_dtype"] = np.array("float16")  # what the user said; the array is float32 all the same
    _check_mixup(_save(tmp_path, m), capsys, {"out_dtype": "float16"})


def test_bf16_result_saved_as_fp32(tmp_path, capsys):
    cap = load_capture(DATA / "h200_dev/mm_128x2048x128_s190_bf16.npz")
    m = _members("h200_dev/mm_128x2048x128_s190_bf16.npz")
    m["out"] = np.asarray(cap.out, np.float32)
    m["out_dtype"] = np.array("float32")
    _check_mixup(_save(tmp_path, m), capsys, {"out_dtype": "bfloat16"})


def test_channels_last_output_labelled_nchw(tmp_path, capsys):
    m = _members("h200_holdout/h_conv2d_n2c8k8h7r1s1_conti_6.npz")
    n, c, h, w = m["out"].shape
    m["out"] = np.ascontiguousarray(m["out"].transpose(0, 2, 3, 1)).reshape(n, c, h, w)  # the NHWC buffer
    _check_mixup(_save(tmp_path, m), capsys, {"memory_format": "channels_last"})


def test_gpu_string_of_another_gpu(tmp_path, capsys):
    m = _members("h200_holdout/h_mm_16x256x256_12.npz")
    assert any("sm90" in str(k) for k in np.atleast_1d(m["kernels"]))
    m["gpu"] = np.array("NVIDIA A100-SXM4-80GB")
    reading = _check_mixup(_save(tmp_path, m), capsys, {"unit": "h100"})
    assert reading.result.unit == "a100"  # the unit gpu names was searched first


def test_a_scaled_row_is_named_and_rounding_noise_is_not_a_scale():
    """One output row doubled is "m scaled by 2"; the same row off by one fp16 ulp here and there
    (ratios within 1e-3 of 1, what another summation order gives) is no scale at all."""
    from dataclasses import replace

    from validation.captures.mixups import likely_cause

    cap = load_capture(DATA / "h200_holdout/h_mm_16x256x256_12.npz")
    r = search(cap)
    assert r.answer == "identical"
    doubled = cap.out.copy()
    doubled[3] = (doubled[3].astype(np.float32) * 2).astype(np.float16)
    cause = likely_cause(replace(cap, out=doubled), r)
    assert cause["mutant"] == "m scaled" and cause["factor"] == 2.0 and cause["where"]["m"] == [3, 3]
    nudged = cap.out.copy()
    cols = np.arange(0, 256, 16)
    away = np.where(np.arange(cols.size) % 2, np.float16(np.inf), np.float16(-np.inf))
    nudged[3, cols] = np.nextafter(nudged[3, cols], away)
    cause = likely_cause(replace(cap, out=nudged), r)
    assert cause is None or not cause["mutant"].endswith("scaled"), cause


def test_a_tile_missing_its_last_k_block_is_a_bug_suspect(tmp_path, capsys):
    """One 64×64 output tile computed without the products of its last 64 k (planted with the
    capture's own schedule, so only the lost block changes the tile)."""
    import emu
    from validation.captures.gemms import jobs_of, model_unit

    name = "h200_holdout/h_mm_64x500x256_15.npz"
    cap = load_capture(DATA / name)
    r = search(cap)
    assert r.answer == "identical"
    (job,) = jobs_of(cap, r.best.variant, np.arange(0, 64), np.arange(128, 192))
    A = job.A.copy()
    A[:, 436:500] = 0
    tile = emu.gemm(A, job.B, job.C, model_unit(r.best.unit, cap.input), r.best.schedule)
    m = _members(name)
    m["out"] = m["out"].copy()
    m["out"][0:64, 128:192] = np.asarray(tile, np.float16)
    assert (m["out"] != cap.out).sum() > 100
    path = _save(tmp_path, m)
    reading = read_capture(path)
    assert reading.reading == "bug-suspect" and reading.exit_code == 1 and reading.matches == []
    assert reading.cause["mutant"] == "k block lost"
    assert reading.cause["where"] == {"m": [0, 63], "n": [128, 191], "k": [436, 499]}
    text = reading.report()
    assert "BUG SUSPECT" in text and "m 0..63, n 128..191, k 436..499" in text and "k block" in text
    assert "reading: bug-suspect (exit 1)" in text
    doc = reading.json()
    assert doc["reading"] == "bug-suspect" and doc["cause"] == reading.cause
    s = doc["suspects"]
    assert s["sizes"]["max_abs"] > 0 and 0 < s["sizes"]["max_rel"] <= 2
    # the plot boxes the tile and says what is missing there
    import matplotlib

    from validation.captures.plots import plot_capture

    matplotlib.rcParams["svg.fonttype"] = "none"
    plot_capture(reading.capture, reading.result, tmp_path / "bug.svg", reading=reading)
    svg = (tmp_path / "bug.svg").read_text()
    assert "BUG-SUSPECT" in svg and "k block lost: k 436..499" in svg


@pytest.mark.parametrize(
    "a, b, want",
    [
        (np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2)), 1.0),
        (np.float32(-1e-3), np.float32(1e-3), 2 * float(np.float32(1e-3)) / float(np.spacing(np.float32(1e-3)))),
        (np.float16(-1.0), np.float16(1.0), 2048.0),
        (np.float16(0.0), np.float16(-0.0), 0.0),
    ],
)
def test_ulps_count_the_larger_magnitudes_spacing(a, b, want):
    """A sign change is as many ulps as the values' sizes say, never billions; equal bits are 0."""
    got = ulps_between(np.array([a]), np.array([b]))[0]
    assert got == pytest.approx(want, rel=1e-12)


def test_a_non_square_output_saved_transposed_is_named(tmp_path, capsys):
    """The shape tells: the file cannot be used (exit 2), and the message says why."""
    m = _members("h200_holdout/h_mm_16x256x256_12.npz")
    m["out"] = np.ascontiguousarray(m["out"].T)
    assert identify_capture(_save(tmp_path, m)) == 2
    err = capsys.readouterr().err
    assert err.startswith("fp16emu identify: error: out:") and "saved transposed" in err


def _baddbmm_one_sign_flipped():
    """A baddbmm (3 × 32×512 @ 512×24, alpha 0.75, beta −1.25) computed by a planted H100
    schedule, one output's sign flipped; and the search result whose nearest schedule is the
    planted one (every other output identical)."""
    import emu
    import models
    from validation.captures import Capture
    from validation.captures.gemms import Candidate, SearchResult, Variant

    rng = np.random.default_rng(11)
    A, B, C = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((3, 32, 512), (3, 512, 24), (1, 32, 24)))
    planted = emu.Schedule(
        k_tile=64, splits=3, split_rule="ceil", c_entry="epilogue", alpha=0.75, beta=-1.25, output="fp16"
    )
    unit = models.unit("h100")
    want = np.stack([emu.gemm(A[i], B[i], C[0].astype(np.float32), unit, planted) for i in range(3)])
    want = want.astype(np.float16)
    out = want.copy()
    out.view(np.uint16)[1, 5, 7] ^= 0x8000
    ops = {"A": A.view(np.uint16), "B": B.view(np.uint16), "C": C.view(np.uint16)}
    cap = Capture("sign", "baddbmm", ops, out, gpu="NVIDIA H200", alpha=0.75, beta=-1.25)
    best = Candidate("h100", Variant(), planted)
    result = SearchResult("differs", out.size, out.size - 1, best, [], want, 0, 0.0, unit="h100")
    return cap, result


def test_one_wrong_output_runs_no_full_search_per_unit(monkeypatch, tmp_path):
    """A capture one output of which differs from its nearest schedule: every other unit rounds
    the search's first sample alike, so that sample alone lets each through to a full search
    (tens of seconds each); screened on the wrong output too, none is, and the reading is the
    bug, the flipped sign bit named."""
    from validation.captures import mixups
    from validation.captures.report import reading_of

    cap, result = _baddbmm_one_sign_flipped()
    searched = []

    def counted(capture, hw=None, progress=None):
        searched.append(hw)
        return result

    monkeypatch.setattr(mixups, "search", counted)
    units = [m for m in mixups.transforms(cap, "h100") if m.field == "unit"]
    assert len(units) >= 7
    with monkeypatch.context() as one:  # one unit, screened with and without the wrong output
        one.setattr(mixups, "transforms", lambda *a, **k: units[:1])
        assert mixups.find_mixup(cap, "h100") == (None, 1) and searched == [units[0].hw]
        searched.clear()
        assert mixups.find_mixup(cap, "h100", result=result) == (None, 1) and searched == []
    reading = reading_of(cap, result)
    assert searched == [] and reading.screened == len(mixups.transforms(cap, "h100"))
    assert reading.reading == "bug-suspect" and reading.matches == []
    assert reading.cause == {"mutant": "bits flipped", "where": {"batch": 1, "m": 5, "n": 7}, "bits": [15]}
    # the plot boxes the one element (batch 1 is stacked under batch 0) and names the cause
    import matplotlib

    from validation.captures.plots import plot_capture

    matplotlib.rcParams["svg.fonttype"] = "none"
    plot_capture(reading.capture, reading.result, tmp_path / "bug.svg", reading=reading)
    svg = (tmp_path / "bug.svg").read_text()
    assert "BUG-SUSPECT" in svg and "bits flipped" in svg


def test_wrong_outputs_move_with_the_transform():
    """The outputs a schedule got wrong, where a transform puts them: a transposed output swaps
    the last two axes, an NHWC buffer read in (N, C, H, W) order moves each element by the
    reshape; each checked against the transform applied to the output itself."""
    from validation.captures import mixups
    from validation.captures.gemms import Variant, search_unit_params
    from validation.captures.samples import Sample, output_positions

    cap = load_capture(DATA / "h200_holdout/h_mm_96x2048x96_19.npz")
    wrong = np.array([5 * 96 + 17, 95 * 96 + 0])
    (tr,) = [t for t in mixups.transforms(cap, "h100") if t.match() == {"out": "transposed"}]
    assert tr.outputs_at(wrong, cap.out.shape).tolist() == [0 * 96 + 95, 17 * 96 + 5]
    conv = load_capture(DATA / "h200_holdout/h_conv2d_n2c8k8h7r1s1_conti_6.npz")
    (nhwc,) = [t for t in mixups.transforms(conv, "h100") if t.field == "memory_format"]
    flat = conv.out.reshape(-1)
    for i in (0, 9, 200, flat.size - 1):
        (j,) = nhwc.outputs_at(np.array([i]), conv.out.shape)
        assert nhwc.capture.out.reshape(-1)[j].view(np.uint16) == flat[i].view(np.uint16)
    # the sample of explicit outputs holds them at their GEMM positions, the GPU's values with them
    picked = [3, 77, 391]
    s = Sample.of_outputs(conv, picked)
    assert s.size == 3 and (output_positions(conv, picked)[0] >= 0).all()
    held = np.concatenate([job[3] for job in s.jobs(Variant(), search_unit_params("h100", conv.input))])
    assert sorted(held.view(np.uint16).tolist()) == sorted(flat[picked].view(np.uint16).tolist())
