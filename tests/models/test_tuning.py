"""rocMLIR 2022 tuning: perf-config strings, instruction selection, k orders, defaults, KBlocks."""

import csv
import functools
from pathlib import Path

import numpy as np
import pytest

from emu.conv import ConvProblem, sub_gemms
from emu.gemm import GemmOrder
from models import tuning as T

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"


def require(name: str) -> Path:
    """A file of ../shared/reference; skips the test when the folder is not beside the repo."""
    path = REFERENCE / name
    if not path.exists():
        pytest.skip(f"reference data not found: {path} (expected ../shared/reference beside the repo)")
    return path


# --- perf-config strings ------------------------------------------------------------------------


def test_xdlops_perf_config_both_ways():
    t = T.parse_perf_config("128,128,4,64,64,4,0,0", xdlops=True)
    assert t == T.XdlopsTuning(128, 128, 4, 64, 64, 4)
    assert t.to_perf_config() == "128,128,4,64,64,4,0,0"
    assert t.block_size == 256 and t.k_values_per_block == 16
    # the 6-field form (without the two copy flags) is accepted and means flags 0
    assert T.parse_perf_config(" 16, 16,16,16,16,1 ", xdlops=True) == T.XdlopsTuning(16, 16, 16, 16, 16, 1)
    flags = T.parse_perf_config("32,64,4,32,64,4,1,0", xdlops=True)
    assert flags.a_copy_more_gemm_k is True and flags.to_perf_config() == "32,64,4,32,64,4,1,0"
    for entry in T.XDLOPS_TUNINGS_2022:
        assert T.parse_perf_config(entry.to_perf_config(), xdlops=True) == entry


def test_nonxdlops_perf_config_both_ways():
    t = T.parse_perf_config("64,32,32,4,2,2", xdlops=False)
    assert t == T.NonXdlopsTuning(64, 32, 32, 4, 2, 2)
    assert str(t) == "64,32,32,4,2,2"
    for entry in T.NONXDLOPS_TUNINGS_2022:
        assert T.parse_perf_config(entry.to_perf_config(), xdlops=False) == entry


@pytest.mark.parametrize(
    "text, xdlops, names",
    [
        ("128,128,4,64,64", True, ["6 or 8", "m_per_block"]),
        ("64,32,32,4,2,2,0,0", False, ["6", "block_size"]),
        ("128,128,four,64,64,4", True, ["k_per_block", "'four'"]),
        ("128,128,4,64,64,-4", True, ["kpack"]),
        ("128,128,4,64,64,2", True, ["kpack", "allowed: 1, 4, 5, 6, 7, 8"]),
        ("128,128,4,128,128,4", True, ["m_per_wave x n_per_wave", "128x128", "allowed:", "64x64", "16x16"]),
        ("128,128,4,64,64,4,2,0", True, ["a_copy_more_gemm_k", "0 or 1"]),
        ("512,128,128,16,4,4", False, ["block_size", "allowed: 64, 128, 256"]),
        ("256,128,128,16,8,4", False, ["m_per_thread", "allowed: 2, 3, 4"]),
        ("0,128,128,16,4,4", False, ["block_size"]),
    ],
)
def test_perf_config_errors_name_the_field(text, xdlops, names):
    with pytest.raises(T.PerfConfigError) as err:
        T.parse_perf_config(text, xdlops=xdlops)
    message = str(err.value)
    assert isinstance(err.value, ValueError) and "\n" not in message
    for name in names:
        assert name in message


def test_as_tuning_kinds():
    assert T.as_tuning(None, True) is None
    assert T.as_tuning("16,16,16,16,16,1", True) == T.XdlopsTuning(16, 16, 16, 16, 16, 1)
    assert T.as_tuning((64, 32, 32, 4, 2, 2), False) == T.NonXdlopsTuning(64, 32, 32, 4, 2, 2)
    with pytest.raises(T.PerfConfigError, match="non-xdlops"):
        T.as_tuning(T.XdlopsTuning(16, 16, 16, 16, 16, 1), False)


# --- instruction selection ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "wave, name, k, tile",
    [
        ((128, 64), "v_mfma_f32_32x32x4f16", 4, None),
        ((64, 128), "v_mfma_f32_32x32x4f16", 4, None),
        ((64, 64), "v_mfma_f32_32x32x4f16", 4, None),
        ((64, 32), "v_mfma_f32_32x32x4f16", 4, None),
        ((32, 64), "v_mfma_f32_32x32x4f16", 4, None),
        ((64, 16), "v_mfma_f32_16x16x4f16", 4, None),
        ((16, 64), "v_mfma_f32_16x16x4f16", 4, None),
        ((8, 64), "v_mfma_f32_4x4x4f16", 4, None),
        ((4, 64), "v_mfma_f32_4x4x4f16", 4, None),
        ((32, 32), "v_mfma_f32_32x32x8f16", 8, 8),
        ((16, 16), "v_mfma_f32_16x16x16f16", 16, 16),
    ],
)
def test_selection_table(wave, name, k, tile):
    """rocmlir_kernels_2022.md §2(c) selection table (XdlopsCodeSelection.h), KPack 1."""
    m, n = wave
    instr = T.select_instruction(T.XdlopsTuning(m * 2 if m < 128 else m, n, 16, m, n, 1))
    assert (instr.name, instr.k, instr.k_tile, instr.group) == (name, k, tile, 4)
    assert instr.reduction == (tile is not None)


