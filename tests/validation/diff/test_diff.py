"""``fp16emu diff`` on synthetic capture pairs written with the capture format
(validation.captures.format.save): outputs emulated by named schedules, one with a planted bug."""

from __future__ import annotations

import json

import numpy as np
import pytest

from emu.schedule import Schedule
from validation.captures import load_capture
from validation.captures.format import save
from validation.captures.gemms import Candidate, Variant, run_candidate
from validation.cli import main
from validation.diff import diff_captures, shared_rows

K, N = 512, 32
# fp32 outputs (fp32 operands, TF32 off: the fp32 FMA unit), where two orders rarely give the same bits
S2 = Schedule(k_tile=64, splits=2, split_rule="ceil", reduction="workspace", output="fp32")
S4 = Schedule(k_tile=64, splits=4, split_rule="ceil", reduction="workspace", output="fp32")


def _fp32(rng, shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def _write(path, A, B, schedule, drop_k=None):
    """An fp32 mm capture whose output the fp32 FMA unit computes with ``schedule``; ``drop_k``: the k
    range (start, stop) dropped from rows 0..15 of the output (a planted split-K bug)."""
    fields = {"op": "mm", "A": A, "B": B, "dtype": "float32", "allow_tf32": False, "gpu": "NVIDIA H200"}
    save(path, {**fields, "out": np.zeros((A.shape[0], B.shape[1]), np.float32)})
    cap = load_capture(path)
    out = run_candidate(cap, Candidate("fma32", Variant(), schedule))
    if drop_k is not None:
        A2 = A.copy()
        A2[:16, drop_k[0] : drop_k[1]] = 0
        save(path, {**fields, "A": A2, "out": out})
        bad = run_candidate(load_capture(path), Candidate("fma32", Variant(), schedule))
        out[:16] = bad[:16]
    save(path, {**fields, "out": out})
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    d = tmp_path_factory.mktemp("diff")
    rng = np.random.default_rng(40)
    A, B = _fp32(rng, (48, K)), _fp32(rng, (K, N))
    big = _fp32(rng, (64, K))
    big[5:6] = A[:1]
    return {
        "s2": _write(d / "s2.npz", A, B, S2),
        "s2b": _write(d / "s2b.npz", A, B, S2),
        "s4": _write(d / "s4.npz", A, B, S4),
        "bug": _write(d / "bug.npz", A, B, S2, drop_k=(448, 512)),
        "b1": _write(d / "b1.npz", A[:1].copy(), B, S2),
        "b64": _write(d / "b64.npz", big, B, S4),
        "b64same": _write(d / "b64same.npz", big, B, S2),
    }


def test_two_split_counts_read_rounding_and_name_both(pairs, capsys):
    d = diff_captures(pairs["s2"], pairs["s4"])
    assert d.n_differ > 0 and d.reading == "rounding" and d.exit_code == 0
    j = d.json()
    assert "2 splits" in j["schedules"]["a"] and "4 splits" in j["schedules"]["b"]
    assert j["a"]["reading"] == "rounding" and j["b"]["schedule"]["splits"] == 4
    assert j["relation"]["kind"] == "same" and d.schedule_changed is True
    assert main(["diff", str(pairs["s2"]), str(pairs["s4"]), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["reading"] == "rounding"


def test_identical_outputs_read_same_bits(pairs, capsys):
    d = diff_captures(pairs["s2"], pairs["s2b"])
    assert d.reading == "same-bits" and d.n_differ == 0 and d.exit_code == 0
    assert main(["diff", str(pairs["s2"]), str(pairs["s2b"])]) == 0
    assert "reading: same-bits" in capsys.readouterr().out


def test_a_planted_bug_reads_bug_suspect_and_names_the_capture(pairs, capsys):
    d = diff_captures(pairs["s2"], pairs["bug"])
    assert d.reading == "bug-suspect" and d.suspects == ["b"] and d.exit_code == 1
    assert d.n_differ > 0 and d.sizes["max_abs"] > 0.1
    assert main(["diff", str(pairs["s2"]), str(pairs["bug"])]) == 1
    assert "BUG SUSPECT: no schedule reproduces B" in capsys.readouterr().out


def test_batch_1_inside_batch_64(pairs):
    d = diff_captures(pairs["b1"], pairs["b64"])
    assert d.relation == ("rows", 5, 1)
    assert d.reading in ("rounding", "same-bits")
    assert d.schedule_changed is True  # S2 on batch 1, S4 on batch 64: no one schedule gives both
    assert "B's operands hold A's as rows 5..5" in d.text()
    same = diff_captures(pairs["b1"], pairs["b64same"])
    assert same.reading == "same-bits" and same.schedule_changed is False


def test_rows_are_found_from_the_operands_not_the_names(pairs):
    a, b = load_capture(pairs["b1"]), load_capture(pairs["b64"])
    assert shared_rows(a, b) == ("rows", 5, 1)
    assert shared_rows(b, a) is None
    b.operands["B"] = b.operands["B"].copy()
    b.operands["B"][0, 0] ^= 1  # another B: no longer the same op's operands
    assert shared_rows(a, b) is None


def test_unusable_pairs_exit_2(pairs, capsys):
    assert main(["diff", str(pairs["b64"]), str(pairs["b1"])]) == 2
    assert "give the smaller capture first" in capsys.readouterr().err
    other = pairs["s2"].parent / "other.npz"
    rng = np.random.default_rng(1)
    _write(other, _fp32(rng, (48, K)), _fp32(rng, (K, N)), S2)
    assert main(["diff", str(pairs["s2"]), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fp16emu diff: error: operands:") and "\n" == err[-1] and err.count("\n") == 1
