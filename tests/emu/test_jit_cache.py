"""emu.jit's numba cache: one per-user folder for every entry point, and never one that another
user can write (numba unpickles its index files: a planted index is code run as the caller)."""

import os
import shutil
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
    # a command that compiles as it goes (units and identify of a capture compile first, in
    # parallel: tests/validation/test_warm.py): the tiny MI200 convolution's kernels
    tiny = "--operation conv2d -t f16 -batchsize=1 -in_channels=4 -out_channels=4 -in_h=4 -in_w=4 -fil_h=3 -fil_w=3"
    cmd = [sys.executable, "-m", "validation.cli", "run", tiny, "--no-progress"]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "compiling the emulator's kernels for this machine" in r.stderr
    assert str(tmp_path / "xdg" / "fp16emu" / "numba") in r.stderr
    assert "`fp16emu warm` compiles them all at once" in r.stderr  # the one step that does it all
    assert "s of it was compiling (once)" in r.stderr.splitlines()[-1]  # and, at the end, for how long
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "compiling" not in r.stderr, r.stderr  # the second run loads the cache


# -- a planted index file (issue 41.1): numba unpickles ``.nbi`` files, so one planted by another
# user, or written through a folder or file others can write, would run as the caller. A tiny
# kernel of its own (not the emulator's) is compiled once into a fresh cache, its index replaced
# by a pickle that would create a marker file, and the kernel run again.

KERNEL = "from emu.jit import jit\n\n\n@jit\ndef plus_one(x):\n    return x + 1\n"
RUN = (
    "import sys, warnings; warnings.simplefilter('always'); sys.path.insert(0, sys.argv[1]); "
    "import numba, tiny_kernel; print(tiny_kernel.plus_one(41), numba.config.CACHE_DIR)"
)


