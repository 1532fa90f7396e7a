"""Property-based fuzzing (hypothesis) of what users hand fp16emu: config texts, command lines,
API arguments, cache files and measured files (issue 13). Every input ends in a clear answer:
exit 0 or 2 (never a traceback, one line on stderr for 2), a Config or a one-line ConfigError, a
valid object or a ValueError/TypeError, a cached value or None — in bounded time, with nothing
computed (``run --check`` only).

Sized to run in well under a minute inside ``make test``; ``make fuzz`` runs the same properties
with ``FP16EMU_FUZZ_SCALE`` times more examples and, with ``FP16EMU_FUZZ_REPORT=FILE``, writes the
counts (inputs tried, answers) that RELIABILITY.md quotes.
"""

import json
import string
import time
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emu.conv import ConvProblem, sub_gemms
from emu.gemm import GemmOrder, strided_k_order
from models.units import unit
from tests.fuzzing import fuzz, tally, write_report
from validation.cli import main
from validation.configs import ConfigError, estimate_work, parse_config
from validation.run import plan
from validation.study.cache import Cache, entry_checksum, valid_entry
from validation.study.measured import read_measured


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    yield
    write_report()


_tally = tally


# --- config texts --------------------------------------------------------------------------------

SIZES = "-batchsize=2 -in_channels=4 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"
TEMPLATES = [
    f"--operation conv2d -t f16 {SIZES}",
    f"--operation conv2d_bwd_data -t f16 {SIZES} --conv_stride_h=2 --conv_stride_w=3",
    f"--operation conv2d_bwd_weight -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk {SIZES}",
    f"// RUN: miopen-gen %pv %random_data %xdlops -t f16 {SIZES} --padding_h=1 | mlir-miopen-driver -c",
    "MIOpenDriver convfp16 -n 2 -c 4 -H 6 -W 6 -k 4 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -F 1",
    "MIOpenDriver convfp16 -n 1 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -u 2 -v 2 -F 2",
    "conv2d_host_validation_f16_fwd_CHECK_PADDING3_f16",
]
TOKENS = [
    "-t f32",
    "-t bf16",
    "-t i8",
    "-t f16",
    "-t",
    "--conv_stride_w=100000000",
    "--conv_stride_h=2147483647",
    "-u 100000000",
    "-v 999999999",
    "-batchsize=1000000",
    "-in_channels=1000000",
    "-in_h=9223372036854775807",
    "-fil_w=100000",
    "-n 2000000000",
    "-groupsize=3",
    "--padding_h=100000",
    "--dilation_w=65536",
    "-rand 4294967297",
    "-rand 2147483647",
    "-rand_min=-40000",
    "-p",
    "-x2",
    "%pv",
    "%xdlops",
    "%unknown",
    "|",
    "'",
    '"',
    "\\",
    "--",
    "-F 0",
    "-F 7",
    "-g 2",
    "-fil_layout=qqqq",
    "-in_layout=nhwc",
    "0x7fffffff",
    "-0",
    "\x00",
    "\u00e9",
]


@st.composite
def config_texts(draw):
    text = draw(st.sampled_from(TEMPLATES))
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "token", "token", "number"]))
        if action == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 8)) :]
        elif action == "insert":
            text = text[:pos] + draw(st.text(alphabet="-=0123456789abcxyz %|", max_size=5)) + text[pos:]
        elif action == "number":
            text = text[:pos] + str(draw(st.integers(-(2**65), 2**65))) + text[pos:]
        else:
            text = text[:pos] + " " + draw(st.sampled_from(TOKENS)) + " " + text[pos:]
    return text


ANY_TEXT = st.one_of(config_texts(), st.text(max_size=60), st.text(alphabet=string.printable, max_size=200))


