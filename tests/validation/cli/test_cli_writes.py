"""Every output through the one writer (issue 41.2-4, 11, 12): ``--plot``, ``run --save``,
``study reproduce --out`` (report, CSV, ``jobs.tsv``, ``.cache``) refuse a FIFO or a folder at a
name, and a missing or unwritable folder, with exit 2 and one line before any computing; a link
at a name is replaced (never written through); SIGTERM while an engine runs is exit 143."""

import os

import numpy as np
import pytest

import validation.cli.design as design_cli
import validation.cli.run as run_cli
import validation.study.reproduction as reproduction
from validation.cli import main
from validation.engine import Terminated
from validation.study.cache import Cache

SMALL = (
    "--operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 "
    "-in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 --rand_type float"
)


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def no_compute(monkeypatch):
    """The emulation and the searches, replaced by a failure: a refusal must come before them."""

    def computed(*a, **k):
        raise AssertionError("computed before the output was checked")

    monkeypatch.setattr(run_cli, "run", computed)
    monkeypatch.setattr(design_cli, "design", computed)
    monkeypatch.setattr(reproduction, "read_measured", computed)


@pytest.mark.parametrize("blocker", ["fifo at run.json", "folder at validation.npy", "fifo at x.npy"])
def test_a_save_folder_with_a_bad_name_is_refused_before_computing(capsys, tmp_path, no_compute, blocker):
    d = tmp_path / "saved"
    d.mkdir()
    (d / "kernel.npy").write_bytes(b"the previous run's kernel output")
    what, name = blocker.split(" at ")
    if what == "fifo":
        os.mkfifo(d / name)
    else:
        (d / name).mkdir()
    code, out, err = _cli(capsys, "run", SMALL, "--no-progress", "--save", str(d))
    assert code == 2 and err.count("\n") == 1 and err.startswith("fp16emu run: error: --save: "), err
    assert ("FIFO" if what == "fifo" else "(a folder)") in err and name in err
    assert (d / "kernel.npy").read_bytes() == b"the previous run's kernel output"


def test_a_save_name_the_run_does_not_write_is_not_a_refusal(capsys, tmp_path, no_compute):
    """dy.npy is not written by a forward run: a folder there is none of the run's business."""
    d = tmp_path / "saved"
    (d / "dy.npy").mkdir(parents=True)
    with pytest.raises(AssertionError, match="computed"):
        main(["run", SMALL, "--no-progress", "--save", str(d)])


@pytest.mark.parametrize(
    "argv",
    [["run", SMALL], ["explain", SMALL], ["design", SMALL, "--seeds", "1"], ["identify", "rows.npz"]],
    ids=["run", "explain", "design", "identify"],
)
@pytest.mark.parametrize("where", ["missing folder", "fifo", "folder", "under a file"])
def test_a_plot_that_cannot_be_written_is_refused_at_once(capsys, tmp_path, no_compute, argv, where):
    (tmp_path / "file").write_text("")
    plot = {
        "missing folder": tmp_path / "nope" / "p.png",
        "fifo": tmp_path / "p.png",
        "folder": tmp_path / "p.png",
        "under a file": tmp_path / "file" / "p.png",
    }[where]
    if where == "fifo":
        os.mkfifo(plot)
    elif where == "folder":
        plot.mkdir()
    code, out, err = _cli(capsys, *argv, "--plot", str(plot))
    assert code == 2 and err.count("\n") == 1 and ": error: --plot: " in err, err
    assert out == ""


