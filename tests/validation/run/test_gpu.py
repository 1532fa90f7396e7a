"""Bug or rounding from the user's GPU output (validation.run.gpu, run(...).against, run --gpu-output).

The emulated kernel's own output fed back as the "GPU output" must come out identical; the same
output with a realistic fault must come out as differing, with the faulty elements as suspects at
their coordinates and the fault's shape among the clusters; a split-K atomic kernel's other add
orders are inside its ensemble, a value no order gives is not."""

import json

import numpy as np
import pytest

from validation.cli import main
from validation.run import describe_differences, run, search_matches

FWD = "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16"  # output nhwk: 64 x 5 x 5 x 64
SPLIT_K = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_4"  # 64 partial sums per weight


@pytest.fixture(scope="module")
def fwd():
    return run(FWD, hw="mi200", kernel="xdlops", validator="cpu", rand_type="float", seed=1, progress=False)


def test_the_emulated_output_fed_back_is_identical(fwd):
    got = fwd.against(fwd.kernel_output.reshape(fwd.shape))
    assert got.answer == "identical" and got.n_identical == got.n == fwd.kernel_output.size
    assert got.suspects == [] and got.n_outside_ensemble == 0
    # the fp32 copy of an fp16 output and the raw fp16 patterns are the same output
    assert fwd.against(fwd.kernel_output.astype(np.float32)).answer == "identical"
    assert fwd.against(fwd.kernel_output.view(np.uint16)).answer == "identical"
    assert "(rounding), not a bug" in got.format_text()


def test_one_channel_with_its_sign_flipped_is_found_at_that_channel(fwd):
    out = fwd.kernel_output.reshape(fwd.shape).copy()  # (n, h, w, k)
    out[..., 3] = -out[..., 3]
    got = fwd.against(out)
    flipped = int(np.count_nonzero(fwd.kernel_output.reshape(fwd.shape)[..., 3]))
    assert got.answer == "differs" and got.n_differ == flipped
    assert all(s["coords"]["k"] == 3 for s in got.suspects) and got.suspects
    assert any("k = 3" in c for c in got.clusters)
    s = got.suspects[0]
    assert s["gpu"] == -s["emulated"] and set(s["coords"]) == {"n", "h", "w", "g", "k"}


def test_a_padding_border_row_is_reported_as_a_border(fwd):
    out = fwd.kernel_output.reshape(fwd.shape).copy()
    out[:, 0, :, :] = np.float16(0)  # the first output row lost
    got = fwd.against(out)
    assert got.answer == "differs"
    assert all(s["coords"]["h"] == 0 for s in got.suspects)
    assert any(c.startswith("all") and "h = 0" in c for c in got.clusters)


def test_bad_gpu_outputs_are_refused_with_the_reason(fwd):
    with pytest.raises(ValueError, match="gpu output: .* elements"):
        fwd.against(fwd.kernel_output[:-1])
    bad = fwd.kernel_output.astype(np.float32)
    bad[5] = np.float32(1.0) + np.float32(2.0**-20)
    with pytest.raises(ValueError, match="element 5 .* not an fp16 value"):
        fwd.against(bad)
    with pytest.raises(ValueError, match="dtype int32"):
        fwd.against(fwd.kernel_output.astype(np.int32))


def test_split_k_atomics_other_orders_are_inside_and_a_foreign_value_is_not():
    r = run(SPLIT_K, hw="mi200", kernel="xdlops", validator="cpu", rand_type="float", seed=1, progress=False)
    other = next(m for m in r.members(8) if not np.array_equal(m.view(np.uint16), r.kernel_output.view(np.uint16)))
    got = r.against(other)
    assert got.answer == "inside-ensemble" and got.n_differ > 0 and got.n_outside_ensemble == 0
    assert got.ensemble_orders >= 128
    broken = other.copy()
    broken[17] = np.float16(1000.0)  # no add order of 64 partials in [-1, 1]·[-1, 1] sums reaches it
    got = r.against(broken)
    assert got.answer == "differs" and got.n_outside_ensemble == 1
    assert got.suspects[0]["gpu"] == 1000.0 and set(got.suspects[0]["coords"]) == {"g", "k", "c", "y", "x"}


