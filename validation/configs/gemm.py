"""rocmlir-gen GEMM configs (``--operation gemm``) as the 1×1 forward convolution that computes them.

rocmlir-gen's GEMM (github.com/ROCm/rocMLIR ``mlir/tools/rocmlir-gen/rocmlir-gen.cpp`` @001fb1c5,
early 2023; the 2022 ``rock-gen``/``miopen-gen`` @3df931f1 had convolutions only) takes ``-g``
(alias of ``-groupsize``, default 1), ``-m``, ``-k``, ``-n`` (required unless ``-p``, which sets
M 1024, K 769, N 512, G 1) and the booleans ``-transA`` (A is G×K×M instead of G×M×K),
``-transB`` (B is G×N×K instead of G×K×N) and ``-transC`` (C is G×N×M instead of G×M×N); each
matrix is one row-major memref. ``-store-method`` ``set`` (default) or ``atomic_add``.

Per group g, C[m, n] = Σ_k A[m, k]·B[k, n] is the forward convolution with filter = A
(out_channels = M, in_channels = K), input = B (batch = N), output = C, all spatial sizes 1 and
``groups`` = G: that convolution's own GEMM (gemmM = K/G → M, gemmN = N·Ho·Wo → N, gemmK =
(C/G)·Y·X → K, in ascending k) is the GEMM itself, with A in the filter's place as rocMLIR's
``rock.gemm`` takes it. The layouts carry the transposes: A (G, M, K) is the filter ``gkcyx``,
A (G, K, M) ``gckyx``; B (G, K, N) is the input ``gcnhw``, B (G, N, K) ``gnchw``; C (G, M, N) is the
output ``gknhw``, C (G, N, M) ``gnkhw``; so each tensor's memory order is the matrix's, and the
harness fills A, B, C in rocmlir-gen's argument order (A as the filter, B as the input).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: rocmlir-gen's ``-p`` values for ``-operation gemm`` (``populateDefaults``)
GEMM_DEFAULTS = {"m": 1024, "k": 769, "n": 512, "groupsize": 1}
#: the source every GEMM message cites
ROCMLIR_GEN_GEMM = "github.com/ROCm/rocMLIR mlir/tools/rocmlir-gen/rocmlir-gen.cpp @001fb1c5"
#: what a GEMM run's inputs are, and how they differ from rocmlir-gen's GEMM harness
GEMM_HARNESS_NOTE = (
    "A and B drawn as the 2022 convolution harness drew the filter and input (glibc srand(seed) per "
    "tensor, fp16 or bf16 by truncation); rocmlir-gen's GEMM harness (@001fb1c5) seeds once for all tensors and "
    "rounds to nearest (arith.truncf): not modelled"
)


@dataclass(frozen=True)
class GemmShape:
    """One rocmlir-gen GEMM: G groups of C (M×N) = A (M×K) · B (K×N), and which matrices are
    stored transposed (``trans_a``: A is G×K×M; ``trans_b``: B is G×N×K; ``trans_c``: C is G×N×M)."""

    g: int
    m: int
    n: int
    k: int
    trans_a: bool = False
    trans_b: bool = False
    trans_c: bool = False

    @property
    def layouts(self) -> dict[str, str]:
        """The 1×1 convolution's layouts whose memory orders are A's, B's and C's."""
        return {
            "fil_layout": "gckyx" if self.trans_a else "gkcyx",
            "in_layout": "gnchw" if self.trans_b else "gcnhw",
            "out_layout": "gnkhw" if self.trans_c else "gknhw",
        }

    @property
    def a_shape(self) -> tuple[int, int, int]:
        return (self.g, self.k, self.m) if self.trans_a else (self.g, self.m, self.k)

    @property
    def b_shape(self) -> tuple[int, int, int]:
        return (self.g, self.n, self.k) if self.trans_b else (self.g, self.k, self.n)

    @property
    def c_shape(self) -> tuple[int, int, int]:
        """C's array shape, memory order: (G, M, N), or (G, N, M) with ``trans_c``."""
        return (self.g, self.n, self.m) if self.trans_c else (self.g, self.m, self.n)

    @property
    def c_axes(self) -> tuple[str, str, str]:
        """The letters of :attr:`c_shape`'s axes (g, m, n or g, n, m)."""
        return ("g", "n", "m") if self.trans_c else ("g", "m", "n")

    def c_matrix(self, flat) -> np.ndarray:
        """The result C as a (G, M, N) array (transposed back from G×N×M with ``trans_c``), from
        the output tensor's values in memory order."""
        c = np.asarray(flat).reshape(self.c_shape)
        return c.transpose(0, 2, 1) if self.trans_c else c

    def describe(self) -> str:
        """One line: ``GEMM G=1 M=8 N=4 K=16: C[G,M,N] = A[G,M,K]·B[G,K,N]``."""

        def dims(letters: str) -> str:
            return "[" + ",".join(letters.upper()) + "]"

        a = dims("gkm" if self.trans_a else "gmk")
        b = dims("gnk" if self.trans_b else "gkn")
        c = dims("gnm" if self.trans_c else "gmn")
        return f"GEMM G={self.g} M={self.m} N={self.n} K={self.k}: C{c} = A{a}·B{b}"

    def to_dict(self) -> dict:
        return {
            "operation": "gemm",
            "G": self.g,
            "M": self.m,
            "N": self.n,
            "K": self.k,
            "transA": self.trans_a,
            "transB": self.trans_b,
            "transC": self.trans_c,
            "A_shape": list(self.a_shape),
            "B_shape": list(self.b_shape),
            "C_shape": list(self.c_shape),
            "as_convolution": "fwd 1x1: filter = A (k = M, c = K), input = B (n = N), output = C, groups = G",
            "harness": GEMM_HARNESS_NOTE,
        }