@fuzz(150)
@given(text=ANY_TEXT)
def test_a_config_text_is_read_and_planned_or_refused_in_one_line(text):
    t0 = time.perf_counter()
    answer = "planned"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConfigWarning for an unknown -t: refused next
            config = parse_config(text)
            plan(config)
    except ConfigError as err:
        answer = "ConfigError"
        assert str(err) and "\n" not in str(err), repr(str(err))
    except ValueError as err:  # the models' own checks (hw, kernel, validator): one line too
        answer = "ValueError"
        assert str(err) and "\n" not in str(err), repr(str(err))
    _tally("parse_config + plan", answer, time.perf_counter() - t0)


# --- command lines ---------------------------------------------------------------------------------

EXTRA_OPTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("--seed"), st.integers(-(2**70), 2**70).map(str)),
        st.tuples(st.just("--rand-min"), st.integers(-(2**20), 2**20).map(str)),
        st.tuples(st.just("--rand-max"), st.sampled_from(["5", "x", "1e3", ""])),
        st.tuples(st.just("--hw"), st.sampled_from(["mi100", "mi200", "mi300", "MI200", "h100", ""])),
        st.tuples(st.just("--kernel"), st.sampled_from(["xdlops", "nonxdlops", "wmma", ""])),
        st.tuples(
            st.just("--validator"), st.sampled_from(["cpu", "gpu", "cpu-acc4+flush+inbounds", "cpu+nope", "mlir"])
        ),
        st.tuples(st.just("--perf-config"), st.sampled_from(["", "64,64,4,32,32,4,1,1", "v2:x", "1,2"])),
        st.tuples(st.just("--config"), config_texts()),
        st.tuples(st.just("--format"), st.sampled_from(["json", "text", "yaml"])),
    ),
    max_size=3,
)


def _cli(capsys, argv):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(argv)
    seconds = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2:
        assert err.startswith(f"fp16emu {argv[0]}: error:") and err.count("\n") == 1, (argv, err)
    else:
        assert out, argv
    return code, seconds


@fuzz(120)
@given(text=ANY_TEXT, extra=EXTRA_OPTIONS)
def test_run_check_exits_0_or_2_with_one_line(capsys, text, extra):
    argv = ["run", text, "--check"] + [w for pair in extra for w in pair]
    code, seconds = _cli(capsys, argv)
    _tally("fp16emu run --check", f"exit {code}", seconds)


@fuzz(40)
@given(
    options=st.lists(
        st.one_of(
            st.tuples(st.just("--run-set"), st.sampled_from(["fair_1", "fair_9", "fair_1,fair_rand0", ""])),
            st.tuples(st.just("--gpu"), st.sampled_from(["mi100", "mi250", "MI200", ","])),
            st.tuples(st.just("--range"), st.sampled_from(["r0", "rand1", "r7", "r1,r1"])),
            st.tuples(st.just("--jobs"), st.integers(-3, 10**6).map(str)),
            st.tuples(st.just("--members"), st.integers(-3, 10**3).map(str)),
            st.tuples(st.just("--smallest"), st.integers(-3, 500).map(str)),
            st.tuples(st.just("--tests"), st.sampled_from(["", "nope", "CHECK_PADDING3_f16", ",,"])),
            st.tuples(st.just("--granularity"), st.sampled_from(["tile", "element", "warp"])),
            st.tuples(st.just("--rand0-seeds"), st.sampled_from(["1,2", "0", "x", ""])),
            st.tuples(st.just("--show"), st.sampled_from(["all", "none", "some"])),
        ),
        max_size=4,
    ),
    out=st.sampled_from(["file", "file/under", "fresh/dir", "."]),
)
def test_study_reproduce_options_end_in_exit_2_before_any_compute(capsys, tmp_path_factory, options, out):
    """--measured names no folder, so every answer is exit 2; which one depends on the options
    (each checked before anything is read or computed)."""
    tmp = tmp_path_factory.mktemp("study")
    (tmp / "file").write_text("x")
    argv = ["study", "reproduce", "--measured", str(tmp / "no-such-folder"), "--out", str(tmp / out), "--no-progress"]
    argv += [w for pair in options for w in pair]
    code, seconds = _cli(capsys, argv)
    assert code == 2
    _tally("fp16emu study reproduce (options)", f"exit {code}", seconds)