class _Plant:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _tiny(tmp_path, env_extra: dict, src: Path | None = None) -> subprocess.CompletedProcess:
    """Run the tiny kernel in a fresh process (its source in ``src``, default ``tmp_path/src``,
    written there when missing), the cache where ``env_extra`` says."""
    if src is None:
        src = tmp_path / "src"
        src.mkdir(exist_ok=True)
        (src / "tiny_kernel.py").write_text(KERNEL)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.run([sys.executable, "-c", RUN, str(src)], cwd=tmp_path, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """A folder holding the tiny kernel's source (``src``) and a private cache it was compiled into
    once (``xdg``): each test below spoils a copy of that cache, so the module compiles the
    kernel once instead of once per test (numba keys the cache on the source's path and stamp,
    which the copies share)."""
    base = tmp_path_factory.mktemp("tiny")
    src = base / "src"
    src.mkdir()
    (src / "tiny_kernel.py").write_text(KERNEL)
    r = _tiny(base, {"XDG_CACHE_HOME": str(base / "xdg")}, src)
    assert r.returncode == 0 and r.stdout.split()[0] == "42", r.stderr
    return base


def _compiled_copy(compiled: Path, tmp_path: Path) -> tuple[dict, Path]:
    """A private copy of the compiled cache in ``tmp_path`` (folders 0700, files 0600 as numba left
    them): the environment that points at it, and the kernel's cache folder in it."""
    shutil.copytree(compiled / "xdg", tmp_path / "xdg", symlinks=True)
    (index,) = (tmp_path / "xdg").rglob("tiny_kernel.plus_one-*.nbi")
    return {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, index


def _plant(compiled: Path, tmp_path: Path, how: str):
    """A copy of the compiled, cached tiny kernel whose index is then replaced by a pickle that
    would create ``marker``, the folder or file spoiled as ``how`` says; returns (env, marker,
    index)."""
    import pickle

    env, index = _compiled_copy(compiled, tmp_path)
    folder = index.parents[1]
    marker = tmp_path / "marker"
    index.write_bytes(pickle.dumps(_Plant(marker)))
    if how == "another user's file":
        os.chown(index, 12345, 12345)
    elif how == "open folder":
        os.chmod(folder, 0o777)
    elif how == "open subfolder":
        os.chmod(index.parent, 0o775)
    elif how == "group-writable file":
        os.chmod(index, 0o664)
    elif how == "link":
        real = tmp_path / "elsewhere.nbi"
        index.rename(real)
        index.symlink_to(real)
    elif how == "open cache root":
        os.chmod(folder.parent, 0o777)
        os.chown(index, 12345, 12345)
    return env, marker, index


SPOILED = ["another user's file", "open folder", "open subfolder", "group-writable file", "link", "open cache root"]


@pytest.mark.parametrize("how", SPOILED)
def test_a_planted_index_never_runs(compiled, tmp_path, how):
    if "another user" in how or "root" in how:
        if not hasattr(os, "getuid") or os.getuid() != 0:
            pytest.skip("needs root to give a file to another user")
    env, marker, index = _plant(compiled, tmp_path, how)
    r = _tiny(tmp_path, env, compiled / "src")
    assert r.returncode == 0 and r.stdout.split()[0] == "42", r.stderr
    assert not marker.exists()  # the planted pickle was never loaded
    assert "is replaced by an empty folder" in r.stderr and r.stdout.split()[1] == str(index.parents[1])
    folder = index.parents[1]
    assert (folder.stat().st_mode & 0o777) == 0o700 and (folder.parent.stat().st_mode & 0o777) == 0o700
    planted = list(folder.rglob("*.nbi"))
    assert planted == [index] and index.stat().st_uid == os.getuid()  # the kernel's fresh index, ours
    assert not list(folder.parent.glob(".*unsafe*"))  # the folder moved aside is gone


def test_the_planted_index_would_run_from_a_trusted_folder(compiled, tmp_path):
    """The control: the same planted file, left in a private folder of this user's, is loaded (so
    the tests above would see it run if the checks let it through)."""
    env, marker, _ = _plant(compiled, tmp_path, "none")
    _tiny(tmp_path, env, compiled / "src")
    assert marker.exists()


@pytest.mark.parametrize("umask", [0o002, 0o000])
def test_a_loose_umask_still_keeps_the_cache(tmp_path, umask):
    """numba's own folders and files are made 0700 and 0600 whatever the umask, so they are not
    taken for planted ones and the second run loads the cache instead of replacing it."""
    old = os.umask(umask)
    try:
        first = _tiny(tmp_path, {"XDG_CACHE_HOME": str(tmp_path / "xdg")})
        second = _tiny(tmp_path, {"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    finally:
        os.umask(old)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert "replaced" not in first.stderr + second.stderr, second.stderr
    folder = Path(second.stdout.split()[1])
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.rglob("*")}
    assert modes and all(m in (0o700, 0o600) for m in modes.values()), modes


# -- a file swapped after the check (issue 41.1: "with the same descriptor that reads it"): the
# tree is checked when emu.jit is imported; numba reads its index only when the kernel is first
# called. Between the two, the index is replaced (a rename keeps the planted file's owner and
# mode); the load checks the descriptor it reads and refuses it.

SWAP_RUN = (
    "import sys, os, warnings; warnings.simplefilter('always'); sys.path.insert(0, sys.argv[1]); "
    "import numba, emu.jit; from pathlib import Path; "
    "(index,) = Path(numba.config.CACHE_DIR).rglob('tiny_kernel.plus_one-*.nbi'); "
    "exec(sys.argv[2]); "
    "import tiny_kernel; print(tiny_kernel.plus_one(41), numba.config.CACHE_DIR)"
)
SWAPS = {
    "another user's file": "os.replace(sys.argv[3], index)",
    "group-writable file": "os.replace(sys.argv[3], index)",
    "open subfolder": "os.replace(sys.argv[3], index); os.chmod(index.parent, 0o777)",
    "link": "os.unlink(index); index.symlink_to(sys.argv[3])",
    "none": "os.replace(sys.argv[3], index)",  # the control: a private file of ours is loaded
}


def _swap(compiled: Path, tmp_path: Path, how: str) -> tuple[subprocess.CompletedProcess, Path]:
    import pickle

    env, _ = _compiled_copy(compiled, tmp_path)  # the tiny kernel compiled and cached, privately
    marker, planted = tmp_path / "marker", tmp_path / "planted.nbi"
    planted.write_bytes(pickle.dumps(_Plant(marker)))
    os.chmod(planted, 0o664 if how == "group-writable file" else 0o600)
    if how == "another user's file":
        os.chown(planted, 12345, 12345)
    run_env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    run_env.update(PYTHONPATH=str(ROOT), **env)
    cmd = [sys.executable, "-c", SWAP_RUN, str(compiled / "src"), SWAPS[how], str(planted)]
    r = subprocess.run(cmd, cwd=tmp_path, env=run_env, capture_output=True, text=True)
    return r, marker


@pytest.mark.parametrize("how", [h for h in SWAPS if h != "none"])
def test_an_index_swapped_after_the_check_is_refused(compiled, tmp_path, how):
    if "another user" in how and (not hasattr(os, "geteuid") or os.geteuid() != 0):
        pytest.skip("needs root to give a file to another user")
    r, marker = _swap(compiled, tmp_path, how)
    assert r.returncode == 0 and r.stdout.split()[0] == "42", r.stderr
    assert not marker.exists()  # the planted pickle was never loaded
    assert "not loaded, compiled again" in r.stderr, r.stderr
    (index,) = Path(r.stdout.split()[1]).rglob("tiny_kernel.plus_one-*.nbi")
    st = os.lstat(index)  # the kernel's fresh index replaced the planted one (or the link)
    assert st.st_uid == os.geteuid() and (st.st_mode & 0o777) == 0o600 and not index.is_symlink()


def test_the_swapped_index_would_run_when_private(compiled, tmp_path):
    """The control: the same swap with a private file of this user's is loaded, so the swap
    happens after the folder check and before numba's read (the refusals above are the load's)."""
    r, marker = _swap(compiled, tmp_path, "none")
    assert marker.exists(), r.stderr
