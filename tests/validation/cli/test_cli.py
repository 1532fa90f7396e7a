"""The fp16emu command: exit codes 0 / 1 / 2, one-line errors, stable JSON keys."""

import json
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validation.cli import main
from validation.configs import ConfigError, ConfigWarning, parse_config

SMALL = (
    "--operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 "
    "-in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 --rand_type float"
)
STABLE = [
    "n",
    "n_exact",
    "n_eps1",
    "n_eps_ge2",
    "n_eps_other",
    "max_epsilon_diff",
    "max_abs_diff",
    "ave_abs_diff",
    "max_rel_diff",
    "max_rel_diff_old",
    "ave_rel_diff",
    "rms",
    "diff1",
    "diff2",
    "diff3",
    "diff4",
    "flags",
    "verdict",
]


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_has_the_stable_keys(capsys):
    code, out, err = _run(capsys, "run", SMALL, "--format", "json", "--no-progress")
    assert code == 0, err
    doc = json.loads(out)
    for key in STABLE:
        assert key in doc
    assert doc["n"] == 2 * 8 * 4 * 4


def test_verifier_pass_and_fail_exit_codes(capsys):
    assert _run(capsys, "run", SMALL, "--verifier", "rocmlir", "--no-progress")[0] == 0
    code, out, _ = _run(
        capsys,
        "run",
        SMALL,
        "--threshold",
        "n_exact=0",
        "--seed",
        "1",
        "--rand-min",
        "-10",
        "--rand-max",
        "10",
        "--no-progress",
    )
    # a threshold adds a check to the default (harness) verifier; the final line names it
    assert code == 1 and "[1 1 1 0]" in out
    assert out.rstrip().splitlines()[-1].startswith("FAIL (rocmlir): n_exact 256 > 0")


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["run", "no_such_test"], "suite"),
        (["run", SMALL, "--hw", "mi900"], "hw"),
        (["run", SMALL, "--validator", "gpu2"], "validator"),
        (["run", SMALL, "--verifier", "strict"], "rocmlir"),
        (["run", SMALL, "--threshold", "rms"], "METRIC=VALUE"),
        (["run", "-batchsize=0 -in_channels=4"], "batchsize"),
        (["frobnicate"], "invalid choice"),
        (["compare", "missing_a.npy", "missing_b.npy"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    code, out, err = _run(capsys, *argv)
    assert code == 2
    prefix = (
        "fp16emu: error:" if argv[0] == "frobnicate" else f"fp16emu {argv[0]}: error:"
    )  # one error line per command
    assert err.count("\n") == 1 and err.startswith(prefix), err
    assert needle in err
    assert "Traceback" not in err


def test_compare_npy(tmp_path, capsys):
    rng = np.random.default_rng(0)
    v = rng.uniform(-1, 1, (3, 50)).astype(np.float32)
    k = v.astype(np.float16)
    np.save(tmp_path / "v.npy", v)
    np.savez(tmp_path / "k.npz", k=k)
    code, out, err = _run(
        capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "k.npz"), "--format", "json", "--verifier", "rocmlir"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["n"] == 150 and doc["flags"] == [1, 1, 1] and doc["verdict"] == "pass"
    broken = k.copy()
    broken[1, 7] = np.float16(3.0)
    np.save(tmp_path / "b.npy", broken)
    code, out, _ = _run(capsys, "compare", str(tmp_path / "v.npy"), str(tmp_path / "b.npy"), "--verifier", "rocmlir")
    assert code == 1


def test_check_prints_the_plan(capsys):
    code, out, _ = _run(capsys, "run", "padding_kernel_gemmN_CHECK_RESNET50_CONFIG2", "--check")
    assert code == 0 and "K802816" in out and "mi200" in out


# Property: random and mutated configs either run (or, when big, plan) or fail with exit 2 and one line.
TEMPLATES = [
    SMALL,
    "// RUN: miopen-gen %pv %random_data %xdlops -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=2 "
    "-in_channels=4 -out_channels=4 -in_h=5 -in_w=5 -fil_h=3 -fil_w=3 --padding_h=1 --padding_w=1 -t f16 | mlir-miopen-driver -c",
    "MIOpenDriver convfp16 -n 2 -c 4 -H 6 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -F 1",
    "--operation conv2d_bwd_weight -t f16 -batchsize=2 -in_channels=4 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3",
]
_TOKENS = [
    "-",
    "=",
    " ",
    "0",
    "-1",
    "99999",
    "x",
    "%pv",
    "--padding_h=",
    "-groupsize=3",
    "kcyx",
    "nchw",
    "-t f32",
    "|",
    "\\",
    "'",
    "--conv_stride_h=0",
    "-fil_layout=qqqq",
    "-F 3",
    "%xdlops",
    "-p",
    "-x2",
]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(TEMPLATES))
    for _ in range(draw(st.integers(0, 3))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "token"]))
        if action == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 6)) :]
        elif action == "insert":
            text = text[:pos] + draw(st.text(alphabet="-=0123456789abcxyz %|", max_size=4)) + text[pos:]
        else:
            text = text[:pos] + " " + draw(st.sampled_from(_TOKENS)) + " " + text[pos:]
    return text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(mutated(), st.text(max_size=40)))
