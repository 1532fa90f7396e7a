"""Fuzz target of the one writer (issue 41, ``make fuzz``): random things at the target names (a
file, a link to a victim, a dangling link, a FIFO, a folder, nothing), random umasks, one to
three files written together, and a write failing midway. Every input ends as "all written"
(each target a regular file with the new bytes and the umask's mode) or a refusal (ValueError
naming the option, or the failed write's OSError) with every target as it was; never a byte
through a link, never a FIFO opened, never a temporary file left, each in under 5 s (``tests.fuzzing.BOUND_S``)."""

import os
import shutil
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import fuzz, tally, write_report
from validation.files import append_text, write_files_atomically

KINDS = ["missing", "file", "link to victim", "dangling link", "fifo", "folder", "folder with files"]


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    write_report()


def _plant(path, kind: str, victim, nowhere) -> None:
    if kind == "file":
        path.write_bytes(b"old " + path.name.encode())
    elif kind == "link to victim":
        path.symlink_to(victim)
    elif kind == "dangling link":
        path.symlink_to(nowhere)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("folder", "folder with files"):
        path.mkdir()
        if kind == "folder with files":
            (path / "inside").write_bytes(b"keep")


def _state(path):
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_fifo():
        return ("fifo",)
    if path.is_dir():
        return ("folder", sorted(p.name for p in path.iterdir()))
    if path.is_file():
        return ("file", path.read_bytes(), path.stat().st_mode & 0o777)
    return ("missing",)


@fuzz(60)
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3),
    umask=st.sampled_from([0o022, 0o077, 0o002, 0o027]),
    fail_at=st.none() | st.integers(0, 2),
)
def test_the_writer_writes_all_or_nothing_and_never_through_a_link(tmp_path_factory, kinds, umask, fail_at):
    d = tmp_path_factory.mktemp("w")
    victim, nowhere = d / "victim", d / "nowhere"
    victim.write_bytes(b"precious")
    out = d / "out"
    out.mkdir()
    paths = [out / f"f{i}.bin" for i in range(len(kinds))]
    for p, kind in zip(paths, kinds):
        _plant(p, kind, victim, nowhere)
    before = [_state(p) for p in paths]

    def writer(i):
        def write(fh):
            fh.write(b"new %d" % i)
            if fail_at == i:
                raise OSError(28, "No space left on device")

        return write

    old = os.umask(umask)
    t0 = time.perf_counter()
    try:
        write_files_atomically({p: writer(i) for i, p in enumerate(paths)}, "--save")
        answer = "all written"
    except ValueError as err:
        assert str(err).startswith("--save: ") and "\n" not in str(err)
        answer = "refused"
    except OSError as err:
        assert err.errno == 28
        answer = "write failed, nothing replaced"
    finally:
        os.umask(old)
    seconds = time.perf_counter() - t0
    blocked = any(k in ("fifo", "folder", "folder with files") for k in kinds)
    if answer == "all written":
        assert not blocked and (fail_at is None or fail_at >= len(kinds))
        assert [_state(p) for p in paths] == [("file", b"new %d" % i, 0o666 & ~umask) for i in range(len(paths))]
    else:
        assert blocked or fail_at is not None
        assert [_state(p) for p in paths] == before
    assert victim.read_bytes() == b"precious" and not nowhere.exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    tally("write_files_atomically (plots, saves, reports)", answer, seconds)
    shutil.rmtree(d)


@fuzz(40)
@given(kind=st.sampled_from(KINDS), umask=st.sampled_from([0o022, 0o077, 0o002]))
def test_the_log_is_appended_only_to_a_regular_file(tmp_path_factory, kind, umask):
    d = tmp_path_factory.mktemp("a")
    victim, nowhere, log = d / "victim", d / "nowhere", d / "jobs.tsv"
    victim.write_bytes(b"precious")
    _plant(log, kind, victim, nowhere)
    before = _state(log)
    old = os.umask(umask)
    t0 = time.perf_counter()
    try:
        append_text(log, "line\n", "--out")
        answer = "appended"
    except ValueError as err:
        assert str(err).startswith("--out: ") and "\n" not in str(err)
        answer = "refused"
    finally:
        os.umask(old)
    if kind in ("missing", "file"):
        assert answer == "appended"
        content = (b"old jobs.tsv" if kind == "file" else b"") + b"line\n"
        assert _state(log)[:2] == ("file", content)
        assert kind == "file" or _state(log)[2] == 0o666 & ~umask
    else:
        assert answer == "refused" and _state(log) == before
    assert victim.read_bytes() == b"precious" and not nowhere.exists()
    tally("append_text (study jobs.tsv)", answer, time.perf_counter() - t0)
    shutil.rmtree(d)
