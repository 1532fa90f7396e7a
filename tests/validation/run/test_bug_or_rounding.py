"""The bug-or-rounding matrix (issue 14): the emulated kernel's output saved by ``run --save`` and fed
back as ``--gpu-output`` is "identical"; the same output with a realistic fault (one padding-border
row wrong, one K block dropped in a tile, one channel's sign flipped, one split-K partial lost) is
"differs", with the faulty elements at their named coordinates and the fault's shape among the
clusters; a split-K output from another atomic add order is "inside-ensemble".

The faults are made from the emulation itself (a different input, a partial sum left out), never
from the code under test's answer: the expected coordinates are where the fault was put."""

import json

import numpy as np
import pytest

from validation.cli import main
from validation.run import run

PAD = "padding_kernel_all_fwd_CHECK_RESNET50_CONFIG4_f16"  # fwd, pad 3, stride 2: output nhwgk 20x16x16x1x6
SPLIT = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_4"  # bwd_weight, 64 split-K partials per weight (fp32 atomics)
ARGS = ["--rand-type", "float", "--seed", "1", "--no-progress"]


@pytest.fixture(scope="module")
def pad():
    return run(PAD, rand_type="float", seed=1, progress=False)


@pytest.fixture(scope="module")
def split():
    return run(SPLIT, rand_type="float", seed=1, progress=False)


