"""``--plot FILE.png`` on run, compare, explain, study reproduce and identify: a non-empty PNG whose
title names the config, hardware, kernel, validator and inputs; an unwritable target is exit 2
before any computation."""

import numpy as np
import pytest

from validation import plots
from validation.cli import main
from validation.design.plots import distribution_figure

SMALL = (
    "--operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 "
    "-in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 --rand_type float"
)


def _title(path) -> str:
    assert path.is_file() and path.stat().st_size > 1000
    text = plots.read_png_text(path)
    title = text["Title"]
    for field in plots.TITLE_FIELDS:
        assert f"{field}: " in title
    return title


def test_run_plot(tmp_path, capsys):
    out = tmp_path / "run.png"
    assert main(["run", SMALL, "--hw", "mi200", "--seed", "3", "--rand-min", "-1", "--rand-max", "1",
                 "--plot", str(out), "--no-progress"]) == 0  # fmt: skip
    title = _title(out)
    assert "hardware: mi200" in title and "kernel: rocmlir-2022-" in title and "validator: cpu-validation-2022" in title
    assert "seed 3" in title and "fwd" in title


def test_compare_plot(tmp_path, capsys):
    rng = np.random.default_rng(0)
    v = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    k = v.astype(np.float16)
    np.save(tmp_path / "v.npy", v)
    np.save(tmp_path / "k.npy", k)
    out = tmp_path / "cmp.png"
    assert main(["compare", str(tmp_path / "v.npy"), str(tmp_path / "k.npy"), "--plot", str(out)]) == 0
    title = _title(out)
    assert "v.npy" in title and "k.npy" in title and "2x4x5x5" in title


def test_explain_plot(tmp_path, capsys):
    out = tmp_path / "ex.png"
    assert main(["explain", SMALL, "--seed", "1", "--plot", str(out), "--top", "2", "--no-progress"]) == 0
    title = _title(out)
    assert "hardware: mi200" in title and "seed 1" in title and "reference exact" in title


def test_identify_plot(tmp_path, capsys):
    probes = tmp_path / "p.npz"
    assert main(["probe", "--out", str(probes), "--rows", "256", "--emulate", "mi200"]) == 0
    out = tmp_path / "id.png"
    assert main(["identify", str(probes), "--plot", str(out), "--next", "0"]) == 0
    title = _title(out)
    assert "hardware: mi200" in title and "256 rows" in title and "K = 16" in title


def test_study_reproduce_plot(tmp_path, capsys):
    from reference_data import require

    measured = require("fp16_study_raw_results")
    out = tmp_path / "study.png"
    code = main(["study", "reproduce", "--measured", str(measured), "--run-set", "fair_1", "--gpu", "mi200",
                 "--kernel", "xdlops", "--validator", "cpu,gpu", "--range", "r0,r4",
                 "--tests", "conv2d_host_validation_f16_fwd_CHECK_PADDING3_f16", "--out", str(tmp_path / "o"),
                 "--no-progress", "--show", "none", "--plot", str(out)])  # fmt: skip
    assert code == 0
    title = _title(out)
    assert "4 lines of 1 tests" in title and "hardware: mi200" in title and "ranges r0,r4" in title


def test_plot_target_is_checked_before_any_computation(tmp_path, capsys, monkeypatch):
    import validation.cli.run

    def boom(*a, **k):
        raise AssertionError("computed before checking --plot")

    monkeypatch.setattr(validation.cli.run, "run", boom)  # what the command calls
    for argv in (
        ["run", SMALL, "--plot", str(tmp_path / "missing" / "x.png")],
        ["explain", SMALL, "--plot", str(tmp_path / "missing" / "x.png")],
        ["run", SMALL, "--plot", str(tmp_path / "x.jpeg")],
        ["study", "reproduce", "--measured", str(tmp_path), "--plot", str(tmp_path / "missing" / "x.png")],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"fp16emu {argv[0]}: error: --plot:") and "Traceback" not in err


def test_unwritable_folder_is_a_usage_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        import os

        if os.access(ro, os.W_OK):  # root ignores permissions
            pytest.skip("running as a user that can write anywhere")
        with pytest.raises(ValueError, match="not writable"):
            plots.check_path(ro / "x.png")
    finally:
        ro.chmod(0o700)


def test_design_can_draw_distributions(tmp_path):
    fig = distribution_figure(
        {"rounding": np.arange(10.0), "bug": np.arange(10.0) + 20},
        {"threshold": 15.0},
        metric="max_epsilon_diff",
        fields={"config": "c", "hardware": "mi200", "kernel": "k", "validator": "v", "inputs": "i"},
    )
    assert fig.get_suptitle().startswith("config: c")
    _title(plots.save(fig, tmp_path / "d.png"))


