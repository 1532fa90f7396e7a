"""Reading configs: every argument string of the 2022 suite, both spellings of the options, -p with
and without -x2, lit RUN lines, MIOpenDriver commands, suite names, invalid configs, and a property
test that any text either parses or raises ConfigError with a one-line message."""

from __future__ import annotations

import csv
import functools
import re
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.append(str(Path(__file__).resolve().parents[2]))
import reference_data as ref  # noqa: E402

from emu.conv import sub_gemms  # noqa: E402
from validation.configs import (  # noqa: E402
    Config,
    ConfigError,
    ConfigWarning,
    n_out_elements,
    parse_config,
    parse_lit_file,
)
from validation.suites import suite_config, suite_entries, suite_entry, suite_names  # noqa: E402


@functools.cache
def _reference_rows() -> tuple[dict, ...]:
    path = ref.require("rocmlir_f16_configs_2022.tsv")
    with open(path, newline="") as f:
        return tuple(csv.DictReader(f, delimiter="\t"))


def reference_rows() -> tuple[dict, ...]:
    return _reference_rows()


def quiet_parse(text: str, **kw) -> Config:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        return parse_config(text, **kw)


OPERATION = {"conv2d": "fwd", "conv2d_bwd_data": "bwd_data", "conv2d_bwd_weight": "bwd_weight"}

# ------------------------------------------------------------------------------------------------
# The 146 argument strings of the reference table


def test_all_146_reference_strings_parse_and_match_the_table():
    rows = reference_rows()
    assert len(rows) == 146
    for r in rows:
        args = r["miopen_gen_args"]
        cfg = quiet_parse(args, x2_defaults=True if r["populate_defaults_p"] == "1" else None)
        p = cfg.problem
        where = f"{r['source_file']}:{r['check_prefix']}"
        assert p.direction == OPERATION[r["operation"]], where
        assert cfg.dtype == r["data_type"], where
        got = (p.n, p.groups, p.c, p.h, p.w, p.k, p.y, p.x, p.stride, p.pad_h, p.pad_w, p.dilation)
        want = tuple(
            int(r[c]) for c in "batch_N groups_G in_channels_C in_h in_w out_channels_K fil_h_Y fil_w_X".split()
        ) + (
            (int(r["stride_h"]), int(r["stride_w"])),
            (int(r["pad_h_l"]), int(r["pad_h_r"])),
            (int(r["pad_w_l"]), int(r["pad_w_r"])),
            (int(r["dilation_h"]), int(r["dilation_w"])),
        )
        assert got == want, where
        assert (p.fil_layout, p.in_layout, p.out_layout) == (r["fil_layout"], r["in_layout"], r["out_layout"]), where
        assert (p.out_h, p.out_w) == (int(r["out_h"]), int(r["out_w"])), where
        assert n_out_elements(p) == int(r["n_out_elements"]) == cfg.n_out_elements, where
        subs = sub_gemms(p)
        assert subs == cfg.gemms, where
        assert {(s.g, s.m) for s in subs} == {(int(r["gemmG"]), int(r["gemmM"]))}, where
        # the table's gemmK is the whole reduction, (K/G)·Y·X for bwd_data (split over sub-GEMMs)
        assert sum(s.k for s in subs) == int(r["gemmK"]), where
        assert ",".join(p.gemm_k_order) == r["gemmK_order"], where
        if r["gemmN"] == "see_doc":
            assert p.direction == "bwd_data", where
        else:
            assert len(subs) == 1 and subs[0].n == int(r["gemmN"]), where
        # flags
        assert cfg.xdlops == (r["xdlops_flag"] != "none"), where
        assert cfg.pv_cpu and cfg.validation == "cpu", where
        assert cfg.random.rand_type == r["rand_type"].replace("(default)", ""), where
        if r["rand_spec"] == "none(default)":
            assert cfg.random.mode == "fixed" and cfg.seed is None, where
        else:
            assert cfg.random.mode == "seed" and cfg.seed == 1, where
        assert cfg.perf_config is None and r["perf_config"] == "none", where
        assert cfg.populate_defaults == (r["populate_defaults_p"] == "1"), where