def test_kpack_moves_the_reduction_tile():
    assert T.select_instruction(T.XdlopsTuning(16, 16, 16, 16, 16, 4)).k_tile == 16
    assert T.select_instruction(T.XdlopsTuning(16, 16, 16, 16, 16, 8)).k_tile == 32
    assert T.select_instruction(T.NonXdlopsTuning(64, 32, 32, 4, 2, 2)).name == "v_fma_f32"


# --- k orders ----------------------------------------------------------------------------------


def _instr(wave, kpack=1):
    return T.select_instruction(T.XdlopsTuning(wave[0], wave[1], 16, wave[0], wave[1], kpack))


def test_16x16x16_groups_match_spec():
    """SPEC §5: within each 16-wide k tile the groups are {b, b+4, b+8, b+12}."""
    order = T.mfma_k_order(48, _instr((16, 16)), 1)
    assert sorted(order) == list(range(48))
    for t0 in (0, 16, 32):
        groups = [order[t0 + 4 * b : t0 + 4 * b + 4] for b in range(4)]
        assert groups == [tuple(t0 + b + 4 * i for i in range(4)) for b in range(4)]


def test_32x32x8_groups_are_strided_by_2():
    assert T.mfma_k_order(16, _instr((32, 32)), 1) == (0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15)


def test_consecutive_groups_are_identity():
    assert T.mfma_k_order(64, _instr((64, 64)), 4) is None  # 32x32x4, KPack 4: 4 consecutive gemmK
    assert T.mfma_k_order(64, _instr((8, 64)), 1) is None
    assert T.mfma_k_order(64, _instr((16, 16), kpack=4), 4) is None  # k-reduction, one KPack vector per block


def test_kpack8_reduction_order_is_a_permutation():
    order = T.mfma_k_order(64, _instr((16, 16), kpack=8), 8)
    assert sorted(order) == list(range(64))
    assert order[:8] == (0, 1, 2, 3, 8, 9, 10, 11)  # blocks 0 and 1, first k_base slice of their vectors


def test_partial_tile_is_unsupported():
    with pytest.raises(T.UnsupportedTuning, match="k tile"):
        T.mfma_k_order(20, _instr((16, 16)), 1)


# --- plans on synthetic problems ------------------------------------------------------------------

BWD_WEIGHT1 = ConvProblem("bwd_weight", 64, 64, 7, 7, 64, 1, 1)  # conv2d_host_validation_f16_bwd.mlir
ISSUE_71_1 = ConvProblem("bwd_weight", 32, 32, 7, 7, 32, 1, 1)
PADDED_FWD = ConvProblem("fwd", 4, 3, 16, 16, 64, 7, 7, pad_h=(3, 3), pad_w=(3, 3), stride=(2, 2))  # gemmK 147


def test_default_xdlops_is_the_first_valid_entry():
    p = ConvProblem("fwd", 8, 64, 8, 8, 128, 1, 1)
    (plan,) = T.plan(p, "xdlops")
    assert plan.tuning == T.XDLOPS_TUNINGS_2022[0] and plan.default and not plan.padded
    assert plan.order == GemmOrder() and plan.instruction.name == "v_mfma_f32_32x32x4f16"


def test_padding_kernels_pad_gemm_k():
    (x,) = T.plan(PADDED_FWD, "xdlops")
    assert x.padded and x.pad_k == 4 and x.tuning == T.XdlopsTuning(32, 64, 4, 32, 64, 4)
    assert x.order.sequence(147)[-1] == -1 and len(x.order.sequence(147)) == 148
    (n,) = T.plan(PADDED_FWD, "nonxdlops")
    assert n.padded and n.pad_k == 16 and len(n.order.sequence(147)) == 160


