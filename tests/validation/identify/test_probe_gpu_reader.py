"""The GPU probe script reads its probe file through the checked loader (issue 41.9): a FIFO or a
device refused without reading, pickles never loaded, a member that declares more than the
archive holds refused before anything is allocated; the same checks where the script runs alone
beside numpy (no fp16emu installed). Each one line, exit 2."""

import builtins
import io
import os
import threading
import zipfile

import numpy as np
import pytest

from validation.identify import probe_gpu


def _probes(path):
    np.savez(path, a=np.zeros((2, 16), np.uint16), b=np.zeros((2, 16), np.uint16), c=np.zeros(2, np.uint32))
    return path


@pytest.fixture(params=["checked loader", "script alone"])
def alone(request, monkeypatch):
    if request.param == "script alone":  # as on a GPU machine without fp16emu: validation does not import
        real = builtins.__import__

        def no_validation(name, *args, **kwargs):
            if name == "validation.files" or name.startswith("validation.files"):
                raise ImportError(name)
            return real(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_validation)
    return request.param


def _refused(path, needle, seconds=10.0):
    box = {}

    def call():
        try:
            probe_gpu._load(str(path))
        except probe_gpu.ProbeError as err:
            box["err"] = str(err)
        except Exception as err:  # noqa: BLE001 (anything else is the failure this test looks for)
            box["err"] = f"{type(err).__name__}: {err}"
        else:
            box["err"] = None

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still reading {path} after {seconds} s"
    assert box["err"] is not None and needle in box["err"] and "\n" not in box["err"], box["err"]


def test_a_valid_probe_file_loads(tmp_path, alone):
    a, b, c, extra, fmt = probe_gpu._load(str(_probes(tmp_path / "p.npz")))
    assert a.shape == (2, 16) and fmt == "fp16" and extra == {}


def test_a_fifo_is_refused_without_waiting(tmp_path, alone):
    os.mkfifo(tmp_path / "p.npz")
    _refused(tmp_path / "p.npz", "regular file")


def test_a_device_is_refused(tmp_path, alone):
    os.symlink("/dev/zero", tmp_path / "p.npz")
    _refused(tmp_path / "p.npz", "not a regular file")


def test_a_pickle_is_never_loaded(tmp_path, alone):
    np.savez(tmp_path / "p.npz", a=np.array([{"x": 1}], dtype=object), b=np.zeros(1), c=np.zeros(1))
    _refused(tmp_path / "p.npz", "")


def test_a_member_declaring_more_than_deflate_can_give_is_refused(tmp_path, alone):
    """A 1 KiB archive whose member claims 64 GiB: refused before it is read."""
    _probes(tmp_path / "p.npz")
    raw = bytearray((tmp_path / "p.npz").read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as z:
        info = z.infolist()[0]
    # the central directory's uncompressed size of the first member (offset 24 in its record)
    cd = raw.rfind(b"PK\x01\x02", 0, len(raw))
    while raw[cd + 46 : cd + 46 + len(info.filename)] != info.filename.encode():
        cd = raw.rfind(b"PK\x01\x02", 0, cd)
    raw[cd + 24 : cd + 28] = (0xFFFFFFF0).to_bytes(4, "little")
    raw[cd + 10 : cd + 12] = (8).to_bytes(2, "little")  # deflated, so the ratio applies
    (tmp_path / "p.npz").write_bytes(bytes(raw))
    _refused(tmp_path / "p.npz", "p.npz")


def test_a_missing_file_is_one_line(tmp_path, alone):
    _refused(tmp_path / "none.npz", "no such file")