# --- the work estimate --------------------------------------------------------------------------------


@st.composite
def problems(draw):
    groups = draw(st.integers(1, 3))
    direction = draw(st.sampled_from(["fwd", "bwd_weight", "bwd_data"]))
    y, x = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    dil = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad_h = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    pad_w = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    big = st.one_of(st.integers(1, 6), st.integers(1, 10**9))
    stride = (draw(big), draw(big))
    lo_h, lo_w = max(1, dil[0] * (y - 1) + 1 - sum(pad_h)), max(1, dil[1] * (x - 1) + 1 - sum(pad_w))
    h, w = draw(st.integers(lo_h, lo_h + 10)), draw(st.integers(lo_w, lo_w + 10))
    return ConvProblem(
        direction,
        draw(st.integers(1, 3)),
        groups * draw(st.integers(1, 3)),
        h,
        w,
        groups * draw(st.integers(1, 3)),
        y,
        x,
        groups=groups,
        pad_h=pad_h,
        pad_w=pad_w,
        stride=stride,
        dilation=dil,
    )


@fuzz(200)
@given(problem=problems())
def test_the_work_estimate_equals_the_gemms_and_ignores_empty_residues(problem):
    t0 = time.perf_counter()
    subs = sub_gemms(problem)
    work = estimate_work(problem)
    assert work.macs == sum(s.g * s.m * s.n * s.k for s in subs)
    assert work.gemms == len(subs) * problem.groups <= problem.y * problem.x * problem.groups
    _tally("estimate_work vs sub_gemms", "equal", time.perf_counter() - t0)


# --- API arguments -------------------------------------------------------------------------------------

ODD_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-3, 64),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
)
UNIT_FIELDS = [
    "name",
    "family",
    "group_size",
    "fraction_bits",
    "sum_fraction_bits",
    "alignment_rounding",
    "c_alignment_rounding",
    "output_rounding",
    "zero_exponent",
    "output_format",
    "flush_inputs",
    "round_each_group",
]


@fuzz(200)
@given(
    name=st.sampled_from(["mi100", "mi200", "mi300", "h100", "fma32", "fp64"]),
    field=st.sampled_from(UNIT_FIELDS),
    value=ODD_VALUES,
)
def test_a_unit_variant_is_valid_or_refused_where_it_is_made(name, field, value):
    import dataclasses

    from emu.dot import unit_params

    t0 = time.perf_counter()
    try:
        u = dataclasses.replace(unit(name), **{field: value})
    except (ValueError, TypeError) as err:
        assert "\n" not in str(err)
        answer = "refused"
    else:
        unit_params(u)  # what the kernels check at use accepts it too
        answer = "valid"
    _tally("Unit variants", answer, time.perf_counter() - t0)


@fuzz(200)
@given(
    k_order=st.one_of(
        st.none(), st.lists(st.one_of(st.integers(-2, 12), st.floats(-1, 12), st.booleans()), max_size=12)
    ),
    pad_k=ODD_VALUES,
    split_k=st.one_of(st.integers(-2, 2**13), ODD_VALUES),
)
def test_a_gemm_order_is_valid_or_refused(k_order, pad_k, split_k):
    t0 = time.perf_counter()
    kw = {"k_order": None if k_order is None else tuple(k_order), "pad_k": pad_k, "split_k": split_k}
    try:
        order = GemmOrder(**kw)
    except (ValueError, TypeError):
        answer = "refused"
    else:
        k = 5 if order.k_order is None else len(order.k_order)
        seq = order.sequence(k)
        assert sorted(int(i) for i in seq if i >= 0) == list(range(k)) and len(seq) % order.pad_k == 0
        answer = "valid"
    _tally("GemmOrder", answer, time.perf_counter() - t0)


@fuzz(200)
@given(k=st.integers(-3, 300), tile=ODD_VALUES, group=st.one_of(st.integers(-2, 40), ODD_VALUES))
def test_strided_k_order_is_a_permutation_or_refused(k, tile, group):
    t0 = time.perf_counter()
    try:
        order = strided_k_order(k, tile, group)
    except (ValueError, TypeError):
        answer = "refused"
    else:
        assert sorted(order) == list(range(k))
        answer = "permutation"
    _tally("strided_k_order", answer, time.perf_counter() - t0)