def test_bwd_weight_split_k_and_override():
    (p,) = T.plan(BWD_WEIGHT1, "xdlops")
    assert p.atomic and p.kblocks == 8 and p.order.split_k == 8
    (s,) = T.plan(BWD_WEIGHT1, "xdlops", rules="2022-09")
    assert s.kblocks == 4 and s.tuning == T.XdlopsTuning(32, 64, 4, 32, 64, 4)
    (o,) = T.plan(BWD_WEIGHT1, "xdlops", kblocks_override=16)
    assert o.kblocks == 16 and o.kblocks_rule == 8 and o.order.split_k == 16
    (r,) = T.plan(BWD_WEIGHT1, "xdlops", combine="random", combine_seed=3)
    assert r.order.combine == "random" and r.order.combine_seed == 3
    with pytest.raises(T.InvalidTuning, match="batch"):
        T.plan(BWD_WEIGHT1, "xdlops", kblocks_override=3)
    with pytest.raises(T.InvalidTuning, match="split-K"):
        T.plan(PADDED_FWD, "xdlops", kblocks_override=2)
    (n,) = T.plan(BWD_WEIGHT1, "nonxdlops")
    assert not n.atomic and n.order.split_k == 1


def test_issue_71_1_is_16x16x16_with_two_strided_chains():
    """reproduction_findings.md §5: {16,16,16,16,16,1}, strided groups, KBlocks 2."""
    (p,) = T.plan(ISSUE_71_1, "xdlops")
    assert p.tuning == T.XdlopsTuning(16, 16, 16, 16, 16, 1) and p.kblocks == 2
    assert p.order.k_order[:8] == (0, 4, 8, 12, 1, 5, 9, 13)


def test_explicit_tuning_is_checked_against_the_problem():
    p = ConvProblem("fwd", 8, 64, 8, 8, 128, 1, 1)  # gemm 128 x 512 x 64
    (plan,) = T.plan(p, "xdlops", "16,16,16,16,16,1,0,0")
    assert not plan.default and plan.order.k_order[:4] == (0, 4, 8, 12)
    with pytest.raises(T.InvalidTuning, match="isValidGemm"):
        T.plan(PADDED_FWD, "xdlops", "128,128,4,64,64,4,0,0")
    with pytest.raises(T.InvalidTuning, match="Ignore KReduction"):
        T.plan(p, "xdlops", "16,16,4,16,16,4,0,0")
    (anyrule,) = T.plan(p, "xdlops", "16,16,4,16,16,4,0,0", rules="2022-09")
    assert anyrule.order.k_order is None  # KPack 4 = k_base: consecutive groups
    with pytest.raises(T.UnsupportedTuning, match="k_per_block 4"):
        T.plan(p, "xdlops", "16,16,4,16,16,1,0,0")
    (what_if,) = T.plan(PADDED_FWD, "xdlops", "128,128,4,64,64,4,0,0", rules="any")
    assert what_if.pad_k == 16
    with pytest.raises(ValueError, match="rules"):
        T.plan(p, "xdlops", rules="2023")


def test_nonxdlops_list_entries_that_never_validate():
    """{128,64,128,…} gives 1x2 thread clusters with block size 128: rocMLIR's check rejects it."""
    size = (1, 128, 128, 64)
    for t in T.NONXDLOPS_TUNINGS_2022[6:9]:
        assert T.rules._nonxdl_failure(t, size, "fwd") is not None
    assert T.rules._nonxdl_failure(T.NONXDLOPS_TUNINGS_2022[0], size, "fwd") is None


# --- the 2022 suite -------------------------------------------------------------------------------

_OPS = {"conv2d": "fwd", "conv2d_bwd_weight": "bwd_weight", "conv2d_bwd_data": "bwd_data"}


@functools.lru_cache(maxsize=1)
def _rows():
    with open(require("rocmlir_f16_configs_2022.tsv")) as f:
        return [r for r in csv.DictReader(f, delimiter="\t") if r["fixme"] == "0"]


def _problem(r) -> ConvProblem:
    i = int
    return ConvProblem(
        _OPS[r["operation"]],
        i(r["batch_N"]),
        i(r["in_channels_C"]),
        i(r["in_h"]),
        i(r["in_w"]),
        i(r["out_channels_K"]),
        i(r["fil_h_Y"]),
        i(r["fil_w_X"]),
        i(r["groups_G"]),
        (i(r["pad_h_l"]), i(r["pad_h_r"])),
        (i(r["pad_w_l"]), i(r["pad_w_r"])),
        (i(r["stride_h"]), i(r["stride_w"])),
        (i(r["dilation_h"]), i(r["dilation_w"])),
        r["in_layout"],
        r["fil_layout"],
        r["out_layout"],
    )


def _row(source_stem: str, prefix: str):
    (r,) = [r for r in _rows() if r["check_prefix"] == prefix and r["source_file"].endswith(source_stem + ".mlir")]
    return r


