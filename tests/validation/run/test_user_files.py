"""One checked loader for every file a user hands in (issue 31): run's and compare's arrays,
identify's rows (npz, CSV, a MATLAB folder), library captures and probe files all go through
validation.files — a regular file opened once without blocking, checked and read on that one
descriptor, npz member headers checked against the file and the memory limit before anything is
allocated, two members of one name refused, CSV words range-checked."""

import contextlib
import io
import os
import signal
import zipfile

import numpy as np
import pytest

from validation.captures import CaptureError, is_capture, load_capture
from validation.cli import main
from validation.identify.probes import load_inputs
from validation.identify.rows import load_rows
from validation.run.arrays import ArrayFileError, load_array, load_pair


@contextlib.contextmanager
def _prompt(seconds=5):
    """Fail (instead of hanging the suite) when the body blocks, as a read of a FIFO does."""

    def boom(*_):
        raise TimeoutError("blocked: the loader waited on a file")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _prompt():
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _one_line(err):
    return err.count("\n") == 1 and "Traceback" not in err


def _npy_header(shape, descr="<f2") -> bytes:
    """The bytes of an .npy header alone (version 1.0), claiming ``shape``."""
    d = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    pad = 64 - (10 + len(d) + 1) % 64
    text = (d + " " * pad + "\n").encode()
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


def _zip(path, members, compress=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compress) as z:
        for name, data in members:
            z.writestr(name, data)
    return path


def _rows(R=2, K=16):
    return {
        "a": np.full((R, K), 0x3C00, np.uint16),
        "b": np.full((R, K), 0x3C00, np.uint16),
        "c": np.zeros(R, np.uint32),
        "d": np.full(R, np.float32(K).view(np.uint32), np.uint32),
    }


def _npy_bytes(a) -> bytes:
    bio = io.BytesIO()
    np.save(bio, a)
    return bio.getvalue()


def test_fifos_devices_and_folders_are_refused_by_every_loader_without_blocking(tmp_path):
    """identify hung on a FIFO (also named .csv, and in a MATLAB folder); captures, probe files and
    arrays must refuse them too, promptly, naming a FIFO."""
    for name in ("rows.npz", "rows.csv"):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        with _prompt(), pytest.raises(ValueError, match="FIFO"):
            load_rows(fifo)
    folder = tmp_path / "matlab"
    folder.mkdir()
    for name in ("a_1.txt", "b_1.txt", "c_1_fp32.txt", "d_1_fp32.txt"):
        os.mkfifo(folder / name)
    with _prompt(), pytest.raises(ValueError, match="FIFO"):
        load_rows(folder)
    fifo = tmp_path / "rows.npz"
    with _prompt():
        assert not is_capture(fifo)
        with pytest.raises(CaptureError, match="FIFO"):
            load_capture(fifo)
        with pytest.raises(ValueError, match="FIFO"):
            load_inputs(fifo)
        with pytest.raises(ArrayFileError, match="FIFO"):
            load_array(str(fifo), "--gpu-output", raw_format="fp16", count=4)
    code, out, err = _cli(["identify", str(tmp_path / "rows.csv")])
    assert code == 2 and _one_line(err) and "FIFO" in err, err


def test_identify_on_a_device_names_the_device_not_a_pickle():
    code, out, err = _cli(["identify", "/dev/zero"])
    assert code == 2 and _one_line(err), err
    assert "pickle" not in err and "not a regular file" in err, err


def test_an_npz_claiming_a_huge_array_is_refused_before_allocation(tmp_path):
    """An 878-byte npz whose member claims 10^6 x 10^6 elements allocated them (ArrayMemoryError)."""
    small = _zip(tmp_path / "huge.npz", [("a.npy", _npy_header((10**6, 10**6)))])
    assert small.stat().st_size < 1000
    with pytest.raises(ValueError, match="10000000000..? elements"):
        load_rows(small)
    with pytest.raises(ValueError, match="10000000000..? elements"):
        load_array(f"{small}:a", "KERNEL")
    with pytest.raises(CaptureError, match="10000000000..? elements"):
        load_capture(small)
    code, out, err = _cli(["identify", str(small)])
    assert code == 2 and _one_line(err) and "elements" in err, err


