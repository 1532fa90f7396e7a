"""``design --validators FILE`` through the checked loader (issue 41.9): a FIFO or a device (a link
to /dev/zero) is refused without reading, the file's size and nesting are capped (no
RecursionError), NaN and negative limits are refused; each one line, exit 2."""

import contextlib
import io
import os
import threading

import pytest

from validation.cli import main
from validation.design.functions import load_functions

CONFIG = "-t f16 -batchsize=2 -in_channels=4 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"


def _refused_within(path, needle, seconds=10.0):
    """load_functions(path) refused with ``needle`` in the message, within ``seconds`` (a daemon
    thread: a reader that blocks on a FIFO fails here instead of hanging the suite)."""
    box = {}

    def call():
        try:
            load_functions(path)
        except ValueError as err:
            box["err"] = str(err)
        else:
            box["err"] = None

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still reading {path} after {seconds} s"
    assert box["err"] is not None and needle in box["err"] and "\n" not in box["err"], box["err"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["design", CONFIG, "--validators", str(path)])
    assert code == 2 and err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue(), err.getvalue()


def test_a_fifo_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "v.json")
    _refused_within(tmp_path / "v.json", "FIFO")


def test_a_link_to_a_device_is_refused_without_reading(tmp_path):
    os.symlink("/dev/zero", tmp_path / "v.json")
    _refused_within(tmp_path / "v.json", "device")


def test_a_file_over_the_size_limit_is_refused(tmp_path):
    (tmp_path / "v.json").write_text('{"name": "x", "metrics": {"rms": 1}, "pad": "' + "x" * (2 << 20) + '"}')
    _refused_within(tmp_path / "v.json", "over the limit")


@pytest.mark.parametrize("suffix,text", [(".json", "[" * 100_000), (".toml", "a = " + "[" * 100_000)])
def test_deep_nesting_is_refused_before_parsing(tmp_path, suffix, text):
    (tmp_path / f"v{suffix}").write_text(text)
    _refused_within(tmp_path / f"v{suffix}", "levels deep")


@pytest.mark.parametrize(
    "suffix,text,needle",
    [
        (".json", '{"name": "x", "metrics": {"rms": NaN}}', "NaN is not a JSON number"),
        (".json", '{"name": "x", "metrics": {"rms": -1}}', "rms: the limit '-1'"),
        (".json", '{"name": "x", "metrics": {"rms": true}}', "rms: the limit 'True'"),
        (".toml", 'name = "x"\n[metrics]\nrms = nan\n', "rms: the limit 'nan'"),
        (".toml", 'name = "x"\n[metrics]\nrms = -inf\n', "rms: the limit '-inf'"),
    ],
)
def test_limits_that_are_not_finite_numbers_at_or_above_zero_are_refused(tmp_path, suffix, text, needle):
    (tmp_path / f"v{suffix}").write_text(text)
    _refused_within(tmp_path / f"v{suffix}", needle)


def test_a_valid_file_still_loads(tmp_path):
    (tmp_path / "v.toml").write_text('name = "mine"\ngenerator = "away:1:3"\n[metrics]\nrms = 1e-4\n')
    (fn,) = load_functions(tmp_path / "v.toml")
    assert fn.name == "mine" and fn.thresholds.checks[0].limit == 1e-4
