"""benchmarks/job_sizes.py on a synthetic jobs.tsv whose answers are worked out by hand below."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "job_sizes.py"


@pytest.fixture(scope="module")
def job_sizes():
    spec = importlib.util.spec_from_file_location("job_sizes", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# five jobs of 5, 4, 3, 3, 3 s (18 s in all, 10 lines)
TSV = "".join(f"T{i}\tr{i % 2}\t1\tuniform\t2\t{s}\n" for i, s in enumerate(("3.0", "5.0", "3.0", "4.0", "3.0")))


def test_distribution_and_lpt_estimate(job_sizes, tmp_path, capsys):
    path = tmp_path / "jobs.tsv"
    path.write_text(TSV + "\n")
    jobs = job_sizes.read_jobs(path)
    secs = sorted(j.seconds for j in jobs)
    assert (len(jobs), sum(secs), sum(j.lines for j in jobs)) == (5, 18.0, 10)
    # sorted 3 3 3 4 5: median the 3rd; p90 at position 3.6, between 4 and 5
    assert job_sizes.quantile(secs, 0.5) == 3.0
    assert job_sizes.quantile(secs, 0.9) == pytest.approx(4.6)
    # LPT on 2 workers: 5 → A, 4 → B, 3 → B (7), 3 → A (8), 3 → B (10); the bound is 18 / 2 = 9
    # (reached by {5, 4} and {3, 3, 3}, which LPT misses: the classic case)
    assert job_sizes.lpt_makespan(secs, 2) == 10.0
    assert job_sizes.lower_bound(secs, 2) == 9.0
    assert job_sizes.lpt_makespan(secs, 1) == 18.0  # one worker: everything in a row
    assert job_sizes.lpt_makespan(secs, 64) == 5.0  # more workers than jobs: the longest job
    assert job_sizes.lower_bound(secs, 64) == 5.0
    assert job_sizes.main([str(path), "--workers", "1,2,64", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "5 jobs, 10 lines, 18.0 worker-seconds" in out
    assert "W = 2: 0:00:10 (0:00:09)" in out
    top = [line.split("\t")[0].strip() for line in out.splitlines() if line.startswith("  T")]
    assert top == ["T1", "T3"]


def test_bad_input_exits_2(job_sizes, tmp_path, capsys):
    path = tmp_path / "jobs.tsv"
    path.write_text("T0\tr0\t1\tuniform\t2\n")
    assert job_sizes.main([str(path)]) == 2
    assert "expected 6 tab-separated fields" in capsys.readouterr().err
    path.write_text(TSV)
    assert job_sizes.main([str(path), "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