def _json(capsys, argv):
    code = main(argv + ["--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_saved_emulated_output_fed_back_is_identical(pad, tmp_path, capsys):
    code = main(["run", PAD, *ARGS, "--save", str(tmp_path)])
    capsys.readouterr()
    assert code in (0, 1)
    saved = np.load(tmp_path / "kernel.npy")
    assert saved.shape == pad.shape and saved.dtype == np.float16
    code, doc, _ = _json(capsys, ["run", PAD, *ARGS, "--gpu-output", str(tmp_path / "kernel.npy")])
    g = doc["gpu"]
    assert g["answer"] == "identical" and g["n_identical"] == g["n"] == 30720 and g["n_differ"] == 0
    assert g["n_outside_ensemble"] == 0 and g["suspects"] == [] and g["clusters"] == []
    # the same output as a raw fp16 dump, and as a raw fp32 dump in another layout (nkhw)
    saved.tofile(tmp_path / "dump.f16")
    code, doc, _ = _json(
        capsys, ["run", PAD, *ARGS, "--gpu-output", str(tmp_path / "dump.f16"), "--gpu-output-format", "fp16"]
    )
    assert doc["gpu"]["answer"] == "identical"
    nkhw = saved.reshape(20, 16, 16, 6).transpose(0, 3, 1, 2).astype(np.float32)
    nkhw.tofile(tmp_path / "dump.f32")
    argv = ["run", PAD, *ARGS, "--gpu-output", str(tmp_path / "dump.f32"), "--gpu-output-format", "fp32"]
    code, doc, _ = _json(capsys, argv + ["--layout", "nkhw"])
    assert doc["gpu"]["answer"] == "identical" and doc["gpu"]["layout"] == "nkhw"
    assert doc["reading"] == "rounding" and code == 0
    # read in the config's own layout instead, the same bytes are a different tensor: not identical
    code, doc, _ = _json(capsys, argv)
    assert code == 1 and doc["gpu"]["answer"] == "differs"
    # issue 30.2: the search names the axis order the dump was written in
    assert doc["gpu"]["matches"] == [{"layout": "nkhw"}]
    # issue 36.2: a reproducing match makes the reading a mix-up, not a bug suspect
    assert doc["reading"] == "mix-up"


def test_one_padding_border_row_wrong(pad, tmp_path, capsys):
    out = pad.kernel_array.copy()  # (n, h, w, g, k)
    out[:, 0] = np.nextafter(out[:, 0], np.float16(np.inf))  # the first output row (top padding) off by 1 ulp
    got = pad.against(out)
    assert got.answer == "differs" and got.n_differ == 20 * 16 * 6
    assert all(s["coords"]["h"] == 0 for s in got.suspects)
    assert any("h = 0 (of 0..15)" in c for c in got.clusters)
    np.save(tmp_path / "row.npy", out)
    code, doc, _ = _json(capsys, ["run", PAD, *ARGS, "--gpu-output", str(tmp_path / "row.npy"), "--search-budget", "0"])
    assert code == 1 and doc["gpu"]["answer"] == "differs"
    # issue 30.2: 1 ulp each, but all on one row: clustered, a bug suspect, not other arithmetic
    d = doc["gpu"]["search"]["differences"]
    assert d["ulps"]["1"] == 20 * 16 * 6 and d["clustered_on"] == ["h"] and d["reading"] == "clustered or large"
    assert doc["gpu"]["matches"] == [] and doc["gpu"]["search"]["tried"] == 0
    s = doc["gpu"]["suspects"][0]
    assert set(s["coords"]) == {"n", "g", "k", "h", "w"} and s["coords"]["h"] == 0
    assert s["gpu"] == float(out[tuple(s["coords"][a] for a in "nhwgk")])


def test_one_k_block_dropped_in_one_tile(pad):
    # the filter tap row y = 0 (a contiguous block of gemmK: 7 x 3 of the 147 y, x, c terms) left out,
    # in the outputs of one tile only
    w = pad.inputs["filter"].reshape(pad.problem.tensor_shape("filter")).copy()  # gkyxc
    w[:, :, 0] = 0
    dropped = run(PAD, rand_type="float", seed=1, progress=False, inputs={"x": pad.inputs["input"], "w": w})
    out = pad.kernel_array.copy()
    block = (slice(2, 6), slice(4, 12), slice(8, 16))  # n 2..5, h 4..11, w 8..15, every k
    out[block] = dropped.kernel_array[block]
    got = pad.against(out)
    assert got.answer == "differs" and got.n_differ > 0.9 * 4 * 8 * 8 * 6
    for s in got.suspects:
        c = s["coords"]
        assert 2 <= c["n"] <= 5 and 4 <= c["h"] <= 11 and 8 <= c["w"] <= 15
    assert any("inside the block" in c and "n = 2..5" in c and "h = 4..11" in c for c in got.clusters), got.clusters


def test_one_channel_sign_flipped(pad):
    out = pad.kernel_array.copy()
    out[..., 3] = -out[..., 3]
    got = pad.against(out)
    assert got.answer == "differs" and got.n_differ == int(np.count_nonzero(pad.kernel_array[..., 3]))
    assert got.suspects and all(s["coords"]["k"] == 3 and s["gpu"] == -s["emulated"] for s in got.suspects)
    assert any("k = 3 (of 0..5)" in c for c in got.clusters)


def test_split_k_other_atomic_order_is_inside_and_a_lost_partial_is_outside(split, tmp_path, capsys):
    base = split.kernel_output.view(np.uint16)
    other = next(m for m in split.members(16) if not np.array_equal(m.view(np.uint16), base))
    got = split.against(other)
    assert got.answer == "inside-ensemble" and got.n_differ > 0 and got.n_outside_ensemble == 0
    np.save(tmp_path / "other.npy", other.reshape(split.shape))
    code, doc, _ = _json(capsys, ["run", SPLIT, *ARGS, "--members", "4", "--gpu-output", str(tmp_path / "other.npy")])
    assert doc["gpu"]["answer"] == "inside-ensemble" and doc["gpu"]["ensemble_orders"] > 0
    assert doc["ensemble"]["n_split"] == 64 and "atomics" in doc

    # one workgroup's partial sum (split 1) lost for the outputs of tile 0: k 0..15, c 0..15
    parts, tiles = split.ensemble.parts, split.ensemble.tiles
    lost = np.zeros(split.ensemble.size, np.float32)
    for s, p in enumerate(parts):
        if s != 1:
            lost = lost + p
    sel = tiles == tiles[0]
    faulty = other.copy()
    faulty[sel] = lost[sel].astype(np.float16)
    got = split.against(faulty)
    assert got.answer == "differs" and got.n_outside_ensemble > 0.9 * sel.sum()
    for s in got.suspects:
        assert s["coords"]["k"] < 16 and s["coords"]["c"] < 16
    assert any("inside the block k = 0..15, c = 0..15" in c for c in got.clusters), got.clusters
    assert "no outcome of the" in got.format_text()


def test_run_returns_the_reading_verdict_and_exit_code_the_cli_prints(pad, tmp_path, capsys):
    """Issue 36.2: the decision is the library's (validation.run.judge); ``run(..., gpu_output=…)``
    carries the reading, the verdict and the exit code that ``fp16emu run --gpu-output`` prints."""
    row = pad.kernel_array.copy()
    row[:, 0] = np.nextafter(row[:, 0], np.float16(np.inf))  # one output row off by 1 ulp: no option reproduces it
    np.save(tmp_path / "same.npy", pad.kernel_array)
    np.save(tmp_path / "row.npy", row)
    for name, reading in (("same.npy", "rounding"), ("row.npy", "bug-suspect")):
        argv = ["run", PAD, *ARGS, "--gpu-output", str(tmp_path / name), "--search-budget", "0"]
        code, doc, _ = _json(capsys, argv)
        result = run(PAD, rand_type="float", seed=1, progress=False, gpu_output=tmp_path / name, search_budget=0)
        judged = result.judgement
        assert doc["reading"] == judged.reading == result.reading == reading
        assert doc["verdict"] == judged.to_dict()["verdict"] and doc["gpu"]["answer"] == judged.gpu.answer
        assert code == judged.exit_code == (0 if reading == "rounding" and judged.passed else 1)
        assert main(argv) == code
        text = capsys.readouterr().out
        assert ("BUG SUSPECT" in text) == (reading == "bug-suspect"), text
    # without a GPU output: no reading, the harness verifier's verdict, as the CLI's JSON says
    code, doc, _ = _json(capsys, ["run", PAD, *ARGS])
    assert doc["reading"] is None and pad.reading is None
    assert doc["verdict"] == pad.judgement.to_dict()["verdict"] and code == pad.judgement.exit_code