def test_study_elements_match():
    for r in reference_rows():
        if r["study_n_elements"]:
            cfg = quiet_parse(r["miopen_gen_args"], x2_defaults=True if r["populate_defaults_p"] == "1" else None)
            assert cfg.n_out_elements == int(r["study_n_elements"])


def test_typo_dtype_parses_with_a_warning():
    row = next(r for r in reference_rows() if r["data_type"] == "f1")
    with pytest.warns(ConfigWarning, match="f1"):
        cfg = parse_config(row["miopen_gen_args"])
    assert cfg.dtype == "f1"


# ------------------------------------------------------------------------------------------------
# The shipped suite


def test_suite_file_matches_reference():
    rows = reference_rows()
    entries = suite_entries(fixme=None)
    assert len(entries) == len(rows) == 146
    for e, r in zip(entries, rows):
        assert e.args == r["miopen_gen_args"]
        assert e.fixme == (r["fixme"] == "1")
        assert e.n_out_elements == int(r["n_out_elements"])
        want = r["study_test_name"] or f"{Path(r['source_file']).stem}_{r['check_prefix']}"
        assert e.name == want


def test_suite_counts_and_lookup():
    names = suite_names()
    assert len(names) == 107 and len(set(names)) == 107
    assert len(suite_names(fixme=True)) == 39
    dirs = [suite_entry(n).direction for n in names]
    assert (dirs.count("fwd"), dirs.count("bwd_weight"), dirs.count("bwd_data")) == (77, 27, 3)
    big = suite_config("padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG1")
    assert big.n_out_elements == 205_520_896
    assert big.name == "padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG1"
    assert big.seed == 1 and big.rand_type == "float" and big.xdlops
    # by check-prefix suffix, and through parse_config
    assert suite_config("CHECK_RESNET50_F16_CONFIG1").name == big.name
    assert parse_config("padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG1").problem == big.problem
    assert suite_config("CHECK_RESNET50_F16_CONFIG1", xdlops=False).xdlops is False


def test_suite_config_drives_the_harness():
    from models.harness import harness_inputs

    cfg = suite_config("CHECK_ISSUE_71_1")
    assert cfg.direction == "bwd_weight"
    ins = harness_inputs(cfg.problem, **cfg.harness_kwargs())
    assert list(ins) == ["input", "output"]
    assert all(a.dtype.name == "float16" and a.size for a in ins.values())
    v = ins["input"].astype("float32")
    assert v.min() >= -1 and v.max() <= 1 and len(set(v.ravel().tolist())) > 100


def test_suite_p_rows_use_x2_defaults():
    e2e = suite_config("conv2d_harness_cpu_verifier_kyxc_nhwc_nhwk_f16_E2E_f16")
    assert e2e.n_out_elements == 25_690_112 and e2e.x2_defaults and not e2e.xdlops


def test_suite_unknown_name_lists_close_matches():
    with pytest.raises(ConfigError, match=r"did you mean .*CONFIG1") as ei:
        suite_config("padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG9")
    assert "\n" not in str(ei.value)
    with pytest.raises(ConfigError, match="not in suite"):
        parse_config("no_such_test_at_all")
    with pytest.raises(ConfigError, match="suite"):
        suite_names("rocmlir_2099")


# ------------------------------------------------------------------------------------------------
# -p and -x2


