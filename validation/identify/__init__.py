"""Identification: which arithmetic a matrix unit has, from measured dot products.

Modules: :mod:`.search` (the model search: ``identify``, ``adaptive_identify``, ``next_probes``),
:mod:`.probes` (probe sets), :mod:`.rows` (reading a device's rows), :mod:`.probe_gpu` (the script
that runs a probe set on a GPU; ``python -m validation.identify.probe_gpu``), :mod:`.study` (the
2022 study's lines as probes), :mod:`.unit_table` (``fp16emu units``), :mod:`.plots` (figures).
"""

from .probes import ProbeSet, probe_set
from .rows import Rows, load_rows
from .search import Identification, Nearest, adaptive_identify, identify, next_probes, pool_outputs

__all__ = [
    "Identification",
    "Nearest",
    "ProbeSet",
    "Rows",
    "adaptive_identify",
    "identify",
    "load_rows",
    "next_probes",
    "pool_outputs",
    "probe_set",
]