# --- cache files -----------------------------------------------------------------------------------------

KEY = "ab" + "0" * 62
VALUE = {"mode": "exact", "fields": {"rms": "0.5", "verdict": "PASS"}, "line": "RMS = 0.5 PASS", "recipe": "r"}
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _cache_answer(tmp, content: bytes, capsys):
    path = tmp / KEY[:2] / f"{KEY}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    t0 = time.perf_counter()
    got = Cache(tmp).get(KEY)
    seconds = time.perf_counter() - t0
    err = capsys.readouterr().err
    if got is None:
        assert err.count("\n") == 1 and str(path) in err, err
    else:
        assert valid_entry(got) and not err
    return got, seconds


@fuzz(150)
@given(
    doc=st.one_of(
        JSON,
        st.fixed_dictionaries({"schema": JSON, "key": JSON, "sha256": JSON, "value": JSON}),
        st.fixed_dictionaries(
            {"schema": st.just(4), "key": st.just(KEY), "sha256": st.just(entry_checksum(VALUE)), "value": JSON}
        ),
    )
)
def test_any_json_in_a_cache_entry_is_used_only_when_it_is_a_checked_entry(capsys, tmp_path_factory, doc):
    got, seconds = _cache_answer(tmp_path_factory.mktemp("c"), json.dumps(doc).encode(), capsys)
    assert got is None or got == VALUE
    _tally("cache entry (any JSON)", "recomputed" if got is None else "used", seconds)


@fuzz(150)
@given(data=st.data())
def test_a_flipped_byte_in_a_cache_entry_is_never_used_as_another_value(capsys, tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("c")
    Cache(tmp).put(KEY, VALUE)
    raw = bytearray((tmp / KEY[:2] / f"{KEY}.json").read_bytes())
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[pos]))
    got, seconds = _cache_answer(tmp, bytes(raw), capsys)
    assert got is None or got == VALUE  # a change that keeps the JSON's meaning (e.g. a space) is harmless
    _tally("cache entry (one byte changed)", "recomputed" if got is None else "used unchanged", seconds)


# --- measured files --------------------------------------------------------------------------------------------

#: a line in the study's format (github.com/zhanglx13/llvm-project-mlir-dev-utils @3b042e7,
#: fp16_experiment/raw_results): counts, errors, flags, direction, test name, index
MEASURED_LINE = (
    b"802816     (802463 334 19 0) 11.0 (0.0016527176 0.0016422272)  0.500000  0.000015  6.3e-03  6.3e-03  "
    b"3.4e-07  1.3e-06 0 1 1 0 1 0 1 bwd_data conv2d_host_validation_f16_bwd_CHECK_BWD_DATA1 (2 of 107)\n"
)


@fuzz(100)
@given(
    content=st.one_of(
        st.binary(max_size=200),
        st.lists(
            st.sampled_from(
                [MEASURED_LINE, MEASURED_LINE, MEASURED_LINE[:40], b"\n", b"\xff\xfe\n", b"nan\n", b"\x00"]
            ),
            max_size=5,
        ).map(b"".join),
    )
)
def test_a_measured_file_is_read_or_refused_naming_it(tmp_path_factory, content):
    root = tmp_path_factory.mktemp("raw")
    folder = root / "verify_results_fair_1_MI100"
    folder.mkdir()
    path = folder / "verify_f16_xdlops_pv_rand1.txt"
    path.write_bytes(content)
    t0 = time.perf_counter()
    try:
        lines = read_measured(root)
    except ValueError as err:
        assert str(path) in str(err) and "\n" not in str(err), str(err)
        answer = "refused naming the file"
    else:
        assert all(m.source == str(path) for m in lines)
        answer = "read"
    _tally("read_measured", answer, time.perf_counter() - t0)
