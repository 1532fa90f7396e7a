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


def _input_rows(out: str) -> tuple[list[str], dict[str, list[str]]]:
    """The header and the rows (by unit) of ``units --input``'s table."""
    lines = out.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("unit "))
    rows = {}
    for line in lines[top + 2 :]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return lines[top].split(), rows


def test_units_input_lists_the_units_of_a_format_with_their_parameters(capsys):
    assert main(["units", "--input", "bf16"]) == 0
    head, rows = _input_rows(capsys.readouterr().out)
    assert set(rows) == {"mi100", "mi200", "mi300", "a100", "ada", "h100", "b200", "fma32", "fp64"}
    assert rows["h100"][head.index("group")] == "16" and rows["mi100"][head.index("group")] == "2"
    assert main(["units", "--input", "tf32", "--units", "h100,mi300"]) == 0
    head, rows = _input_rows(capsys.readouterr().out)
    assert set(rows) == {"h100", "mi300"} and rows["h100"][head.index("group")] == "8"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--input", "fp12"], "--input: 'fp12' is not one of fp16, bf16, tf32, e4m3, e5m2, e4m3fnuz, e5m2fnuz"),
        (["--input", "e4m3", "--units", "v100"], "--units: input: v100 has no e4m3 instruction"),
    ],
)
def test_units_input_refuses_an_unknown_format_or_a_unit_without_it(capsys, argv, needle):
    assert main(["units", *argv]) == 2
    assert needle in capsys.readouterr().err
