"""``fp16emu compare`` on raw binary dumps (issue 14: "--shape for flat dumps"): a file that is
neither .npy nor .npz is read as the tensor's little-endian bytes with ``--dtype`` (the kernel's,
and the validation's unless ``--validation-dtype``) and ``--shape``; a size that does not match
is exit 2 naming the file, the bytes expected and the bytes found."""

import json

import ml_dtypes
import numpy as np
import pytest

from validation.cli import main

SHAPE = (2, 3, 4, 5)


def _arrays():
    rng = np.random.default_rng(3)
    v = rng.uniform(-2, 2, SHAPE).astype(np.float32)
    k = v.astype(np.float16)
    k.reshape(-1)[7] = np.float16(100.0)  # one wrong element, where we put it
    return v, k


def _compare(capsys, *argv):
    code = main(["compare", *map(str, argv), "--format", "json"])
    out, err = capsys.readouterr()
    if code == 2:
        return code, None, err
    doc = json.loads(out)
    return code, {k: v for k, v in doc.items() if k not in ("validation", "kernel")}, err


def test_raw_dumps_give_the_same_answer_as_the_same_arrays_in_npy(tmp_path, capsys):
    v, k = _arrays()
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "k.npy", k)
    v.tofile(tmp_path / "v.f32")
    k.tofile(tmp_path / "k.f16")
    code_npy, npy, _ = _compare(capsys, tmp_path / "v.npy", tmp_path / "k.npy", "--dtype", "fp16")
    shape = ",".join(map(str, SHAPE))
    code_raw, raw, err = _compare(
        capsys,
        tmp_path / "v.f32",
        tmp_path / "k.f16",
        "--dtype",
        "fp16",
        "--validation-dtype",
        "fp32",
        "--shape",
        shape,
    )
    assert code_raw == code_npy == 1, err  # the element put at 100 fails rocmlir's checks
    assert raw == npy and raw["n"] == 120 and raw["max_abs_diff"] > 90
    # flat .npy beside a raw dump, shape given as 2x3x4x5
    np.save(tmp_path / "flat.npy", v.reshape(-1))
    code, mixed, _ = _compare(
        capsys, tmp_path / "flat.npy", tmp_path / "k.f16", "--dtype", "fp16", "--shape", "2x3x4x5"
    )
    assert code == 1 and mixed == npy


def test_both_dumps_in_the_kernel_format_and_bf16(tmp_path, capsys):
    v, _ = _arrays()
    b = v.astype(ml_dtypes.bfloat16)
    b.tofile(tmp_path / "v.bf16")
    b.tofile(tmp_path / "k.bf16")
    code, out, err = _compare(capsys, tmp_path / "v.bf16", tmp_path / "k.bf16", "--dtype", "bf16", "--shape", "120")
    assert code == 0, err
    assert out["max_abs_diff"] == 0 and out["n"] == 120


@pytest.mark.parametrize(
    "v_dtype,k_bytes,needle",
    [
        ("fp32", 2 * 119, r"'KERNEL_FILE' has 238 bytes = 119 fp16 elements; the tensor has 120 \(240 bytes\)"),
        ("fp32", 2 * 121, r"'KERNEL_FILE' has 242 bytes = 121 fp16 elements; the tensor has 120 \(240 bytes\)"),
        ("fp16", 240, r"'VALIDATION_FILE' has 480 bytes = 240 fp16 elements; the tensor has 120 \(240 bytes\)"),
        ("fp32", 3, "'KERNEL_FILE' has 3 bytes, not a whole number of fp16 elements"),
    ],
)
def test_a_raw_dump_of_the_wrong_size_is_exit_2_naming_the_file_and_the_bytes(
    tmp_path, capsys, v_dtype, k_bytes, needle
):
    np.zeros(120, np.float32).tofile(tmp_path / "v.bin")
    (tmp_path / "k.bin").write_bytes(b"\0" * k_bytes)
    code, _, err = _compare(
        capsys,
        tmp_path / "v.bin",
        tmp_path / "k.bin",
        "--dtype",
        "fp16",
        "--validation-dtype",
        v_dtype,
        "--shape",
        "2,60",
    )
    import re

    needle = needle.replace("KERNEL_FILE", re.escape(str(tmp_path / "k.bin")))
    needle = needle.replace("VALIDATION_FILE", re.escape(str(tmp_path / "v.bin")))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert re.search(needle, err), err