def test_cli_gpu_output_answers_in_text_and_json(fwd, tmp_path, capsys):
    good = tmp_path / "gpu.npy"
    np.save(good, fwd.kernel_output.reshape(fwd.shape))
    argv = ["run", FWD, "--hw", "mi200", "--kernel", "xdlops", "--rand-type", "float", "--seed", "1", "--no-progress"]
    assert main([*argv, "--gpu-output", str(good), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu"]["answer"] == "identical" and doc["gpu"]["n_identical"] == doc["n"]
    out = fwd.kernel_output.reshape(fwd.shape).copy()
    out[..., 7] = np.float16(0.5)
    bad = tmp_path / "bad.npy"
    np.save(bad, out)
    assert main([*argv, "--gpu-output", str(bad), "--search-budget", "0"]) == 1
    text = capsys.readouterr().out
    assert "bug suspects" in text and "k = 7" in text
    assert main([*argv, "--gpu-output", str(tmp_path / "missing.npy")]) == 2
    assert "--gpu-output: no such file" in capsys.readouterr().err


def test_the_verdict_is_about_the_gpu_array_not_the_emulation(tmp_path, capsys):
    """Issue 30.1: a GPU output with a tile's values scaled fails by the verifier (the emulation
    would pass or fail on its own); verdict, metrics and answer agree, and exit is 1."""
    import json

    from validation.cli import main

    test = "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16"
    common = [test, "--hw", "mi200", "--kernel", "xdlops", "--rand-type", "float", "--rand-min", "-1"]
    common += ["--rand-max", "1", "--seed", "1", "--no-progress", "--verifier", "rocmlir"]
    assert main(["run", *common, "--save", str(tmp_path / "s")]) in (0, 1)
    capsys.readouterr()
    kernel = np.load(tmp_path / "s" / "kernel.npy")
    # the emulation's own output: identical, and the verdict is the emulation's
    assert main(["run", *common, "--gpu-output", str(tmp_path / "s" / "kernel.npy"), "--format", "json"]) in (0, 1)
    same = json.loads(capsys.readouterr().out)
    assert same["gpu"]["answer"] == "identical" and same["verdict"] == same["emulated_kernel"]["verdict"]
    bug = kernel.copy()
    bug.reshape(-1)[:4000] *= np.float16(1.5)
    np.save(tmp_path / "bug.npy", bug)
    code = main(["run", *common, "--gpu-output", str(tmp_path / "bug.npy"), "--format", "json", "--search-budget", "0"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["verdict"] == "fail" and doc["gpu"]["answer"] == "differs"
    assert doc["max_rel_diff"] > same["max_rel_diff"]


def test_save_never_writes_through_a_link_and_checks_the_folder_first(tmp_path, capsys):
    """Issue 31: run --save replaces a link in the folder instead of writing through it, and a
    folder that is a file (or the empty path) is exit 2 before any computation."""
    from validation.cli import main

    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    folder = tmp_path / "save"
    folder.mkdir()
    (folder / "x.npy").symlink_to(outside)
    args = ["run", "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16", "--hw", "mi200", "--no-progress"]
    assert main([*args, "--save", str(folder)]) in (0, 1)
    assert outside.read_text() == "keep me"
    assert not (folder / "x.npy").is_symlink() and np.load(folder / "x.npy").size
    import json

    shapes = json.loads((folder / "run.json").read_text())["shapes"]
    assert set(shapes) == {"x", "w", "y"}  # a forward run's output is y, not dy (issue 30.9)
    capsys.readouterr()
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for bad, needle in ((str(a_file), "not a folder"), (str(a_file / "sub"), "not a folder"), ("", "empty path")):
        assert main([*args, "--save", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--save" in err and needle in err, err


# --- issue 30.2: what a differing array matches, and the differences' character -------------------

ARGS = ["--hw", "mi200", "--kernel", "xdlops", "--rand-type", "float", "--seed", "1", "--no-progress"]


@pytest.fixture(scope="module")
def mi100():
    return run(FWD, hw="mi100", kernel="xdlops", validator="cpu", rand_type="float", seed=1, progress=False)


def _bit_differences(a, b) -> int:
    return int(np.count_nonzero(np.asarray(a).view(np.uint16).reshape(-1) != np.asarray(b).view(np.uint16).reshape(-1)))


def test_another_gpus_output_is_named_with_the_command_that_reproduces_it(fwd, mi100):
    options = {"config": FWD, "hw": "mi200", "kernel": "xdlops", "seed": 1, "rand_type": "float"}
    got = search_matches(fwd, mi100.kernel_output, stages=("model",), command=options)
    assert got.matches == [{"hw": "mi100"}] and got.stopped == "match"
    tried = [t["option"] for t in got.tried]
    assert {"hw": "mi300"} in tried and {"kernel": "nonxdlops"} in tried
    assert got.commands == [f"fp16emu run {FWD} --hw mi100 --kernel xdlops --seed 1 --rand-type float"]
    text = got.format_text()
    assert "MATCH --hw mi100" in text and got.commands[0] in text and f"tried {len(got.tried)} options" in text


def test_without_a_match_another_units_rounding_reads_as_scattered_and_small(fwd, mi100):
    d = describe_differences(fwd, mi100.kernel_output)
    n = _bit_differences(fwd.kernel_output, mi100.kernel_output)
    assert 0 < n < fwd.kernel_output.size // 100 and d["n_differ"] == n
    assert sum(d["ulps"].values()) == n and d["ulps"]["1"] > n // 2 and d["ulps"]["non-finite"] == 0
    assert d["reading"] == "scattered small" and d["clustered_on"] == []
    got = search_matches(fwd, mi100.kernel_output, stages=("layout",))
    assert got.matches == [] and "different arithmetic" in got.format_text()


def test_a_forgotten_seed_is_found_nearby_and_the_clock_seed_is_never_tried(fwd):
    other = run(FWD, hw="mi200", kernel="xdlops", validator="cpu", rand_type="float", seed=3, progress=False)
    got = search_matches(fwd, other.kernel_output, stages=("inputs",))
    assert got.matches == [{"seed": 3}]
    assert [t["option"] for t in got.tried] == [{"seed": 2}, {"seed": 3}]  # seed 1 - 1 = 0 is srand(time(0))
    assert got.differences["reading"] == "most differ"
    assert "points at the inputs (seed, range), the layout" in got.format_text()


def test_a_wrong_channel_is_clustered_and_the_search_is_bounded(fwd):
    out = fwd.kernel_output.reshape(fwd.shape).copy()
    out[..., 5] = -out[..., 5]
    got = search_matches(fwd, out, stages=("layout", "array"), max_candidates=5)
    assert got.stopped == "candidates" and len(got.tried) == 5 and got.matches == []
    d = got.differences
    assert d["n_differ"] == _bit_differences(out, fwd.kernel_output) and d["reading"] == "clustered or large"
    assert d["clustered_on"] == ["k"] and d["spread"]["k"]["hit"] == 1
    text = got.format_text()
    assert "tried 5 options" in text and "clustered on k" in text and "bug suspect" in text
    nothing = search_matches(fwd, out, budget_s=0)
    assert nothing.stopped == "budget" and nothing.tried == []


def test_cli_names_a_raw_dumps_layout_and_its_command_gives_the_array_bit_for_bit(fwd, tmp_path, capsys):
    import shlex

    dump = tmp_path / "nkhw.f16"
    fwd.kernel_output.reshape(64, 5, 5, 64).transpose(0, 3, 1, 2).astype("<f2").tofile(dump)
    argv = ["run", FWD, *ARGS, "--gpu-output", str(dump), "--gpu-output-format", "fp16"]
    assert main([*argv, "--format", "json"]) == 1
    gpu = json.loads(capsys.readouterr().out)["gpu"]
    assert gpu["answer"] == "differs" and gpu["matches"] == [{"layout": "nkhw"}]
    search = gpu["search"]
    assert search["tried"] == len(search["options_tried"]) >= 1 and search["stopped"] == "match"
    assert search["differences"]["reading"] == "most differ"
    (command,) = search["commands"]
    assert command.startswith("fp16emu run ") and "--layout nkhw" in command
    assert main([*shlex.split(command)[1:], "--format", "json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"]["answer"] == "identical"


def test_a_raw_dump_read_in_the_wrong_element_format_is_told_the_right_one(tmp_path, capsys):
    dump = tmp_path / "out.f32"
    np.zeros(64 * 5 * 5 * 64, "<f4").tofile(dump)
    assert main(["run", FWD, "--gpu-output", str(dump), "--gpu-output-format", "fp16"]) == 2
    assert "read as fp32 it holds exactly the tensor's 102400 elements" in capsys.readouterr().err


def test_ulps_are_counted_at_the_larger_magnitude(fwd):
    """Issue 38.3: ulps are counted in the larger magnitude's spacing (as identify counts them):
    an element x read back as −4x is 5|x| apart, 5|x| / ulp(4|x|) = 5|x| / (4 ulp(|x|)) ulps
    (counted at x, as before, it was four times that)."""
    gpu = np.array(fwd.kernel_output, copy=True).reshape(-1)
    i = int(np.flatnonzero(np.abs(gpu.astype(np.float64)) >= 0.5)[0])
    x = float(gpu[i])
    gpu[i] = np.float16(-4 * x)
    d = describe_differences(fwd, gpu.reshape(np.shape(fwd.kernel_output)))
    spacing = 2.0 ** (np.floor(np.log2(abs(x))) - 10)  # fp16: 10 fraction bits
    assert d["n_differ"] == 1 and d["max_ulps"] == 5 * abs(x) / (4 * spacing)