def test_identify_study_plot(tmp_path, capsys):
    """The study-folder form: a cell per candidate × range for the smallest forward test."""
    from reference_data import require

    raw = require("fp16_study_raw_results")
    out = tmp_path / "study_id.png"
    code = main(["identify", str(raw), "--test", "CHECK_PADDING3_f16", "--gpu", "mi200", "--plot", str(out)])
    assert code == 0
    title = _title(out)
    assert "CHECK_PADDING3" in title and "hardware: mi200 (measured lines)" in title
    assert "units mi100, mi200, mi300 × gemmK kernel, ascending, cpu-loop" in title and "ranges r0,r1,r4,r5" in title
    assert "mi200 unit, gemmK kernel" in capsys.readouterr().out


def test_identify_study_kblocks_plot(tmp_path, capsys):
    """A backward-weight test with split-K: a cell per KBlocks × (range, validator)."""
    from reference_data import require

    raw = require("fp16_study_raw_results")
    out = tmp_path / "kblocks.png"
    code = main(["identify", str(raw), "--test", "CHECK_ISSUE_71_2", "--gpu", "mi200", "--plot", str(out)])
    assert code == 0
    title = _title(out)
    assert "CHECK_ISSUE_71_2" in title and "hardware: mi200 (measured lines)" in title
    assert "KBlocks 1, 2, 4" in title and "-pv, -pv_with_gpu" in title
    assert "KBlocks 4 consistent" in capsys.readouterr().out


def test_kblocks_checks_are_the_numbers_the_details_print():
    """What the KBlocks picture draws (KBlocksCheck) is what the text answer says (detail)."""
    from reference_data import require

    from validation.identify import study as identify_study

    raw = require("fp16_study_raw_results")
    test = "conv2d_host_validation_f16_bwd_CHECK_ISSUE_71_2"
    found = identify_study.identify_kblocks(raw, [test], gpus=("mi200",), ranges=("r0", "r4"), kblocks=(2, 4))
    verdicts = {v.kblocks: v for v in found[(test, "mi200")]}
    assert set(verdicts) == {2, 4} and verdicts[2].verdict == "excluded" and verdicts[4].verdict == "consistent"
    for v in verdicts.values():
        assert len(v.checks) == len(v.detail) == 4  # 2 ranges × 2 validators
        for c, text in zip(v.checks, v.detail):
            assert text.startswith(f"{c.range}/{c.validator}: ")
            if c.whole_line:
                assert f"n_exact {c.measured} measured, {c.lo} emulated" in text and c.lo == c.hi
                assert ("line equal" in text) == c.ok
            else:
                assert f"n_exact {c.measured} measured, [{c.lo}, {c.hi}] over every order" in text and c.exhaustive
                assert c.ok == (c.lo <= c.measured <= c.hi)
    assert not all(c.ok for c in verdicts[2].checks) and all(c.ok for c in verdicts[4].checks)


def test_run_plot_middle_panel_says_what_it_compares_and_agrees_with_the_text():
    """Issue 30.5: the panel counted elements equal to the fp32 validation, unrounded, as "exact"
    where the text counts them against the validation rounded to fp16; both counts are now said,
    the text's beside its name, and no title leaves the figure."""
    import matplotlib

    matplotlib.use("Agg")
    from validation.run import run
    from validation.run.plots import run_figure
    from validation.verify import measure

    r = run(SMALL, hw="mi200", seed=3, rand_min=-1, rand_max=1, progress=False)
    comparison, _ = measure(r.validation_array, r.kernel_array, "rocmlir-2022", "fp16", None)
    fig = run_figure(r, comparison)
    title = fig.axes[1].get_title()
    exact16 = int(np.count_nonzero(r.validation_output.astype(np.float16) == r.kernel_output))
    assert f"{exact16} of {r.kernel_output.size} exact, as in the text" in title and "unrounded" in title
    assert f"exact {exact16} " in comparison.format_text()
    fig.canvas.draw()
    box = fig.bbox
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
            if text.get_text():
                ext = text.get_window_extent(renderer)
                assert box.x0 <= ext.x0 and ext.x1 <= box.x1 and ext.y1 <= box.y1, text.get_text()