def test_a_raw_dump_without_its_format_or_shape_is_exit_2_saying_what_to_give(tmp_path, capsys):
    np.zeros(4, np.float16).tofile(tmp_path / "k.bin")
    np.save(tmp_path / "v.npy", np.zeros(4, np.float32))
    for extra in ([], ["--dtype", "fp16"], ["--shape", "4"]):
        code, _, err = _compare(capsys, tmp_path / "v.npy", tmp_path / "k.bin", *extra)
        assert code == 2 and err.count("\n") == 1, err
        assert f"KERNEL: '{tmp_path / 'k.bin'}' is neither .npy nor .npz" in err and "--dtype fp16 --shape" in err
    code, _, err = _compare(
        capsys, tmp_path / "v.npy", tmp_path / "k.bin", "--validation-dtype", "fp32", "--shape", "4"
    )
    assert code == 2 and "--validation-dtype: give the kernel's --dtype too" in err


def test_a_shape_whose_size_overflows_int64_is_refused_by_size_not_wrapped(tmp_path, capsys):
    np.zeros(4, np.float16).tofile(tmp_path / "k.bin")
    np.zeros(4, np.float16).tofile(tmp_path / "v.bin")
    code, _, err = _compare(
        capsys, tmp_path / "v.bin", tmp_path / "k.bin", "--dtype", "fp16", "--shape", f"{2**40},{2**40}"
    )
    assert code == 2 and f"the tensor has {2**80} ({2**81} bytes)" in err, err


