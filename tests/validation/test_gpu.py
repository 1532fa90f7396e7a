"""Bug or rounding from the user's GPU output (validation.run.gpu, run(...).against, run --gpu-output).

The emulated kernel's own output fed back as the "GPU output" must come out identical; the same
output with a realistic fault must come out as differing, with the faulty elements as suspects at
their coordinates and the fault's shape among the clusters; a split-K atomic kernel's other add
orders are inside its ensemble, a value no order gives is not."""

import json

import numpy as np
import pytest

from validation.cli import main
from validation.run import run

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
    assert main([*argv, "--gpu-output", str(bad)]) == 1
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
    code = main(["run", *common, "--gpu-output", str(tmp_path / "bug.npy"), "--format", "json"])
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
