"""emu.jit's numba cache: one per-user folder for every entry point, and never one that another
user can write (numba unpickles its index files: a planted index is code run as the caller)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from emu.jit import source_digest

ROOT = Path(__file__).resolve().parents[2]


def _import_emu(env_extra: dict, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), **env_extra)
    code = "import emu.jit, numba; print(emu.jit.CACHE, numba.config.CACHE_DIR)"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_default_is_a_private_per_user_folder(tmp_path):
    r = _import_emu({"XDG_CACHE_HOME": str(tmp_path / "xdg")}, tmp_path)
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "xdg" / "fp16emu" / "numba"
    assert r.stdout.split() == ["True", str(folder / source_digest())]
    assert (folder.stat().st_mode & 0o777) == 0o700
    assert ((folder / source_digest()).stat().st_mode & 0o777) == 0o700


def test_an_edited_helper_changes_the_cache_folder(tmp_path):
    """numba checks a cached kernel against its own file only: a kernel that inlines a helper of
    another file kept its stale machine code after the helper changed (the rows driver ran the
    old T-FDPA this way). The cache folder is named by a digest of every emu source, so any
    edit, in any file, is a fresh folder."""
    import shutil

    import emu

    root = Path(emu.__file__).parent
    copy = tmp_path / "emu"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    code = (
        "import importlib.util, sys; s = importlib.util.spec_from_file_location('jitcopy', sys.argv[1]); "
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); print(m.source_digest())"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "nb"))
    (tmp_path / "nb").mkdir(mode=0o700)

    def digest():
        r = subprocess.run([sys.executable, "-c", code, str(copy / "jit.py")], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    assert digest() == source_digest()  # the same sources: the same folder
    helper = copy / "kernels" / "_scalar.py"
    helper.write_text(helper.read_text() + "\n# an edit\n")
    assert digest() != source_digest()


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to make another user's folder")
def test_a_folder_of_another_user_is_never_used(tmp_path):
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o777)
    (planted / "x.nbi").write_bytes(b"not a pickle you want")
    os.chown(planted, 12345, 12345)
    r = _import_emu({"NUMBA_CACHE_DIR": str(planted), "XDG_CACHE_HOME": str(tmp_path / "xdg")}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "False"
    assert "belongs to another user" in r.stderr and "compiled in every process" in r.stderr


def test_a_folder_others_can_write_is_never_used(tmp_path):
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    r = _import_emu({"NUMBA_CACHE_DIR": str(open_folder)}, tmp_path)
    assert r.stdout.split()[0] == "False"
    assert "can be written by others" in r.stderr


def test_a_link_is_never_followed(tmp_path):
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    r = _import_emu({"NUMBA_CACHE_DIR": str(link)}, tmp_path)
    assert r.stdout.split()[0] == "False"
    assert "not a folder" in r.stderr


def test_no_fallback_to_a_predictable_temporary_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = _import_emu({"XDG_CACHE_HOME": str(blocker), "TMPDIR": str(tmp_path / "tmp")}, tmp_path)
    assert r.stdout.split()[0] == "False"
    assert not (tmp_path / "tmp").exists() or not any((tmp_path / "tmp").iterdir())


def test_the_command_line_says_when_it_compiles(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    bad = [sys.executable, "-m", "validation.cli", "units", "--units", "nosuchunit"]  # stops before compiling
    r = subprocess.run(bad, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "compiling" not in r.stderr, r.stderr
    cmd = [sys.executable, "-m", "validation.cli", "units", "--units", "fma32"]  # compiles the fma32 kernel
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "compiling the emulator's kernels for this machine" in r.stderr
    assert str(tmp_path / "xdg" / "fp16emu" / "numba") in r.stderr
    assert "`fp16emu warm` compiles them all at once" in r.stderr  # the one step that does it all
    assert "s of it was compiling (once)" in r.stderr.splitlines()[-1]  # and, at the end, for how long
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "compiling" not in r.stderr, r.stderr  # the second run loads the cache