def test_suite_rows_have_no_perf_config_and_every_order_is_a_permutation():
    rows = _rows()
    assert len(rows) == 107 and {r["perf_config"] for r in rows} == {"none"}
    for r in rows:
        p = _problem(r)
        subs = sub_gemms(p)
        if r["gemmN"].isdigit():  # bwd_data rows say "see_doc": they split into sub-GEMMs
            assert [(s.m, s.n, s.k) for s in subs] == [(int(r["gemmM"]), int(r["gemmN"]), int(r["gemmK"]))]
        for kind in ("xdlops", "nonxdlops"):
            for s, plan in zip(subs, T.plan(p, kind)):
                seq = plan.order.sequence(s.k)
                assert np.array_equal(np.sort(seq[seq >= 0]), np.arange(s.k)), (r["check_prefix"], kind)
                assert len(seq) % plan.pad_k == 0


@pytest.mark.parametrize(
    "stem, prefix, tuning, instruction, pad_k",
    [
        ("conv2d_host_validation_f16_fwd", "CHECK_KYXC_NHWC_NHWK1", (128, 128, 4, 64, 64, 4), "32x32x4f16", 1),
        ("conv2d_host_validation_f16_fwd", "CHECK_KYXC_NHWC_NHWK2", (32, 64, 4, 32, 64, 1), "32x32x4f16", 1),
        ("conv2d_host_validation_f16_fwd", "CHECK_ISSUE_41_7", (128, 128, 8, 64, 64, 1), "32x32x4f16", 1),
        ("conv2d_host_validation_f16_fwd", "CHECK_ISSUE_41_2", (8, 64, 8, 8, 64, 1), "4x4x4f16", 1),
        ("padding_kernel_gemmK", "CHECK_RESNET50_F16_CONFIG1", (32, 64, 4, 32, 64, 4), "32x32x4f16", 4),
        ("conv2d_host_validation_f16_bwd", "CHECK_ISSUE_71_1", (16, 16, 16, 16, 16, 1), "16x16x16f16", 1),
        ("conv2d_host_validation_f16_bwd", "CHECK_BWD_WEIGHT1", (8, 64, 8, 8, 64, 1), "4x4x4f16", 1),
    ],
)
def test_default_tuning_of_suite_shapes(stem, prefix, tuning, instruction, pad_k):
    (plan,) = T.plan(_problem(_row(stem, prefix)), "xdlops")
    assert plan.tuning == T.XdlopsTuning(*tuning)
    assert plan.instruction.name == "v_mfma_f32_" + instruction and plan.pad_k == pad_k


def test_kblocks_of_the_27_bwd_weight_rows():
    """rocmlir_kernels_2022.md §2(c) and reproduction_findings.md §5: the padding-kernel wrw tests run
    no atomics; ISSUE_71_1 has KBlocks 2 (deterministic); 21 of 27 differ between two same-seed
    runs, which needs at least 3 addends; BWD_WEIGHT1's Sep-2022 value 4 is ruled out by the data."""
    bwd = [r for r in _rows() if r["operation"] == "conv2d_bwd_weight"]
    assert len(bwd) == 27
    kb = {}
    for r in bwd:
        (plan,) = T.plan(_problem(r), "xdlops")
        kb[(r["source_file"].rsplit("/", 1)[1], r["check_prefix"])] = plan.kblocks if plan.atomic else None
    padding = {k for k in kb if k[0].startswith("padding_kernel")}
    assert len(padding) == 4 and all(kb[k] is None for k in padding)
    assert kb[("conv2d_host_validation_f16_bwd.mlir", "CHECK_ISSUE_71_1")] == 2
    assert kb[("conv2d_host_validation_f16_bwd.mlir", "CHECK_BWD_WEIGHT1")] == 8  # 2022-09 rules: 4 (excluded)
    # The one row the rule cannot explain: hardware runs were identical (DOC §2(c)) but
    # calculateKBlockNum gives 4 addends, under both rule sets. Kept visible here, not hidden.
    assert kb[("conv2d_host_validation_f16_bwd.mlir", "CHECK_ISSUE_127_6")] == 4
    rest = {k: v for k, v in kb.items() if k not in padding and k[1] not in ("CHECK_ISSUE_71_1", "CHECK_ISSUE_127_6")}
    assert len(rest) == 21 and all(v >= 3 for v in rest.values()), rest
    assert kb[("conv2d_host_validation_f16_bwd.mlir", "CHECK_ISSUE_71_2")] > 2


def test_both_rule_sets_give_the_same_orders_outside_kblocks():
    """The rule sets differ only in rejecting KPack 4 for small blocks: the selected instruction class
    (consecutive groups of 4, or the same strided tiles) and padding never change."""
    for r in _rows():
        p = _problem(r)
        a, b = T.plan(p, "xdlops", rules="2022-08"), T.plan(p, "xdlops", rules="2022-09")
        assert [(x.order.k_order, x.pad_k, x.instruction.k_tile) for x in a] == [
            (y.order.k_order, y.pad_k, y.instruction.k_tile) for y in b
        ], r["check_prefix"]
