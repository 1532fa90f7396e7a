"""The one array loader (validation.run.arrays) behind run --gpu-output, run --inputs and compare: what
it reads, and that every file it cannot read is refused before anything is allocated, with a
message naming the file and what is accepted (exit 2 on the command line, no traceback)."""

import os

import numpy as np
import pytest

from validation.cli import main
from validation.run.arrays import ArrayFileError, load_array, parse_shape


def _npy_header(descr: str, shape: tuple) -> bytes:
    """A hand-made version 1.0 .npy header (magic, length, dict, padding)."""
    d = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    pad = 64 - (10 + len(d) + 1) % 64
    d = d + b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d


def test_npy_npz_and_raw_dumps_are_read(tmp_path):
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    np.save(tmp_path / "a.npy", a)
    got = load_array(str(tmp_path / "a.npy"), "X")
    assert got.array.dtype == np.float16 and np.array_equal(got.array, a)
    np.savez(tmp_path / "b.npz", first=a, second=a.astype(np.float32) * 2)
    got = load_array(f"{tmp_path / 'b.npz'}:second", "X")
    assert got.key == "second" and np.array_equal(got.array, a.astype(np.float32) * 2)
    np.savez(tmp_path / "one.npz", only=a)
    assert load_array(str(tmp_path / "one.npz"), "X").key == "only"
    a.tofile(tmp_path / "raw.bin")
    got = load_array(str(tmp_path / "raw.bin"), "X", raw_format="fp16", count=12)
    assert np.array_equal(got.array, a.reshape(-1)) and got.raw_format == "fp16"
    a.astype(np.float32).tofile(tmp_path / "raw32.bin")
    got = load_array(str(tmp_path / "raw32.bin"), "X", raw_format="fp32", count=12)
    assert got.array.dtype == np.float32 and np.array_equal(got.array, a.reshape(-1).astype(np.float32))
    assert parse_shape("2,3x4") == (2, 3, 4)


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda p: p.write_bytes(b""), r"empty \(0 bytes\)"),
        (lambda p: p.write_bytes(_npy_header("<f2", (1000000,)) + b"\0" * 10), "truncated"),
        (lambda p: p.write_bytes(_npy_header(">f4", (2,)) + b"\0" * 8), "big-endian"),
        (lambda p: p.write_bytes(_npy_header("<f16", (2,)) + b"\0" * 32), "dtype float128"),
        (lambda p: p.write_bytes(_npy_header("<i4", (2,)) + b"\0" * 8), "dtype int32"),
        (lambda p: p.write_bytes(_npy_header("|O", (2,)) + b"\0" * 16), "Python objects"),
        (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': oops}\n"), "malformed .npy header"),
        # found by tests/validation/cli/test_fuzz_arrays.py: numpy's header parser raised tokenize.TokenError
        # (not a ValueError) for an unbalanced bracket, a traceback from compare and run --gpu-output
        (lambda p: p.write_bytes(_npy_header("<f2", (2,)).replace(b"{", b" ") + b"\0" * 4), "malformed .npy header"),
        (
            lambda p: p.write_bytes(_npy_header("<f2", (2,)).replace(b"(2,)", b"((2,)") + b"\0" * 4),
            "malformed .npy header",
        ),
        (lambda p: p.write_bytes(b"hello world, not an array"), "neither .npy nor .npz"),
        (lambda p: p.write_bytes(b"PK\x03\x04 broken zip"), "not a readable .npz"),
    ],
)
def test_files_that_are_not_arrays_are_refused_with_the_file_and_what_is_accepted(tmp_path, make, needle):
    path = tmp_path / "bad.npy"
    make(path)
    with pytest.raises(ArrayFileError, match=needle) as ei:
        load_array(str(path), "--gpu-output")
    msg = str(ei.value)
    assert "--gpu-output" in msg and str(path) in msg and "\n" not in msg
    assert "pickle" not in msg or "never loaded" in msg