def test_a_deflated_npz_is_checked_against_the_memory_limit_and_compression(tmp_path, monkeypatch):
    """A small deflated npz expands to far more than its size: the declared size is checked against
    the memory limit (FP16EMU_MAX_MEMORY_GIB here; ulimit -v too) before it is allocated, and a
    directory that declares more than deflate can give is refused."""
    rows = _rows(R=1 << 16)  # a: 2 MiB of one repeated pattern, deflated to a few KiB
    path = tmp_path / "rows.npz"
    np.savez_compressed(path, **rows)
    assert path.stat().st_size < 64 * 1024
    assert len(load_rows(path)) == 1 << 16
    monkeypatch.setenv("FP16EMU_MAX_MEMORY_GIB", str(1 / 1024))  # 1 MiB
    with pytest.raises(ValueError, match="over the memory limit"):
        load_rows(path)
    with pytest.raises(ValueError, match="over the memory limit"):
        load_array(f"{path}:a", "KERNEL")
    with pytest.raises(ValueError, match="over the memory limit"):
        load_inputs(path)
    monkeypatch.delenv("FP16EMU_MAX_MEMORY_GIB")
    # a central directory that claims 2 TB from 1 KiB of deflated bytes
    lying = tmp_path / "lying.npz"
    _zip(lying, [("a.npy", _npy_bytes(np.zeros(8, np.float16)))], zipfile.ZIP_DEFLATED)
    raw = bytearray(lying.read_bytes())
    central = raw.index(b"PK\x01\x02")
    raw[central + 24 : central + 28] = (0xFFFFFFF0).to_bytes(4, "little")  # uncompressed size
    lying.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="more than compression can give"):
        load_array(f"{lying}:a", "KERNEL")


def test_an_npz_with_two_members_of_one_name_is_refused(tmp_path):
    """zipfile keeps both; np.load took the last silently."""
    rows = _rows()
    members = [(f"{k}.npy", _npy_bytes(v)) for k, v in rows.items()]
    members.append(("d.npy", _npy_bytes(np.zeros(2, np.uint32))))
    with pytest.warns(UserWarning, match="Duplicate name"):
        path = _zip(tmp_path / "twice.npz", members)
    for load in (load_rows, lambda p: load_array(f"{p}:d", "KERNEL"), load_capture, load_inputs):
        with pytest.raises(ValueError, match="two members of one name"):
            load(path)


@pytest.mark.parametrize(
    ("c_word", "needle"),
    [
        ("-1", "not a hex"),
        ("1ffffffff", "wider than 32 bits"),  # 33 bits: was cut to 0xffffffff silently
        ("1" + "0" * 20, "wider than 32 bits"),  # past 64 bits: was an OverflowError
    ],
)
def test_csv_words_are_range_checked_not_cut(tmp_path, c_word, needle):
    path = tmp_path / "rows.csv"
    path.write_text(f"a,b,c,d\n3c00 3c00,3c00 3c00,{c_word},40000000\n")
    with pytest.raises(ValueError, match=needle):
        load_rows(path)
    code, out, err = _cli(["identify", str(path)])
    assert code == 2 and _one_line(err) and needle in err, err
    path.write_text("a,b,c,d\n-3c00 3c00,3c00 3c00,0,40000000\n")
    with pytest.raises(ValueError, match="not a hex"):
        load_rows(path)


def test_a_file_replaced_while_read_is_read_from_the_descriptor_checked(tmp_path, monkeypatch):
    """The header was checked on one open and the data loaded on another: an fp16 file swapped for an
    int64 one in between was loaded as int64 values cast to fp16."""
    path = tmp_path / "gpu.npy"
    good = np.arange(6, dtype=np.float16)
    np.save(path, good)
    other = tmp_path / "other.npy"
    np.save(other, np.arange(6, dtype=np.int64) + 1000)
    real = np.lib.format.read_array_header_1_0
    swapped = []

    def swap_after_header(fh, *args, **kwargs):
        out = real(fh, *args, **kwargs)
        if not swapped:
            os.replace(other, path)
            swapped.append(True)
        return out

    monkeypatch.setattr(np.lib.format, "read_array_header_1_0", swap_after_header)
    got = load_array(str(path), "--gpu-output").array
    assert swapped and got.dtype == np.float16 and np.array_equal(got, good)


@pytest.mark.parametrize("magic", [b"PK\x03\x04", b"\x93NUMPY"])
def test_a_raw_fp16_dump_starting_with_a_magic_is_read_when_its_format_is_given(tmp_path, magic, capsys):
    """Valid raw fp16 dumps whose first bytes happen to be an npz's or npy's magic were refused as
    malformed containers even with --gpu-output-format fp16 / compare --dtype --shape."""
    data = np.frombuffer(magic + bytes(range(8, 8 + 16 - len(magic))), np.uint16).copy()
    data[np.isnan(data.view(np.float16)) | np.isinf(data.view(np.float16))] = 0x3C00
    data = data[:8]
    raw = tmp_path / "gpu.f16"
    raw.write_bytes(magic + data.tobytes()[len(magic) :])
    expect = np.frombuffer(raw.read_bytes(), np.float16)
    got = load_array(str(raw), "--gpu-output", raw_format="fp16", count=8)
    assert got.raw_format == "fp16" and np.array_equal(got.array.view(np.uint16), expect.view(np.uint16))
    pair = load_pair(str(raw), str(raw), dtype="fp16", shape="2,4")
    assert pair.kernel.shape == (2, 4)
    # without the format it is still a malformed container, and a wrong size is still refused
    with pytest.raises(ArrayFileError):
        load_array(str(raw), "--gpu-output")
    with pytest.raises(ArrayFileError):
        load_array(str(raw), "--gpu-output", raw_format="fp16", count=7)
