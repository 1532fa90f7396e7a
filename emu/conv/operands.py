"""A convolution's GEMM operands over given tensors: A gathered per (sub-GEMM, group), B per
gemmN chunk, C scattered back into the result tensor, and the output tiles numbered."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .geometry import ConvProblem, sub_gemms
from .indexing import IndexMap, index_maps, tile_count, tile_numbers
from .kernels import gather, has_flushable, scatter
from .layout import FORMATS, PATTERNS, tensor_bits, tensor_format

__all__ = ["CHUNK_BYTES", "ConvOperands", "gemm_operands"]

#: Default bytes of one gemmN chunk's B (fp16 or bf16) plus C (fp32).
CHUNK_BYTES = 64 * 2**20


class ConvOperands:
    """A convolution's GEMMs over given tensors: gathers A and chunks of B, scatters C.

    ``x`` (input), ``w`` (filter), ``dy`` (output) as float16, ``ml_dtypes.bfloat16`` or float32
    values or uint16 / uint32 patterns; only the two the direction reads are needed (fwd: x, w;
    bwd_data: w, dy; bwd_weight: x, dy). ``fmt`` ("fp16", "bf16" or "fp32") says what patterns
    are; by default the values' dtype says it (:func:`emu.conv.layout.tensor_format`), and it is
    :attr:`format`. Gathered operands are values of that format (float16, bfloat16 or float32),
    C-contiguous, with k along A's rows and down B's columns in the gemmK
    order of :attr:`ConvProblem.gemm_k_order`; gemmN columns run in
    :attr:`ConvProblem.gemm_n_order`.
    """

    def __init__(self, problem: ConvProblem, x=None, w=None, dy=None, *, fmt: str | None = None):
        self.problem = problem
        self.subs = sub_gemms(problem)
        given = {"input": (x, "x"), "filter": (w, "w"), "output": (dy, "dy")}
        a_role, b_role = problem.operand_roles
        #: the tensors' element format, "fp16" or "bf16"
        self.format = tensor_format([given[a_role][0], given[b_role][0]], fmt)
        self._values = FORMATS[self.format]
        self._a_src = tensor_bits(problem, a_role, *given[a_role], self.format)
        self._b_src = tensor_bits(problem, b_role, *given[b_role], self.format)
        self._maps_cache: dict[tuple[int, int], tuple[IndexMap, IndexMap, IndexMap]] = {}
        self._flush_inert: bool | None = None

    @property
    def flush_inert(self) -> bool:
        """True when flushing the inputs below the format's smallest normal to +0 changes no
        operand: neither source tensor holds a subnormal or −0 (gathered padding is +0). Then a
        unit with ``flush_inputs`` computes the same bits as the unit without it."""
        if self._flush_inert is None:
            if self.format == "fp16":
                self._flush_inert = not (has_flushable(self._a_src) or has_flushable(self._b_src))
            else:  # bf16 (exponent field 0x7F80) and fp32 (0x7F800000): the same test in numpy
                field = PATTERNS[self.format].type(0x7F80 if self.format == "bf16" else 0x7F800000)
                self._flush_inert = not any(
                    bool((((src & field) == 0) & (src != 0)).any()) for src in (self._a_src, self._b_src)
                )
        return self._flush_inert

    def _maps(self, sub: int, group: int) -> tuple[IndexMap, IndexMap, IndexMap]:
        key = (sub, group)
        if key not in self._maps_cache:
            if not 0 <= group < self.problem.groups:
                raise IndexError(f"group {group} out of range 0..{self.problem.groups - 1}")
            self._maps_cache[key] = index_maps(self.problem, self.subs[sub], group)
        return self._maps_cache[key]

    def a(self, sub: int = 0, group: int = 0) -> np.ndarray:
        """A (gemmM × gemmK) of one group and sub-GEMM."""
        m = self._maps(sub, group)[0]
        return gather(self._a_src, m, (0, m.rows.length), (0, m.cols.length)).view(self._values)

    def b(self, sub: int = 0, group: int = 0, n_start: int = 0, n_stop: int | None = None) -> np.ndarray:
        """Columns n_start … n_stop−1 of B (gemmK × gemmN) of one group and sub-GEMM."""
        m = self._maps(sub, group)[1]
        n_stop = m.cols.length if n_stop is None else n_stop
        if not 0 <= n_start <= n_stop <= m.cols.length:
            raise IndexError(f"gemmN range {n_start}:{n_stop} outside 0:{m.cols.length}")
        return gather(self._b_src, m, (0, m.rows.length), (n_start, n_stop)).view(self._values)

    def new_result(self) -> np.ndarray:
        """A flat float32 result tensor of +0.0 (what the zero-init kernel leaves)."""
        return np.zeros(self.problem.tensor_size(self.problem.result_role), dtype=np.float32)

    def scatter(self, out: np.ndarray, c: np.ndarray, sub: int = 0, group: int = 0, n_start: int = 0) -> None:
        """Write C's columns n_start … n_start + c.shape[1] − 1 into the flat result ``out``."""
        m = self._maps(sub, group)[2]
        c = np.ascontiguousarray(c, dtype=np.float32)
        if c.shape[0] != m.rows.length or not 0 <= n_start <= n_start + c.shape[1] <= m.cols.length:
            raise ValueError(f"C chunk of shape {c.shape} at column {n_start} does not fit the GEMM")
        scatter(out, c, m, (n_start, n_start + c.shape[1]))

    def default_n_chunk(self) -> int:
        """gemmN columns per chunk so a chunk's B and C take about :data:`CHUNK_BYTES`."""
        size = PATTERNS[self.format].itemsize
        per_column = max(size * s.k + 4 * s.m for s in self.subs) if self.subs else 1
        return max(1, CHUNK_BYTES // per_column)

    def tile_ids(
        self,
        tiles: Sequence[tuple[int, int] | None],
        *,
        groups_apart: bool = True,
        subs: Sequence[int] | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Per result element (flat, float32), the output tile it belongs to, ``tiles[sub]`` the
        (m_per_block, n_per_block) of sub-GEMM ``sub`` (None: no tiles there, none counted).

        Tiles are numbered over sub-GEMMs, then groups (``groups_apart``; otherwise every group
        of a sub-GEMM has the same numbers), then row-major over the gemmM × gemmN tile grid.
        Only the sub-GEMMs in ``subs`` (default: all) are written, into ``out`` (default: a new
        array of −1, the value of elements no GEMM writes). ValueError past 2^24 tiles, which
        float32 cannot number exactly."""
        out = np.full(self.problem.tensor_size(self.problem.result_role), -1.0, np.float32) if out is None else out
        base = 0
        for sub, sg in enumerate(self.subs):
            tile = tiles[sub]
            if tile is None:
                continue
            count = tile_count(sg.m, sg.n, tile)
            for group in range(self.problem.groups):
                if subs is None or sub in subs:
                    self.scatter(out, tile_numbers(sg.m, sg.n, tile, base).astype(np.float32), sub, group, 0)
                base += count if groups_apart else 0
            base += 0 if groups_apart else count
        if base >= 1 << 24:
            raise ValueError(f"{base} tiles: too many to number exactly")
        return out


def gemm_operands(
    problem: ConvProblem,
    x=None,
    w=None,
    dy=None,
    *,
    sub: int = 0,
    group: int = 0,
    n_start: int = 0,
    n_stop: int | None = None,
    fmt: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) of one group and sub-GEMM: A (gemmM × gemmK) and B's gemmN columns
    n_start … n_stop−1, values of the tensors' format (float16, bfloat16 or float32), in the kernel's gemmK
    order. For many chunks, build one :class:`emu.conv.ConvGemm` instead."""
    op = ConvOperands(problem, x, w, dy, fmt=fmt)
    return op.a(sub, group), op.b(sub, group, n_start, n_stop)
