"""Invalid input refused and work bounded (issue 41, items 6, 7, 10, 12): ``run --check`` refuses
what the run refuses, the run refuses a count or budget it cannot honour, the CSV and file-name
readers answer in one line, and duplicate archive members are found in linear time. Every
refusal: exit 2 and one line ``fp16emu CMD: error: …``, before anything is computed."""

import io
import time
import zipfile

import numpy as np
import pytest

from validation.cli import main
from validation.files import UserFileError, load_npz_file
from validation.identify.rows import load_rows

SMALL = (
    "--operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 "
    "-in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 --rand_type float"
)
SPLIT = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_2"  # split-K fp32 atomics: an ensemble

REFUSED = [
    (["--threshold", "rms=-1"], "--threshold rms"),
    (["--threshold", "rms=nan"], "--threshold rms"),
    (["--threshold", "nope=1"], "--threshold nope: unknown metric"),
    (["--verifier", "nope"], "--verifier: unknown verifier preset"),
    (["--layout", "zzzz"], "--layout: 'zzzz'"),
    (["--rand-min", "5", "--rand-max", "1"], "inverted"),
    (["--search-budget", "-1"], "--search-budget: "),
    (["--search-budget", "nan"], "--search-budget: "),
    (["--search-budget", "1e9"], "--search-budget: "),
    (["--validator", "cpu+flush+flush"], "+flush is given twice"),
    (["--members", "0"], "--members: 0 is below 1"),
    (["--members", "-1"], "--members: -1 is below 1"),
    (["--members", "1000000000"], "--members: 1000000000 is over the limit of 4096"),
    (["--members", "100000"], "FP16EMU_MAX_MEMBERS"),
]


def _refused(capsys, argv, needle, bound_s=10.0):
    t0 = time.perf_counter()
    code = main(argv)
    seconds = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.startswith(f"fp16emu {argv[0]}: error: ") and "Traceback" not in err, err
    assert needle in err, err
    assert seconds < bound_s, f"{seconds:.1f} s before the refusal"
    return err


@pytest.mark.parametrize("extra,needle", REFUSED, ids=[" ".join(e) for e, _ in REFUSED])
def test_run_check_refuses_what_the_run_refuses(capsys, extra, needle):
    _refused(capsys, ["run", SPLIT, "--check", *extra], needle)


@pytest.mark.parametrize("extra,needle", REFUSED, ids=[" ".join(e) for e, _ in REFUSED])
def test_the_run_refuses_before_computing(capsys, extra, needle):
    """On a small config (members apply to any config: a count that is not one is refused even
    where the kernel has no ensemble), each refused before the emulation starts."""
    _refused(capsys, ["run", SMALL, "--no-progress", *extra], needle, bound_s=5.0)


def test_the_members_limit_is_raised_by_its_variable(capsys, monkeypatch):
    monkeypatch.setenv("FP16EMU_MAX_MEMBERS", "2")
    _refused(capsys, ["run", SPLIT, "--check", "--members", "3"], "set FP16EMU_MAX_MEMBERS to raise it")
    assert main(["run", SPLIT, "--check", "--members", "2"]) == 0


def test_units_with_an_empty_list_is_refused(capsys):
    _refused(capsys, ["units", "--units", ""], "--units: '' names no unit")
    _refused(capsys, ["units", "--units", " , "], "names no unit")


def _csv_row(k: int) -> str:
    words = " ".join(["3c00"] * k)
    return f"{words},{words},00000000,{np.float32(k).view(np.uint32):08x}"


def test_a_csv_field_over_csv_s_default_limit_is_read(tmp_path):
    """K = 30,000 words: a field of 150,000 characters (csv's default limit is 131,072)."""
    path = tmp_path / "rows.csv"
    path.write_text("a,b,c,d\n" + _csv_row(30_000) + "\n")
    rows = load_rows(path)
    assert rows.a.shape == (1, 30_000)


def test_a_csv_row_with_more_fields_than_the_header_is_refused(tmp_path, capsys):
    path = tmp_path / "rows.csv"
    path.write_text("a,b,c,d\n" + _csv_row(4) + ",x" * 199_996 + "\n")
    with pytest.raises(ValueError, match=r"line 2: 200000 fields, the header names 4"):
        load_rows(path)
    _refused(capsys, ["identify", str(path)], "line 2")


@pytest.mark.parametrize("suffix", ["", ".npz", ".csv"])
def test_a_file_name_too_long_is_one_line(capsys, suffix):
    _refused(capsys, ["identify", "x" * 300 + suffix], "x" * 40)


def test_duplicate_members_are_found_in_linear_time(tmp_path):
    """30,000 names, each twice: names.count per member took 3.6e9 comparisons (minutes for the
    trial's 60,000 pairs); now the check costs about what zipfile's own reading of the entries does."""
    bio = io.BytesIO()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of each duplicate name
        with zipfile.ZipFile(bio, "w") as z:
            for i in range(30_000):
                z.writestr(f"m{i}.npy", b"")
                z.writestr(f"m{i}.npy", b"")
    path = tmp_path / "dup.npz"
    path.write_bytes(bio.getvalue())
    t0 = time.perf_counter()
    with zipfile.ZipFile(path) as z:  # zipfile's own reading of the 60,000 entries: the yardstick
        assert len(z.infolist()) == 60_000
    parse_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with pytest.raises(UserFileError, match="two members of one name"):
        load_npz_file(path, "rows")
    assert time.perf_counter() - t0 < 2 * parse_s + 1.0, (time.perf_counter() - t0, parse_s)


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--members", "1000000000"], "--members: 1000000000 is over the limit of 4096"),
        (["--members", "0"], "--members: 0 is below 1"),
        (["--jobs", "1000000"], "--jobs: 1000000 is over the limit of 1024"),
        (["--rand0-seeds", ",".join(["1"] * 1001)], "--rand0-seeds: 1001 seeds"),
    ],
    ids=["members-1e9", "members-0", "jobs-1e6", "seeds-1001"],
)
def test_study_counts_are_bounded_before_anything_is_read(capsys, tmp_path, extra, needle):
    """``study reproduce --members 1000000000`` ran for minutes (and ignored signals); now exit 2."""
    _refused(capsys, ["study", "reproduce", "--measured", str(tmp_path), *extra], needle, bound_s=5.0)