def test_compare_help_documents_raw_dumps(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "raw binary dump" in out and "--validation-dtype" in out and "prod(shape)" in out


def test_a_refused_verifier_is_one_line_without_the_dtype_warning_before_it(tmp_path, capsys):
    """Found by tests/validation/cli/test_fuzz_arrays.py: an fp32 KERNEL holding fp16 values printed the
    --dtype warning, then study-2022's refusal of fp32: two lines on stderr for an exit 2."""
    np.save(tmp_path / "v.npy", np.ones(4, np.float16))
    np.save(tmp_path / "k.npy", np.ones(4, np.float32))
    code = main(["compare", str(tmp_path / "v.npy"), str(tmp_path / "k.npy"), "--verifier", "study-2022"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("fp16emu compare: error:") and "fp32" in err, err
    code = main(["compare", str(tmp_path / "v.npy"), str(tmp_path / "k.npy")])  # accepted: the warning stays
    assert code == 0 and "give --dtype fp16" in capsys.readouterr().err


def test_bf16_npy_arrays_are_compared_in_bf16(tmp_path, capsys):
    """np.save writes an ml_dtypes.bfloat16 array as plain 2-byte voids: compare reads it as bf16
    (.npy and .npz members), judged in bf16 ulps; fp8 arrays (1-byte voids) without their format
    are refused, naming the --dtype values."""
    v, _ = _arrays()
    b = v.astype(ml_dtypes.bfloat16)
    b.reshape(-1)[5] = 1.5
    k = b.copy()
    k.reshape(-1)[5] = 1.5 + 2.0**-7  # one bf16 ulp away
    np.save(tmp_path / "v.npy", b)
    np.savez(tmp_path / "k.npz", out=k)
    code, out, err = _compare(capsys, tmp_path / "v.npy", f"{tmp_path / 'k.npz'}:out")
    assert code in (0, 1), err
    assert out["n"] == 120 and out["max_abs_diff"] == 2.0**-7 and out["epsilon_format"] == "bf16", out
    assert out["max_epsilon_diff"] == 1.0 and out["n_eps1"] == 1, out
    np.save(tmp_path / "k8.npy", v.astype(ml_dtypes.float8_e4m3fn))
    code, _, err = _compare(capsys, tmp_path / "v.npy", tmp_path / "k8.npy")
    assert code == 2 and "give its format with --dtype (e4m3, e5m2, e4m3fnuz, e5m2fnuz)" in err, err


FP8 = [("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2),
       ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz), ("e5m2fnuz", ml_dtypes.float8_e5m2fnuz)]  # fmt: skip


@pytest.mark.parametrize("name, dtype", FP8, ids=[n for n, _ in FP8])
def test_fp8_arrays_are_compared_in_their_own_ulps(tmp_path, capsys, name, dtype):
    """An fp8 kernel output (np.save's 1-byte voids, uint8 bit patterns, a raw dump, an npz member)
    beside an fp32 validation, with --dtype naming the format: judged in that format's ulps, the
    validation rounded into it; a pattern one step away is one ulp, whatever the binade."""
    v, _ = _arrays()
    v = (v * 4).astype(np.float32)
    k = v.astype(dtype)  # the validation rounded to nearest even: what an exact kernel writes
    i = int(np.flatnonzero(np.abs(k.astype(np.float64)) > 1)[0])
    bits = k.view(np.uint8).reshape(-1)
    bits[i] += 1  # one step up in magnitude: one ulp of k's binade (below the largest finite)
    step = abs(float(k.reshape(-1)[i]) - float(v.astype(dtype).reshape(-1)[i]))
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "k.npy", k)
    np.save(tmp_path / "ku.npy", k.view(np.uint8))
    np.savez(tmp_path / "k.npz", out=k)
    k.tofile(tmp_path / "k.raw")
    answers = []
    for spec, extra in (("k.npy", ()), ("ku.npy", ()), ("k.npz:out", ()), ("k.raw", ("--shape", "2,3,4,5"))):
        code, out, err = _compare(capsys, tmp_path / "v.npy", f"{tmp_path}/{spec}", "--dtype", name, *extra)
        assert code == (0 if out["verdict"] == "pass" else 1), err
        answers.append(out)
    out = answers[0]
    assert all(a == out for a in answers)
    assert out["epsilon_format"] == name and out["kernel_dtype"] == name and out["round_validation"] == name
    assert out["n_exact"] == 119 and out["n_eps1"] == 1 and out["max_epsilon_diff"] == 1.0, out
    assert out["max_abs_diff"] == step
    # the default fits the format (issue 38): rocMLIR's relDiff 1e-6 for non-fp16 types failed
    # every one-ulp fp8 difference; now fp16's 100, and the RMS limit scaled by the unit roundoff
    checks = {c["metric"]: c for c in out["checks"]}
    p = {"e4m3": 4, "e5m2": 3, "e4m3fnuz": 4, "e5m2fnuz": 3}[name]
    assert checks["max_rel_diff"]["limit"] == 100.0 and checks["max_rel_diff"]["pass"]
    assert checks["rms"]["limit"] == pytest.approx(3e-5 * 2.0 ** (11 - p), rel=1e-12)
    assert out["verdict"] == ("pass" if checks["rms"]["value"] <= checks["rms"]["limit"] else "fail")
    # the same bytes without their format, and a kernel value that is not an e4m3 value
    code, _, err = _compare(capsys, tmp_path / "v.npy", tmp_path / "k.npy")
    assert code == 2 and "--dtype" in err
    code, _, err = _compare(capsys, tmp_path / "v.npy", tmp_path / "v.npy", "--dtype", name)
    assert code == 2 and f"is not a {name} value" in err, err


def test_fp8_tolerances_of_the_presets():
    """torch.testing has no fp8 entry: default_tolerances gives (0, 0); MIOpenDriver's conv
    tolerance for 1-byte types is fp32's 1.5e-6."""
    from validation.metrics import TORCH_TOLERANCES
    from validation.verify import preset

    assert TORCH_TOLERANCES["e4m3"] == (0.0, 0.0) and TORCH_TOLERANCES["e5m2fnuz"] == (0.0, 0.0)
    assert preset("miopen", "e4m3").checks[0].limit == 1.5e-6
    assert preset("miopen", "fp16").checks[0].limit == 8.2e-3