def test_populate_defaults_with_and_without_x2():
    plain = parse_config("-p -t f16")
    assert (plain.problem.n, plain.problem.c, plain.problem.k, plain.problem.h, plain.problem.y) == (128, 8, 128, 32, 3)
    assert plain.n_out_elements == 14_745_600 and not plain.xdlops
    x2 = parse_config("-p -x2 -t f16")
    assert (x2.problem.c, x2.problem.k, x2.problem.h, x2.problem.y) == (1024, 1024, 14, 1)
    assert x2.n_out_elements == 25_690_112 and x2.xdlops and x2.num_cu == 120
    assert parse_config("-p -t f16", x2_defaults=True).n_out_elements == 25_690_112
    assert parse_config("-p -x2 -t f16", x2_defaults=False).n_out_elements == 14_745_600
    # -p overwrites sizes given explicitly, as miopen-gen does
    assert parse_config("-p -batchsize=7 --padding_h=2").problem.n == 128
    assert (
        parse_config("-p=false -batchsize=7 -in_channels=2 -out_channels=2 -in_h=5 -in_w=5 -fil_h=1 -fil_w=1").problem.n
        == 7
    )
    e2e = "-p -pv -rand 1 -t f16 -fil_layout=gkyxc -in_layout=nhwgc -out_layout=nhwgk %s"
    assert parse_config(e2e).n_out_elements == 14_745_600
    assert parse_config(e2e, x2_defaults=True).n_out_elements == 25_690_112


# ------------------------------------------------------------------------------------------------
# Spellings

BASE = dict(
    operation="conv2d_bwd_weight",
    t="f16",
    fil_layout="kyxc",
    in_layout="nhwc",
    out_layout="nhwk",
    batchsize="16",
    in_channels="8",
    out_channels="12",
    in_h="9",
    in_w="11",
    fil_h="3",
    fil_w="3",
    dilation_h="2",
    dilation_w="1",
    conv_stride_h="2",
    conv_stride_w="1",
    padding_h="1",
    padding_w="2",
    groupsize="4",
    rand="3",
    rand_type="float",
    rand_min="1",
    rand_max="5",
    perf_config="64,32,32,4,2,2",
)


def spelled(style: int) -> str:
    parts = []
    for i, (k, v) in enumerate(BASE.items()):
        s = (style + i) % 4
        parts.append([f"-{k}={v}", f"--{k}={v}", f"-{k} {v}", f"--{k} {v}"][s])
    flags = [["-pv", "--pv", "-pv=true", "--pv=1"][style], ["-x2", "--x2", "-x2=TRUE", "--x2=True"][style]]
    return " ".join(parts + flags + [["-p=false", "--p=0", "-p=FALSE", "--p=False"][style]])


def test_every_spelling_gives_the_same_config():
    configs = [parse_config(spelled(s)) for s in range(4)]
    first = configs[0]
    for c in configs[1:]:
        assert c.problem == first.problem and c.random == first.random and c.xdlops == first.xdlops
    p = first.problem
    assert p.direction == "bwd_weight" and p.groups == 4 and p.pad_h == (1, 1) and p.pad_w == (2, 2)
    assert (p.fil_layout, p.in_layout, p.out_layout) == ("gkyxc", "nhwgc", "nhwgk")
    assert first.random.range == (1, 5) and first.seed == 3 and first.perf_config == "64,32,32,4,2,2"
    assert first.validation == "cpu" and first.xdlops and first.dtype == "f16"
    assert first.harness_kwargs() == dict(
        seed=3, rand_min=1, rand_max=5, rand_type="float", rand_side="both", dtype="f16"
    )


def test_aliases_padding_sides_and_layout_normalisation():
    c = parse_config(
        "-p=false -batchsize=1 -in_channels=4 -out_channels=4 -in_h=8 -in_w=8 -fil_h=3 -fil_w=3 "
        "-padding_h_l=1 -padding_h_r=2 -fil_layout=yxck -in_layout=nhwc -out_layout=nhwk -pv_with_gpu -prc=false"
    )
    assert c.problem.pad_h == (1, 2) and c.problem.fil_layout == "gyxck" and c.validation == "gpu"
    # miopen-gen pads the right side when the padded input is shorter than the filter and stride need
    c = parse_config(
        "-p=false -batchsize=1 -in_channels=1 -out_channels=1 -in_h=3 -in_w=5 -fil_h=5 -fil_w=1 --conv_stride_h=3"
    )
    assert c.problem.pad_h == (0, 2) and c.problem.out_h == 1


# ------------------------------------------------------------------------------------------------
# lit RUN lines