def _inside(fig) -> None:
    """The title, the panel titles, axis labels, y tick labels and annotations of ``fig`` lie
    inside the figure (x tick labels past the axis limits are not drawn and are left out)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    texts = [fig._suptitle]
    for ax in fig.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_yticklabels(), *ax.texts]
    for t in texts:
        if t is None or not t.get_text() or not t.get_visible():
            continue
        e = t.get_window_extent(renderer)
        assert e.x0 >= box.x0 - 1 and e.x1 <= box.x1 + 1 and e.y0 >= box.y0 - 1 and e.y1 <= box.y1 + 1, t.get_text()


def test_identify_figure_keeps_whole_labels_and_names_the_unit_the_text_names():
    """Issue 30.5: labels were cut ('k=ascendin'), the title clipped, and 'named: -' shown where
    the text named mi300 (named among the consistent points)."""
    from types import SimpleNamespace

    from models import space
    from validation.identify.plots import identify_figure

    points = space.named_points()
    consistent = [points["mi300"], points["h100"]]
    result = SimpleNamespace(
        consistent=consistent, nearest=[], rows=64, named=None, named_among=["mi300", "h100"], k=8,
        output_format="FP32", points_searched=1866,
    )  # fmt: skip
    fig = identify_figure(
        result, fields={"kernel": "matrix unit, K = 8, FP32 output, " + "a long kernel description " * 6}
    )
    labels = [t.get_text().replace("\n", " ") for t in fig.axes[0].get_yticklabels()]
    assert labels == [space.describe(p) for p in consistent]
    assert "named units among them: mi300, h100" in fig.axes[0].get_title()
    assert "hardware: mi300 or h100" in fig.get_suptitle()
    _inside(fig)


def test_design_plot_titles_its_inputs_and_stacks_coinciding_labels(tmp_path):
    """Issue 30.5: the design figure's labels overlapped and its title lacked kernel, validator
    and tests."""
    from types import SimpleNamespace

    from validation.design.report import plot

    tests = [{"label": f"t{i}", "hw": "mi200", "kernel": "rocmlir-2022-xdlops", "validator": "cpu"} for i in range(3)]
    ranking = [
        {"validator": v, "false_alarm": 0.0, "false_alarm_ci_high": 0.1, "mean_detection": 0.9}
        for v in ("rocmlir", "rocmlir-strict", "torch-default")
    ]
    metric = {"min": 1e-4, "max": 2e-4, "threshold": 3e-4}
    noise = [{"K": 64 * i, "generator": "float:-1:1", "metrics": {"max_rel_diff": metric}} for i in range(1, 40)]
    inputs = {"tests": tests, "validators": ["a", "b", "c"], "seeds_fit": [1, 5], "seeds_eval": [6, 20],
              "generators": ["float:-1:1"]}  # fmt: skip
    out = tmp_path / "design.png"
    plot(SimpleNamespace(inputs=inputs, ranking=ranking, noise=noise), out)
    title = plots.read_png_text(out)["Title"]
    assert "t0" in title and "rocmlir-2022-xdlops" in title and "mi200" in title and "3 validation functions" in title
    assert "seeds fit 1..5" in title


def test_design_plot_labels_do_not_overlap():
    import importlib
    from types import SimpleNamespace

    report = importlib.import_module("validation.design.report")  # validation.design is also a function
    captured = {}

    def keep(fig, path):
        captured["fig"] = fig

    ranking = [
        {"validator": v, "false_alarm": 0.0, "false_alarm_ci_high": 0.1, "mean_detection": 0.9}
        for v in ("rocmlir", "rocmlir-strict", "torch-default", "miopen")
    ]
    inputs = {"tests": [{"label": "t", "hw": "mi200", "kernel": "k", "validator": "v"}], "validators": ["a"],
              "seeds_fit": [1, 5], "seeds_eval": [6, 20], "generators": ["g"]}  # fmt: skip
    import validation.plots as vplots

    original = vplots.save
    vplots.save = keep
    try:
        report.plot(SimpleNamespace(inputs=inputs, ranking=ranking, noise=[]), "unused.png")
    finally:
        vplots.save = original
    fig = captured["fig"]
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(r) for t in fig.axes[0].texts]
    assert len(boxes) == 4
    for i in range(len(boxes)):
        for j in range(i):
            assert not boxes[i].overlaps(boxes[j]), (fig.axes[0].texts[i].get_text(), fig.axes[0].texts[j].get_text())


def test_compare_plot_of_an_fp8_kernel_is_in_fp8_ulps():
    """An e4m3 kernel output one e4m3 step off at 11 (an e4m3 ulp of 1, 128 fp16 ulps there): the
    heat map and the scale line are in e4m3 ulps, as the text's epsilonDiff is."""
    import ml_dtypes

    from validation.run.plots import compare_figure
    from validation.verify import measure

    v = np.full((4, 8), 11.0, np.float32).astype(ml_dtypes.float8_e4m3fn)
    k = v.copy()
    k.view(np.uint8)[1, 2] += 1  # 11 → 12
    comparison, _ = measure(v, k, "rocmlir", "e4m3")
    assert comparison.epsilon_format == "e4m3" and comparison.max_epsilon_diff == 1.0
    fig = compare_figure(v, k, comparison)
    heat = fig.axes[2]
    assert np.nanmax(heat.images[0].get_array()) == 1.0  # was 128: fp16 ulps
    assert fig.axes[-1].get_ylabel() == "max error (e4m3 ulps)"
    assert "½ e4m3 ulp of |validation|" in [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