def test_a_plot_replaces_a_link_and_never_writes_through_it(capsys, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    link = tmp_path / "plot.png"
    link.symlink_to(victim)
    dangling = tmp_path / "plot2.png"
    dangling.symlink_to(tmp_path / "created.png")
    old = os.umask(0o027)
    try:
        for target in (link, dangling):
            code, out, err = _cli(capsys, "run", SMALL, "--no-progress", "--plot", str(target))
            assert code in (0, 1), err
    finally:
        os.umask(old)
    assert victim.read_bytes() == b"precious" and not (tmp_path / "created.png").exists()
    for target in (link, dangling):
        assert not target.is_symlink() and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert target.stat().st_mode & 0o777 == 0o640  # the umask's mode, not mkstemp's 0600


def test_a_save_writes_every_file_with_the_umasks_mode(capsys, tmp_path):
    d = tmp_path / "saved"
    d.mkdir()
    (d / "run.json").symlink_to(tmp_path / "victim.json")
    code, out, err = _cli(capsys, "run", SMALL, "--no-progress", "--save", str(d))
    assert code in (0, 1), err
    names = sorted(p.name for p in d.iterdir())
    assert names == ["kernel.npy", "run.json", "validation.npy", "w.npy", "x.npy"]
    assert not (tmp_path / "victim.json").exists() and not (d / "run.json").is_symlink()
    umask = os.umask(0)
    os.umask(umask)
    assert {(d / n).stat().st_mode & 0o777 for n in names} == {0o666 & ~umask}
    assert np.load(d / "kernel.npy").shape == np.load(d / "validation.npy").shape


@pytest.mark.parametrize(
    "plant",
    ["link at jobs.tsv", "fifo at jobs.tsv", "fifo at report.md", "folder at reproduce.csv", "link at .cache"],
)
def test_study_out_refuses_links_and_fifos_before_reading_anything(capsys, tmp_path, no_compute, plant):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "jobs.tsv").write_text("precious\n")
    what, name = plant.split(" at ")
    if what == "link":
        (out / name).symlink_to(victim / name if name == "jobs.tsv" else victim)
    elif what == "fifo":
        os.mkfifo(out / name)
    else:
        (out / name).mkdir()
    code, _, err = _cli(
        capsys, "study", "reproduce", "--measured", str(tmp_path), "--out", str(out), "--smallest", "1", "--no-progress"
    )
    assert code == 2 and err.count("\n") == 1, err
    assert name in err and ("--out: " in err or "cache folder: " in err), err
    assert (victim / "jobs.tsv").read_text() == "precious\n" and sorted(os.listdir(victim)) == ["jobs.tsv"]


def test_a_cache_subfolder_that_is_a_link_is_not_written_through(tmp_path, capsys):
    c = Cache(tmp_path / "cache")
    victim = tmp_path / "victim"
    victim.mkdir()
    key = "ab" + "0" * 62
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "ab").symlink_to(victim)
    c.put(key, {"anything": 1})
    err = capsys.readouterr().err
    assert "symbolic link" in err and "not cached" in err and err.count("\n") == 1
    assert list(victim.iterdir()) == []


def test_sigterm_while_design_runs_is_exit_143(capsys, monkeypatch):
    def terminated(*a, **k):
        raise Terminated()

    monkeypatch.setattr(design_cli, "design", terminated)
    code, out, err = _cli(capsys, "design", SMALL, "--seeds", "1", "--validators", "exact", "--no-progress")
    assert code == 143 and err == "fp16emu design: terminated\n", err
    monkeypatch.setattr(design_cli, "design", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    code, out, err = _cli(capsys, "design", SMALL, "--seeds", "1", "--validators", "exact", "--no-progress")
    assert code == 130 and err == "fp16emu design: interrupted\n", err


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
def test_sigterm_to_a_running_design_exits_143(tmp_path):
    """The process itself: ``design --jobs 2`` with its pool's workers started, then SIGTERM."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]

    def children(pid):
        kids = set()
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                kids |= {int(x) for x in (task / "children").read_text().split()}
            except OSError:
                pass
        return kids

    cmd = [sys.executable, "-m", "validation.cli", "design", "k-sweep:1", "--seeds", "400", "--jobs", "2"]
    env = dict(os.environ, PYTHONPATH=str(root))
    p = subprocess.Popen([*cmd, "--no-progress"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while len(children(p.pid)) < 2 and time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "fp16emu design: terminated", err