RUN_LINE = (
    "// RUN: miopen-gen %pv %random_data %xdlops --rand_type float --operation conv2d -t f16 -fil_layout=kyxc "
    "-in_layout=nhwc -out_layout=nhwk -in_channels=256 -batchsize=128 -in_h=28 -in_w=28 -out_channels=128 "
    "-fil_h=3 -fil_w=3 -dilation_h=1 -dilation_w=1 -conv_stride_h=1 -conv_stride_w=1 -padding_h=1 -padding_w=1 "
    "| mlir-miopen-driver -c | mlir-rocm-runner --shared-libs=%rocm_wrapper_library_dir/librocm-runtime-wrappers%shlibext,"
    "%linalg_test_lib_dir/libmlir_runner_utils%shlibext --entry-point-result=void | FileCheck %s --check-prefix=CHECK_ISSUE_127_11"
)


def test_run_line():
    c = parse_config(RUN_LINE)
    assert c.n_out_elements == 12_845_056 and c.xdlops and c.validation == "cpu" and c.seed == 1
    assert c.tool == "lit:miopen-gen"
    again = parse_config(RUN_LINE.replace("// RUN:", "  RUN:"))
    assert again.problem == c.problem and again.random == c.random and again.options == c.options
    gpu = parse_config(RUN_LINE.replace("%pv ", "%pv_with_gpu "))
    assert gpu.validation == "gpu"
    plain = parse_config(RUN_LINE, substitutions={"%xdlops": "", "%random_data": "-rand 7"})
    assert plain.xdlops is False and plain.seed == 7
    cont = RUN_LINE.replace(" -in_channels", " \\\n// RUN: -in_channels")
    assert parse_config(cont).problem == c.problem


def test_old_driver_style_and_rocmlir_gen_run_lines():
    old = (
        "// RUN: mlir-miopen-driver -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=256 -in_channels=1024 "
        "-in_h=14 -in_w=14 -out_channels=2048 -fil_h=1 -fil_w=1 --dilation_h=1 --dilation_w=1 --conv_stride_h=2 "
        "--conv_stride_w=2 --padding_h=0 --padding_w=0 -t f32 --operation conv2d -pv -c %random_data %xdlops "
        "| mlir-rocm-runner --entry-point-result=void | FileCheck %s --check-prefix=CHECK_NCHW_FWD_1"
    )
    c = parse_config(old)
    assert c.dtype == "f32" and c.problem.out_h == 7 and c.tool == "lit:mlir-miopen-driver"
    new = (
        "// RUN: rocmlir-gen --arch %arch -mfma=off -p=false -pv_with_gpu --operation conv -t f16 -batchsize=2 "
        "-in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 -rand 1 -rand_type float -rand_min 1 -rand_max 3 "
        "| rocmlir-driver -c | FileCheck %s"
    )
    c = parse_config(new)
    assert c.xdlops is False and c.validation == "gpu" and c.random.range == (1, 3) and c.arch == "gfx908"


def test_lit_file_and_several_run_lines():
    text = RUN_LINE + "\n// CHECK_ISSUE_127_11: [1 1 1]\n" + RUN_LINE.replace("-batchsize=128", "-batchsize=64")
    with pytest.raises(ConfigError, match="2 RUN commands"):
        parse_config(text)
    cs = parse_lit_file(text)
    assert [c.problem.n for c in cs] == [128, 64]


# ------------------------------------------------------------------------------------------------
# MIOpenDriver


