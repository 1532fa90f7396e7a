"""Exhausted resources and unreachable services are exit 2 with one line, promptly (issue 31):
schedulers that cannot be reached or parsed, a LocalCluster that cannot open its files, the
address-space limit (``ulimit -v``) in the memory check, and a MemoryError anywhere in a command
(exit 1 means a FAIL verdict only)."""

import contextlib
import io
import re
import time

import pytest

from validation.cli import main
from validation.configs import parse_config
from validation.configs.limits import check_work, memory_limit
from validation.engine import Engine, check_scheduler


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _one_line_error(code, err, *words):
    assert code == 2 and re.match(r"fp16emu( [a-z]+)?: error: ", err) and err.count("\n") == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize(
    "address",
    [
        "tcp://127.0.0.1:1",
        "tcp://[::1]:1",
        "tcp://no-such-host.invalid:8786",
        "tls://127.0.0.1:1",
        "tcp://:",
        "tcp://h:x",
    ],
)
def test_a_scheduler_that_cannot_be_reached_or_parsed_is_refused_promptly(address):
    """It waited 30 s and ended in OSError (exit 1); tls:// in a TypeError; the bad ports in
    "invalid literal for int()" without naming --scheduler."""
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="^--scheduler"):
        check_scheduler(address, reach=True)
    assert time.monotonic() - t0 < 5


def test_the_commands_check_their_scheduler_before_any_work():
    code, out, err = _cli(["design", "k-sweep:1", "--seeds", "1", "--scheduler", "tcp://127.0.0.1:1", "--no-progress"])
    _one_line_error(code, err, "--scheduler tcp://127.0.0.1:1", "no Dask scheduler answers")
    assert out == ""
    code, out, err = _cli(["study", "reproduce", "--scheduler", "tcp://h:notaport", "--measured", "."])
    _one_line_error(code, err, "--scheduler", "port")


def test_a_local_cluster_that_cannot_open_its_files_names_the_limit(monkeypatch):
    """``ulimit -n 20`` with --scheduler local ended in "RuntimeError: Nanny failed to start"."""
    dd = pytest.importorskip("dask.distributed")

    def no_files(*args, **kwargs):
        try:
            raise OSError(24, "Too many open files")
        except OSError as err:
            raise RuntimeError("Nanny failed to start.") from err

    monkeypatch.setattr(dd, "LocalCluster", no_files)
    with Engine("local", 2, 2) as engine:
        with pytest.raises(ValueError, match=r"^--scheduler local: .*Nanny failed.*ulimit -n"):
            list(engine.map_unordered(abs, [1, 2]))


def test_the_memory_check_honours_the_address_space_limit(monkeypatch):
    """A run estimated at 8 GiB under a 1.2 GB ``ulimit -v`` passed the check and ended in
    ArrayMemoryError, exit 1."""
    import resource

    config = "-t f16 -batchsize=256 -in_channels=64 -out_channels=64 -in_h=104 -in_w=104 -fil_h=3 -fil_w=3"
    problem = parse_config(config).problem
    monkeypatch.delenv("FP16EMU_MAX_MEMORY_GIB", raising=False)
    assert 7 < check_work(problem, max_memory_gib=64).memory_bytes / 2**30 < 9
    real = resource.getrlimit
    monkeypatch.setattr(
        resource, "getrlimit", lambda r: (1_200_000_000, resource.RLIM_INFINITY) if r == resource.RLIMIT_AS else real(r)
    )
    assert memory_limit()[0] == pytest.approx(1_200_000_000, rel=1e-6)
    code, out, err = _cli(["run", config, "--check"])
    _one_line_error(code, err, "over the limit of 1.12 GiB", "ulimit -v")
    # an explicit, larger limit cannot pass what the process cannot allocate either
    monkeypatch.setenv("FP16EMU_MAX_MEMORY_GIB", "64")
    _one_line_error(*_cli(["run", config, "--check"])[::2], "ulimit -v")


@pytest.mark.parametrize("error", [MemoryError, "numpy"])
def test_a_memory_error_anywhere_is_exit_2_not_the_fail_code(monkeypatch, error):
    import numpy as np

    import validation.cli.listing as listing

    def out_of_memory(args):
        if error == "numpy":
            np.empty(1 << 62, np.uint8)  # numpy's ArrayMemoryError
        raise MemoryError()

    monkeypatch.setattr(listing, "_cmd_list", out_of_memory)  # read when the parser is built
    code, out, err = _cli(["list"])
    _one_line_error(code, err, "out of memory")
