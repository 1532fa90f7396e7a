"""The named units on the probe vectors of ``../shared/reference``, bit for bit.

* ``probe_vectors.json``: 64 inputs whose output on NVIDIA hardware a source states (Fasi et al.'s
  test suite, Khattak & Mikaitis's measured rows, MMA-Sim's Turing probes). Each entry runs through
  the unit of every GPU its ``hardware`` field names ("T4,A100" → t4 and a100), once with the
  listed k entries and once zero-padded to the instruction's K (wmma m16n16k16: 16; mma m16n8k8:
  8), which is what the hardware ran.
* ``probe_vectors_amd_model_predicted.json``: 14 AMD vectors (K = 8) with the outputs the
  published models predict; each prediction with a matching unit is checked (MI100/MI200/MI300,
  the sequential fp32 FMA chain, and the NVIDIA models the file also lists).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import reference_data as ref  # noqa: E402  (registered by conftest.py)

import emu
import models

# ---------------------------------------------------------------------------------------------
# probe_vectors.json (NVIDIA, published outputs)


def _unit_names(hardware: str) -> list[str]:
    """ "T4,A100" → ["t4", "a100"]; "T4 (Turing)" → ["t4"]."""
    return [part.split("(")[0].strip().lower() for part in hardware.split(",")]


def _has_unit(name: str) -> bool:
    try:
        models.unit(name)
    except ValueError:
        return False
    return True


def _instruction_k(op: str) -> int | None:
    m = re.search(r"m\d+n\d+k(\d+)", op)
    return int(m.group(1)) if m else None


def _nvidia_cases():
    try:
        entries = ref.load_probe_vectors()
    except pytest.skip.Exception as skip:
        return [pytest.param(None, None, None, id="probe_vectors.json", marks=pytest.mark.skip(reason=str(skip)))]
    cases = []
    for e in entries:
        for name in _unit_names(e["hardware"]):
            for padded in (False, True):
                case_id = f"{e['id']}-{name}{'-padded' if padded else ''}"
                marks = ()
                if not _has_unit(name):
                    marks = pytest.mark.skip(
                        reason=f"no unit for hardware {name!r} (entry {e['id']}, {e['hardware']!r})"
                    )
                cases.append(pytest.param(e, name, padded, id=case_id, marks=marks))
    return cases


def _run(a_bits, b_bits, c, unit) -> np.ndarray:
    a = np.asarray(a_bits, dtype=np.uint16).view(np.float16)[None, :]
    b = np.asarray(b_bits, dtype=np.uint16).view(np.float16)[None, :]
    d = np.asarray(emu.dot_add(a, b, np.asarray([c]), unit))
    assert d.shape == (1,)
    return d


@pytest.mark.parametrize("entry,unit_name,padded", _nvidia_cases())
def test_published_nvidia_probe(entry, unit_name, padded):
    fp16_out = entry["output_format"] == "binary16"
    assert entry["output_format"] in ("binary16", "binary32"), entry["output_format"]
    unit = models.unit(unit_name, output="fp16" if fp16_out else "fp32")
    a = ref.parse_hex(entry["a"], np.uint16)
    b = ref.parse_hex(entry["b"], np.uint16)
    if padded:
        k = _instruction_k(entry["instruction_or_op"])
        assert k is not None and k % a.size == 0, entry["instruction_or_op"]
        a = np.concatenate([a, np.zeros(k - a.size, np.uint16)])
        b = np.concatenate([b, np.zeros(k - b.size, np.uint16)])
    if fp16_out:
        c = ref.parse_hex(entry["c"], np.uint16).view(np.float16)
        expected = int(entry["published_result"], 16)
        d = _run(a, b, c, unit)
        assert d.dtype == np.float16
        got = int(d.view(np.uint16)[0])
        hx = ref.hex16
    else:
        c = ref.parse_hex(entry["c"], np.uint32).view(np.float32)
        expected = int(entry["published_result"], 16)
        d = _run(a, b, c, unit)
        assert d.dtype == np.float32
        got = int(d.view(np.uint32)[0])
        hx = ref.hex32
    assert got == expected, (
        f"{entry['id']} on {unit.name} ({entry['output_format']}, K={a.size}): "
        f"a={entry['a']} b={entry['b']} c={entry['c']} published={hx(expected)} got={hx(got)} "
        f"[{entry['note']}]"
    )


def test_every_published_probe_has_a_unit():
    """Every hardware name in probe_vectors.json maps to a unit (none is skipped silently)."""
    entries = ref.load_probe_vectors()
    assert len(entries) == 64
    missing = sorted({n for e in entries for n in _unit_names(e["hardware"]) if not _has_unit(n)})
    assert not missing, f"hardware without a unit: {missing}"


# ---------------------------------------------------------------------------------------------
# probe_vectors_amd_model_predicted.json (model predictions, K = 8)

# prediction key → unit; "exact_then_RNE_fp32" (correctly rounded dot product) has no unit.
AMD_PREDICTION_UNIT = {
    "MI100_CDNA1_E-FDPA": "mi100",
    "MI200_CDNA2_FTZ-AddMul": "mi200",
    "MI300_CDNA3_TR-FDPA": "mi300",
    "sequential_fp32_fma_RNE": "fma32",
    "V100_T-FDPA_F23_L4": "v100",
    "A100_T-FDPA_F24_L8": "a100",
    "H100_T-FDPA_F25_L16": "h100",
}
NO_UNIT = {"exact_then_RNE_fp32": "a correctly rounded dot product: no named unit models it"}


def _amd_cases():
    try:
        data = ref.load_amd_predicted()
    except pytest.skip.Exception as skip:
        return [pytest.param(None, None, id="amd_predicted", marks=pytest.mark.skip(reason=str(skip)))]
    cases = []
    for v in data["vectors"]:
        for key in v["predicted_fp32_hex"]:
            marks = ()
            if key not in AMD_PREDICTION_UNIT:
                reason = NO_UNIT.get(key, f"no unit for prediction {key!r}")
                marks = pytest.mark.skip(reason=f"{key}: {reason}")
            cases.append(pytest.param(v, key, id=f"{v['name']}-{key}", marks=marks))
    return cases


@pytest.mark.parametrize("vector,model_key", _amd_cases())
def test_amd_model_predicted_probe(vector, model_key):
    unit = models.unit(AMD_PREDICTION_UNIT[model_key])
    a = ref.parse_hex(vector["a_fp16_hex"], np.uint16)
    b = ref.parse_hex(vector["b_fp16_hex"], np.uint16)
    c = ref.parse_hex(vector["c_fp32_hex"], np.uint32).view(np.float32)
    expected = int(vector["predicted_fp32_hex"][model_key], 16)
    d = _run(a, b, c, unit)
    assert d.dtype == np.float32
    got = int(d.view(np.uint32)[0])
    assert got == expected, (
        f"{vector['name']} on {unit.name} ({model_key}): a={vector['a_fp16_hex']} "
        f"b={vector['b_fp16_hex']} c={vector['c_fp32_hex']} predicted={ref.hex32(expected)} "
        f"got={ref.hex32(got)} [{vector['note']}]"
    )


def test_amd_predicted_file_shape():
    data = ref.load_amd_predicted()
    assert len(data["vectors"]) == 14
    for v in data["vectors"]:
        assert len(v["a_fp16_hex"]) == len(v["b_fp16_hex"]) == 8
        for key in ("MI100_CDNA1_E-FDPA", "MI200_CDNA2_FTZ-AddMul", "MI300_CDNA3_TR-FDPA"):
            assert key in v["predicted_fp32_hex"], (v["name"], key)
