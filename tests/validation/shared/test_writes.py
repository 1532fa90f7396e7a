"""The one writer of every output (issue 41.2-4, 11): a temporary file of a random name made
exclusively beside the target, then renamed over it; never through a link, never onto a FIFO or
a folder, the user's umask for the mode, all files of one output or none, and a cut-short write
(``ulimit -f``) leaving the previous file whole."""

import errno
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from validation.files import append_text, check_output_file, write_atomically, write_files_atomically

ROOT = Path(__file__).resolve().parents[3]


def _payload(data: bytes):
    return lambda fh: fh.write(data)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_link_at_the_target_is_replaced_and_its_victim_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    target = tmp_path / "plot.png"
    target.symlink_to(victim)
    write_atomically(target, _payload(b"new"), "--plot")
    assert victim.read_bytes() == b"precious"
    assert not target.is_symlink() and target.read_bytes() == b"new"


def test_a_dangling_link_creates_nothing_where_it_points(tmp_path):
    target = tmp_path / "plot.png"
    target.symlink_to(tmp_path / "elsewhere" / "created.png")
    (tmp_path / "elsewhere").mkdir()
    write_atomically(target, _payload(b"new"), "--plot")
    assert not (tmp_path / "elsewhere" / "created.png").exists()
    assert not target.is_symlink() and target.read_bytes() == b"new"


def test_a_fifo_at_the_target_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    done = []
    t = threading.Thread(target=lambda: done.append(_refusal(fifo)), daemon=True)
    t.start()
    t.join(5)
    assert done and "FIFO" in done[0] and "--save" in done[0]
    assert Path(fifo).is_fifo() and _leftovers(tmp_path) == []


def _refusal(path) -> str:
    try:
        write_atomically(path, _payload(b"x"), "--save")
    except ValueError as err:
        return str(err)
    return "written"


@pytest.mark.parametrize("kind", ["folder", "folder with files"])
def test_a_folder_at_the_target_is_refused(tmp_path, kind):
    target = tmp_path / "validation.npy"
    target.mkdir()
    if kind == "folder with files":
        (target / "inside").write_text("keep")
    assert "(a folder)" in _refusal(target)
    assert target.is_dir() and _leftovers(tmp_path) == []


def test_devices_are_refused():
    assert "(a device)" in _refusal("/dev/null")


@pytest.mark.parametrize("where", ["missing folder", "under a file", "empty"])
def test_a_folder_that_cannot_take_the_file_is_refused_first(tmp_path, where):
    (tmp_path / "file").write_text("")
    path = {"missing folder": tmp_path / "nope" / "x.png", "under a file": tmp_path / "file" / "x.png", "empty": ""}
    with pytest.raises(ValueError, match="--plot: "):
        check_output_file(path[where], "--plot")


@pytest.mark.skipif(os.getuid() != 0, reason="makes another user's process to try a folder it cannot write")
def test_a_folder_the_user_cannot_write_is_refused(tmp_path):
    """Tried by making a file, not by permission bits: a user who cannot write the folder (here,
    uid 12345 in a forked child, in a folder 0755 of root's) gets the refusal at once."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # every folder above it searchable by others
    os.chmod(folder, 0o755)
    try:
        msg = _as_another_user(lambda: check_output_file(folder / "x.png", "--plot"))
        reached = _as_another_user(lambda: check_output_file(tmp_path / "x.png", "--plot"))
    finally:
        shutil.rmtree(folder)
    assert "--plot: the folder" in msg and "is not writable" in msg, msg
    assert "--plot: " in reached and "cannot be written (Permission denied)" in reached, reached


def _as_another_user(call) -> str:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            os.setgid(12345)
            os.setuid(12345)
            call()
            msg = "accepted"
        except ValueError as err:
            msg = str(err)
        except BaseException as err:  # noqa: BLE001
            msg = f"error {err!r}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        msg = fh.read()
    os.waitpid(pid, 0)
    return msg


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_the_mode_follows_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        a, b = write_files_atomically(
            {tmp_path / "a.npy": _payload(b"a"), tmp_path / "b.npy": _payload(b"b")}, "--save"
        )
        append_text(tmp_path / "jobs.tsv", "line\n", "--out")
    finally:
        os.umask(old)
    assert {p.stat().st_mode & 0o777 for p in (a, b, tmp_path / "jobs.tsv")} == {mode}


def test_all_files_or_none(tmp_path):
    first, second = tmp_path / "kernel.npy", tmp_path / "run.json"
    first.write_bytes(b"old kernel")
    second.write_bytes(b"old run")

    def fails(fh):
        fh.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_files_atomically({first: _payload(b"new kernel"), second: fails}, "--save")
    assert first.read_bytes() == b"old kernel" and second.read_bytes() == b"old run"
    assert _leftovers(tmp_path) == []


def test_a_name_refused_is_refused_before_any_file_is_written(tmp_path):
    first = tmp_path / "kernel.npy"
    first.write_bytes(b"old kernel")
    os.mkfifo(tmp_path / "run.json")
    with pytest.raises(ValueError, match="FIFO"):
        write_files_atomically({first: _payload(b"new"), tmp_path / "run.json": _payload(b"{}")}, "--save")
    assert first.read_bytes() == b"old kernel" and _leftovers(tmp_path) == []


CUT_SHORT = """
import resource, sys
from validation.files import write_atomically
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    write_atomically(sys.argv[1], lambda fh: fh.write(b"n" * 100_000), "--plot")
except OSError as err:
    print("refused", err.errno)