def test_any_config_runs_or_fails_cleanly(capsys, text):
    # a ConfigWarning (a config that reads but the real tool would refuse) is printed, not an error
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        try:
            config = parse_config(text)
            big = sum(s.g * s.m * s.n * s.k for s in config.gemms) > 2e6
        except ConfigError:
            big = False
        except ValueError:
            big = False
        argv = ["run", text, "--no-progress"] + (["--check"] if big else [])
        code, out, err = _run(capsys, *argv)
    if code in (0, 1):  # 1: the default verifier fails the run (a verdict, not an error)
        assert out
    else:
        assert code == 2, (text, err)
        assert err.startswith("fp16emu run: error:") and err.count("\n") == 1, (text, err)


def test_run_on_a_split_k_test_reports_its_ensemble(capsys):
    code, out, err = _run(
        capsys,
        "run",
        "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_4",
        "--hw",
        "mi200",
        "--kernel",
        "xdlops",
        "--rand-type",
        "float",
        "--rand-min",
        "-1",
        "--rand-max",
        "1",
        "--seed",
        "1",
        "--verifier",
        "study-2022",
        "--members",
        "8",
        "--format",
        "json",
        "--no-progress",
    )
    assert code in (0, 1), err
    doc = json.loads(out)
    ens = doc["ensemble"]
    assert ens["n_split"] >= 3 and ens["members"] == 8 and ens["seed"] == 2022
    assert 0 <= ens["members_passing"] <= 8
    # the float generator draws reals in [min, max] (closed), each value's source named
    assert doc["inputs"]["distribution"] == "float" and doc["inputs"]["interval"] == "[-1, 1]"
    assert doc["inputs"]["source"]["distribution"] == "option --rand-type" and doc["verifier"]["run_set"] == "fair_3"
    assert ens["ranges"]["max_abs_diff"][0] < ens["ranges"]["max_abs_diff"][1]
    code, out, _ = _run(
        capsys, "run", "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_2", "--members", "4", "--no-progress"
    )
    assert "fp32 atomics" in out and "ensemble over 4 atomic add orders" in out


def test_composed_validator_from_the_cli(capsys):
    code, out, err = _run(capsys, "run", SMALL, "--validator", "cpu-acc4+flush", "--no-progress")
    assert code == 0, err and "cpu-acc4+flush" in out
    code, _, err = _run(capsys, "run", SMALL, "--validator", "cpu-acc4+nope", "--no-progress")
    assert code == 2 and "+flush, +inbounds" in err


def test_list_shows_the_suite_and_run_says_which_tests_match(capsys):
    import json

    from validation.cli import main

    assert main(["list", "RESNET50_F16_CONFIG1"]) == 0
    out = capsys.readouterr().out
    assert "padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG1  fwd" in out and "gemm g1 m64 n3211264 k147" in out
    assert main(["list", "no_such_test"]) == 1
    capsys.readouterr()
    assert main(["list", "*_bwd_*", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["direction"] for r in rows} <= {"bwd_data", "bwd_weight"}
    assert main(["run", "conv2d"]) == 2
    assert "tests contain it, e.g. conv2d_" in capsys.readouterr().err


def test_inverted_ranges_nan_thresholds_and_empty_arrays_are_refused(tmp_path, capsys):
    """Issue 31: these were accepted (an inverted range misreported, rms=nan, a PASS with n = 0)."""
    import numpy as np

    from validation.cli import main
    from validation.verify import verify

    test = "conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16"
    assert main(["run", test, "--rand-type", "float", "--rand-min", "5", "--rand-max", "-5", "--no-progress"]) == 2
    assert "inverted" in capsys.readouterr().err
    np.save(tmp_path / "v.npy", np.ones(4, np.float32))
    np.save(tmp_path / "k.npy", np.ones(4, np.float16))
    for bad in ("rms=nan", "rms=inf", "rms=-1"):
        assert main(["compare", str(tmp_path / "v.npy"), str(tmp_path / "k.npy"), "--threshold", bad]) == 2
        assert "finite number" in capsys.readouterr().err
    with pytest.raises(ValueError, match="both arrays are empty"):
        verify(np.zeros(0, np.float32), np.zeros(0, np.float16))