def test_object_arrays_saved_by_numpy_are_refused_without_unpickling(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(ArrayFileError, match="Python objects .* never loaded"):
        load_array(str(tmp_path / "obj.npy"), "KERNEL")


def test_raw_dumps_must_match_the_tensor_size_and_special_files_are_refused(tmp_path):
    np.zeros(10, np.float16).tofile(tmp_path / "r.bin")
    with pytest.raises(ArrayFileError, match="20 bytes = 10 fp16 elements; the tensor has 12"):
        load_array(str(tmp_path / "r.bin"), "--gpu-output", raw_format="fp16", count=12)
    np.zeros(3, np.float16).tofile(tmp_path / "r3.bin")
    with pytest.raises(ArrayFileError, match="not a whole number of fp32"):
        load_array(str(tmp_path / "r3.bin"), "--gpu-output", raw_format="fp32", count=5)
    if os.path.exists("/dev/null"):
        with pytest.raises(ArrayFileError, match="not a regular file"):
            load_array("/dev/null", "--gpu-output", raw_format="fp16", count=1)
    with pytest.raises(ArrayFileError, match="is a directory"):
        load_array(str(tmp_path), "VALIDATION")
    np.savez(tmp_path / "two.npz", a=np.zeros(2), b=np.ones(2))
    with pytest.raises(ArrayFileError, match="holds 2 arrays .*name one as"):
        load_array(str(tmp_path / "two.npz"), "KERNEL")
    with pytest.raises(ArrayFileError, match="no array 'c'; it holds a, b"):
        load_array(f"{tmp_path / 'two.npz'}:c", "KERNEL")


def test_compare_refuses_a_pickle_and_dev_null_in_one_line(tmp_path, capsys):
    np.save(tmp_path / "v.npy", np.ones(4, np.float32))
    np.save(tmp_path / "obj.npy", np.array([object()], dtype=object), allow_pickle=True)
    for other in (str(tmp_path / "obj.npy"), "/dev/null", str(tmp_path / "nope.npy")):
        assert main(["compare", str(tmp_path / "v.npy"), other]) == 2
        err = capsys.readouterr().err
        assert err.startswith("fp16emu compare: error: KERNEL") and err.count("\n") == 1 and "Traceback" not in err
        assert "allow_pickle" not in err


def _damaged_npz(tmp_path, compressed: bool, where: str):
    import io

    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, a=np.arange(64, dtype=np.float16))
    raw = bytearray(buf.getvalue())
    if where == "local header":
        raw[0:4] = b"PK\x03\x04"
        raw[raw.index(b"PK\x01\x02") + 42 : raw.index(b"PK\x01\x02") + 46] = (3).to_bytes(4, "little")
    else:  # a byte of the member's data (past its 30-byte local header and name)
        raw[len(raw) // 3] ^= 0x5A
    path = tmp_path / f"damaged-{compressed}-{where.replace(' ', '_')}.npz"
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("where", ["data", "local header"])
def test_a_damaged_npz_member_is_refused_naming_it(tmp_path, compressed, where):
    """Found by tests/validation/cli/test_fuzz_arrays.py: zipfile.BadZipFile (bad CRC, bad local header)
    and zlib.error from a damaged member escaped as tracebacks from compare and run --gpu-output."""
    path = _damaged_npz(tmp_path, compressed, where)
    with pytest.raises(ArrayFileError) as ei:
        load_array(f"{path}:a", "KERNEL")
    msg = str(ei.value)
    assert f"{path}:a" in msg and "\n" not in msg, msg
    assert "cannot be read from the archive" in msg or "malformed .npy header" in msg or "truncated" in msg, msg


@pytest.mark.parametrize(
    "shape,needle",
    [((2**32, 2**32), "claims 18446744073709551616 elements"), ((4, -2), "negative dimension")],
)
def test_a_header_shape_is_counted_without_wrapping(tmp_path, shape, needle):
    """np.prod(shape, dtype=int64) wrapped (2^32 · 2^32 = 0) and let the header past the size check."""
    (tmp_path / "s.npy").write_bytes(_npy_header("<f2", shape) + b"\0" * 64)
    with pytest.raises(ArrayFileError, match=needle):
        load_array(str(tmp_path / "s.npy"), "KERNEL")


def test_run_checks_its_gpu_output_file_before_computing(tmp_path, capsys, monkeypatch):
    import validation.cli.run
    from validation.cli import main

    def boom(*a, **k):
        raise AssertionError("computed before checking --gpu-output")

    monkeypatch.setattr(validation.cli.run, "run", boom)  # what the command calls
    config = "conv2d_host_validation_f16_fwd_CHECK_PADDING3_f16"  # 2048 outputs
    empty, short, raw = tmp_path / "empty.npy", tmp_path / "short.npy", tmp_path / "gpu.f16"
    empty.write_bytes(b"")
    np.save(short, np.zeros(7, np.float16))
    np.zeros(2047, np.float16).tofile(raw)
    for argv, needle in (
        (["run", config, "--gpu-output", str(empty)], "empty.npy"),
        (["run", config, "--gpu-output", str(short)], "holds 7 elements"),
        (["run", config, "--gpu-output", str(raw), "--gpu-output-format", "fp16"], "the tensor has 2048"),
        (["run", config, "--gpu-output", str(raw)], "neither .npy nor .npz"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