"""


def test_a_write_cut_short_by_ulimit_f_leaves_the_previous_file_whole(tmp_path):
    target = tmp_path / "plot.png"
    target.write_bytes(b"o" * 1000)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", CUT_SHORT, str(target)], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["refused", str(errno.EFBIG)], r.stderr
    assert target.read_bytes() == b"o" * 1000 and _leftovers(tmp_path) == []


def test_append_never_through_a_link_nor_into_a_fifo(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "link.tsv").symlink_to(victim)
    with pytest.raises(ValueError, match="symbolic link"):
        append_text(tmp_path / "link.tsv", "x\n", "--out")
    (tmp_path / "dangling.tsv").symlink_to(tmp_path / "created")
    with pytest.raises(ValueError, match="symbolic link"):
        append_text(tmp_path / "dangling.tsv", "x\n", "--out")
    os.mkfifo(tmp_path / "fifo.tsv")
    old = signal.alarm(10)  # a FIFO opened for writing without a reader would block: it must not
    try:
        with pytest.raises(ValueError, match="FIFO"):
            append_text(tmp_path / "fifo.tsv", "x\n", "--out")
    finally:
        signal.alarm(old)
    assert victim.read_text() == "precious\n" and not (tmp_path / "created").exists()
    append_text(tmp_path / "jobs.tsv", "a\n", "--out")
    append_text(tmp_path / "jobs.tsv", "b\n", "--out")
    assert (tmp_path / "jobs.tsv").read_text() == "a\nb\n"


def _writers():
    """The writers of the two scripts that run on a GPU machine without fp16emu (the capture kit's
    ``format.save`` and ``probe_gpu``'s), which keep their own copy of the same steps, and the one
    writer of fp16emu itself: each given the same planted names."""
    import numpy as np

    from validation.captures import format as capture_format
    from validation.identify import probe_gpu

    return {
        "validation.files": lambda p, arrays: write_atomically(p, lambda fh: np.savez(fh, **arrays), "--out"),
        "captures.format.save": capture_format.save,
        "probe_gpu": probe_gpu._save_atomically,
    }


@pytest.mark.parametrize("writer", ["validation.files", "captures.format.save", "probe_gpu"])
@pytest.mark.parametrize("plant", ["link", "dangling link", "fifo"])
def test_every_writer_replaces_what_is_planted_at_the_name(tmp_path, writer, plant):
    import numpy as np

    victim, target = tmp_path / "victim.npz", tmp_path / "out.npz"
    victim.write_bytes(b"precious")
    if plant == "link":
        target.symlink_to(victim)
    elif plant == "dangling link":
        target.symlink_to(tmp_path / "created.npz")
    else:
        os.mkfifo(target)
    old = os.umask(0o027)
    try:
        _writers()[writer](target, {"a": np.arange(3)})
    except ValueError as err:  # fp16emu's writer refuses a FIFO; the scripts replace it
        assert writer == "validation.files" and plant == "fifo" and "FIFO" in str(err)
        return
    finally:
        os.umask(old)
    assert victim.read_bytes() == b"precious" and not (tmp_path / "created.npz").exists()
    assert not target.is_symlink() and target.is_file() and (target.stat().st_mode & 0o777) == 0o640
    assert np.load(target)["a"].tolist() == [0, 1, 2] and _leftovers(tmp_path) == []