def test_miopen_driver_commands():
    cmd = "MIOpenDriver convfp16 -n 128 -c 64 -H 56 -W 56 -k 256 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -g 1 -F 1 -t 1 -V 0"
    c = parse_config(cmd)
    p = c.problem
    assert (p.direction, p.n, p.c, p.h, p.k, p.y, p.pad_h, p.stride) == ("fwd", 128, 64, 56, 256, 3, (1, 1), (2, 2))
    assert c.dtype == "f16" and c.tool == "MIOpenDriver" and c.validation is None and c.xdlops is None
    assert p.out_h == 28
    long = (
        "./bin/MIOpenDriver convfp16 --batchsize 128 --in_channels 64 --in_h 56 --in_w 56 --out_channels 256 "
        "--fil_h 3 --fil_w 3 --pad_h 1 --pad_w 1 --conv_stride_h 2 --conv_stride_w 2 --forw 1 --verify 0"
    )
    assert parse_config(long).problem == p
    assert parse_config(cmd.replace("-F 1", "-F 2")).problem.direction == "bwd_data"
    assert parse_config(cmd.replace("-F 1", "-F 4")).problem.direction == "bwd_weight"
    nhwc = parse_config(cmd + " --in_layout NHWC --fil_layout NHWC --out_layout NHWC -g 4")
    assert (nhwc.problem.in_layout, nhwc.problem.fil_layout, nhwc.problem.groups) == ("nhwgc", "gkyxc", 4)
    assert parse_config("MIOpenDriver conv -n 2 -F 1").dtype == "f32"
    with pytest.raises(ConfigError, match="forw"):
        parse_config("MIOpenDriver convfp16 -n 2")
    assert parse_config("MIOpenDriver convfp16 -n 2", direction="bwd_weight").problem.direction == "bwd_weight"
    same = parse_config("MIOpenDriver convfp16 -H 8 -W 8 -y 3 -x 3 -u 2 -v 2 -z same -F 1")
    assert same.problem.pad_h == (0, 0) and parse_config("MIOpenDriver conv -y 3 -x 3 -z same -F 1").problem.pad_h == (
        1,
        1,
    )


# ------------------------------------------------------------------------------------------------
# Invalid configs

VALID = "-p=false -batchsize=2 -in_channels=8 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"


@pytest.mark.parametrize(
    "text,field",
    [
        (VALID.replace("-batchsize=2", "-batchsize=0"), "batchsize"),
        (VALID.replace("-in_h=6", "-in_h=-3"), "in_h"),
        (VALID.replace("-batchsize=2", ""), "batchsize"),
        (VALID + " --conv_stride_h=0", "conv_stride_h"),
        (VALID + " --padding_w=-1", "padding_w"),
        (VALID.replace("-in_h=6", "-in_h=1"), "output height"),
        (VALID + " -dilation_w=4", "output width"),
        (VALID + " -groupsize=3", "in_channels"),
        (VALID.replace("-out_channels=8", "-out_channels=6") + " -groupsize=4", "out_channels"),
        (VALID + " -fil_layout=kcyz", "fil_layout"),
        (VALID + " -in_layout=nqhw", "in_layout"),
        (VALID + " -out_layout=nkkhw", "out_layout"),
        (VALID + " -fil_layout=kycx", "fil_layout"),
        (VALID + " -batch_size=3", "batch_size"),
        (VALID + " --in_chanels=3", "in_chanels"),
        (VALID + " -operation=conv3d", "operation"),
        (VALID + " -rand_type=double", "rand_type"),
        (VALID + " -rand abc", "rand"),
        (VALID + " -rand_side=left", "rand_side"),
        (VALID + " -p=maybe", "-p"),
        (VALID + " -in_h=7", "in_h"),
        (VALID + " -in_w", "in_w"),
        (VALID + " -padding_h=1 -padding_h_l=2", "padding_h"),
        (VALID + " -out_h=9", "out_h"),
        (VALID + " -verifier=fpga", "verifier"),
        (VALID + " %bogus", "%bogus"),
        (VALID + " file1 file2", "positional"),
        (VALID + " -in_h=99999999999999999999999", "in_h"),
        ("MIOpenDriver convfp16 -n 0 -F 1", "batchsize"),
        ("MIOpenDriver convfp16 -c 6 -g 4 -F 1", "in_channels"),
        ("MIOpenDriver convfp16 -F 1 -Q 3", "-Q"),
        ("MIOpenDriver convfp16 -F 1 --in_layout NCWH", "in_layout"),
        ("MIOpenDriver convfp16 -F 1 -m trans", "mode"),
        ("MIOpenDriver pool -F 1", "sub-command"),
        ("MIOpenDriver convfp16 -F 1 -n", "needs a value"),
        ("MIOpenDriver convfp16 -F 1 -H 2 -y 5", "output height"),
        ("", "empty"),
        ("-t 'f16", "cannot split"),
    ],
)
def test_invalid_configs_name_the_field(text, field):
    with pytest.raises(ConfigError) as ei:
        parse_config(text)
    msg = str(ei.value)
    assert field in msg
    assert "\n" not in msg and msg.strip() == msg
    assert isinstance(ei.value, ValueError)


