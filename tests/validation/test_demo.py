"""``make demo`` (validation.demo) reproduces one measured MI200 line of the 2022 study exactly,
and ``fp16emu units`` prints the probe-vector table."""

import pytest

from validation import demo
from validation.cli import main
from validation.verify.presets import parse_study_line


def test_the_shipped_measured_line_is_the_studys_own():
    """The fact in the package is a verbatim line of the study's raw results (skips without them)."""
    from reference_data import require

    path = require("fp16_study_raw_results", "verify_results_fair_1_MI200", "verify_f16_xdlops_pv_rand0.txt")
    lines = [t.rstrip("\n") for t in path.read_text().splitlines()]
    assert demo.MEASURED["line"] in lines
    assert lines.index(demo.MEASURED["line"]) + 1 == 76  # the line number the source cites
    tail = parse_study_line(demo.MEASURED["line"]).tail
    assert tail.test_name == demo.MEASURED["test"]


def test_demo_prints_the_measured_line_field_for_field(capsys):
    r, measured, emulated, text = demo.reproduce()
    assert text == demo.MEASURED["line"]
    assert emulated.fields() == measured.fields()
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert out.count(demo.MEASURED["line"]) == 2  # measured and emulated, printed side by side
    assert "14 of 14 printed fields equal" in out
    assert "identical to the emulated kernel" in out and "1 element differs (of 102400)" in out
    assert "subnormal_flush" in out


def test_units_subcommand_prints_the_probe_table(capsys):
    assert main(["units", "--units", "mi100,mi200"]) == 0
    out = capsys.readouterr().out
    assert "pairing tie lost" in out and "mi200" in out
    # the pairing tie: MI100 fuses (1 + 2^-23), MI200 rounds each pairwise add (1)
    row = next(line for line in out.splitlines() if line.startswith("pairing tie lost"))
    assert row.split()[-2:] == ["1+2^-23", "1"]


def test_units_subcommand_rejects_an_unknown_unit(capsys):
    assert main(["units", "--units", "mi999"]) == 2
    assert "--units: 'mi999' is not one of" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["mi300x", "h200"])
def test_units_accepts_aliases(capsys, name):
    assert main(["units", "--units", name]) == 0