def test_unknown_option_suggests():
    with pytest.raises(ConfigError, match="did you mean .*in_channels"):
        parse_config(VALID + " --in_chanels=3")


# ------------------------------------------------------------------------------------------------
# gemm sizes


def test_gemms_of_a_strided_bwd_data_config():
    c = parse_config(
        VALID + " --operation conv2d_bwd_data --conv_stride_h=2 --conv_stride_w=2 --padding_h=1 --padding_w=1"
    )
    subs = c.gemms
    assert len(subs) == 4 and {s.m for s in subs} == {8}
    assert sum(s.k for s in subs) == 8 * 3 * 3
    assert {(s.i_ytilda, s.i_xtilda) for s in subs} == {(0, 0), (0, 1), (1, 0), (1, 1)}


# ------------------------------------------------------------------------------------------------
# Property: any text parses or raises ConfigError with one line


def _seed_texts() -> list[str]:
    texts = [
        VALID,
        RUN_LINE,
        spelled(0),
        spelled(3),
        "MIOpenDriver convfp16 -n 4 -c 8 -H 9 -W 9 -k 8 -y 3 -x 3 -p 1 -q 1 -F 1",
    ]
    texts.append("-p -x2 -t f16 %pv %random_data")
    try:
        rows = reference_rows()
    except pytest.skip.Exception:
        rows = ()
    texts += [r["miopen_gen_args"] for r in rows[::7]]
    return texts


_SEEDS = _seed_texts()
_WORDS = [
    "-p",
    "-x2",
    "-pv",
    "%pv",
    "%xdlops",
    "%random_data",
    "%s",
    "|",
    "-rand",
    "0",
    "-1",
    "99999999999",
    "-groupsize=3",
    "-fil_layout=kcyx",
    "-in_layout=nhwgc",
    "--operation=conv2d_bwd_data",
    "-F",
    "4",
    "RUN:",
    "-t",
    "f16",
    "--padding_h_l=2",
    "-in_h=1",
    "=",
    "--",
    "-",
    "'",
    '"',
    "\\",
    "MIOpenDriver",
    "convfp16",
    "-g",
]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(_SEEDS))
    words = text.split(" ")
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.integers(0, 5))
        i = draw(st.integers(0, max(len(words) - 1, 0)))
        if op == 0 and words:
            del words[i]
        elif op == 1:
            words.insert(i, draw(st.sampled_from(_WORDS)))
        elif op == 2 and words:
            words[i] = re.sub(r"\d+", lambda _m: str(draw(st.integers(-5, 10**6))), words[i])
        elif op == 3 and words:
            words.insert(i, words[i])
        elif op == 4 and words:
            words[i] = words[i].replace("=", " ", 1) if "=" in words[i] else words[i] + "=1"
        elif op == 5:
            words.insert(i, draw(st.text(max_size=8)))
    text = " ".join(words)
    if draw(st.booleans()) and text:
        cut = draw(st.integers(0, len(text)))
        text = text[:cut]
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_property_mutated_texts_parse_or_raise_config_error(text):
    _check_parse_or_config_error(text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60))
def test_property_random_texts_parse_or_raise_config_error(text):
    _check_parse_or_config_error(text)


def _check_parse_or_config_error(text):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = parse_config(text)
    except ConfigError as e:
        msg = str(e)
        assert msg and "\n" not in msg and "\r" not in msg
        return
    assert isinstance(cfg, Config)
    p = cfg.problem
    assert p.out_h >= 1 and p.out_w >= 1 and p.c % p.groups == 0 and p.k % p.groups == 0
    assert min(p.n, p.c, p.k, p.h, p.w, p.y, p.x, p.groups) >= 1
