r"""APNet's attention propagation as one fused Triton kernel per pass.

For a destination node :math:`i` with incoming entries :math:`j` (the row
:math:`i` of a row-sorted :class:`~torch_geometric.EdgeIndex`, read as
:class:`~apnet_pyg.nn.functional.CSRArrays`),

.. math::
    z_{ij} = \gamma \cos(\mathbf{h}^{dst}_i, \mathbf{h}^{src}_j)
    + \log w_{ij}, \qquad
    \alpha_{ij} = \frac{\exp(z_{ij})}{\sum_k \exp(z_{ik})}, \qquad
    \mathbf{o}_i = \sum_j \alpha_{ij} \mathbf{x}_j,

with an optional self-loop as a diagonal term (logit :math:`\gamma` times
the self-cosine, :math:`1`, or :math:`0` for a row of norm at most
:data:`~apnet_pyg.nn.functional.NORM_EPS`; it aggregates
:math:`\mathbf{x}_i`), exactly what :class:`~apnet_pyg.nn.APNetConv`'s
fused path computes with :func:`~apnet_pyg.nn.functional.edge_cosine` and
:func:`~apnet_pyg.nn.functional.softmax_spmm`.

* The **forward** kernel runs one program per destination row: it reads
  the row's entries from the CSR arrays in blocks of :obj:`BLOCK_E`,
  gathers :math:`\mathbf{h}^{src}_j` and :math:`\mathbf{x}_j`, and keeps a
  running maximum, sum and weighted sum (the online softmax of
  FlashAttention). It stores the output and one log-sum-exp per row,
  never a per-entry value nor an :math:`|\mathcal{E}| \times F` tensor.
* The **backward** pass recomputes the logits from :math:`\mathbf{h}`
  and the stored log-sum-exp (FlashAttention's backward). With
  :math:`g_{ij} = \langle \partial L / \partial \mathbf{o}_i,
  \mathbf{x}_j \rangle` and :math:`D_i = \sum_j \alpha_{ij} g_{ij}`,
  :math:`\partial L / \partial z_{ij} = \alpha_{ij} (g_{ij} - D_i)`. A
  row kernel (CSR order, one program per destination) gives :math:`D_i`
  and the gradients of :math:`\mathbf{h}^{dst}` and :math:`\gamma` (one
  partial sum per row, summed afterwards: deterministic, no atomics); a
  column kernel (the transpose's CSR order, one program per source,
  reaching per-entry values through :obj:`perm_t`) gives those of
  :math:`\mathbf{x}`, :math:`\mathbf{h}^{src}` and the log weights, again
  without atomics. :math:`D_i` is summed from the recomputed
  :math:`\alpha_{ij} g_{ij}` in the accumulation dtype, not read as
  :math:`\langle \partial L / \partial \mathbf{o}_i, \mathbf{o}_i
  \rangle` from an output rounded to half precision: :math:`g_{ij} - D_i`
  cancels, and the rounding cost the gradient of :math:`\gamma` ~8% in
  bfloat16.

Loads are converted to float32 (float64 for float64 inputs), so float16
and bfloat16 inputs accumulate in float32; outputs and gradients come back
in the dtypes of their inputs. Each kernel pass holds a whole feature row
in one tile (up to :data:`MAX_FEATURES` features); the number of entries
per block and of warps follow the mean degree and the width.

The kernels run on CUDA tensors. On CPU tensors they run under Triton's
interpreter when the environment variable :obj:`TRITON_INTERPRET=1` is set
(slow: for tests), and raise otherwise. :func:`triton_attention_propagate`
is one :func:`torch.library.custom_op` for the forward pass and one for
the backward pass, so :func:`torch.compile` sees each as one opaque
operator. A second derivative differentiates the composed sparse kernels
of :mod:`apnet_pyg.nn.functional` instead.
"""
# Annotations as strings: the kernels' tl.constexpr is read by Triton from
# the source when it jits them, and Triton is not imported here.
from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from torch_geometric import is_compiling

from apnet_pyg.nn.functional import (
    NORM_EPS,
    Adjacency,
    CSRArrays,
    _as_arrays,
    custom_kernel,
    edge_cosine,
    softmax_spmm,
)
from apnet_pyg.utils import check_features, check_same_device

# Triton is an optional dependency (it ships with PyTorch's CUDA builds),
# imported on first use (_load_triton): whether its kernels run compiled or
# interpreted is fixed for the process when it is first imported.
triton = tl = None
# Triton's own combine functions of tl.sum and tl.max, for tl.reduce (set
# on import). The kernels call Triton's builtins only (tl.reduce, not
# tl.sum; tl.full, not tl.zeros): in a process that imported Triton without
# TRITON_INTERPRET=1, its library functions are compiled ones, which the
# interpreter cannot call. It maps tl.reduce with these two to numpy.
_ADD = _MAX = None

#: The widest feature row (of :obj:`x` or :obj:`h`) a kernel holds in one
#: tile (registers, not memory, bound it); wider rows need the sparse
#: kernels.
MAX_FEATURES = 4096

# At most this many elements in one gathered [BLOCK_E, width] tile (at
# least two entries a block): ~8 per thread. In compiles for sm_90, larger
# tiles at F = 64 took 100-150 registers a thread (vs 50-90), too few warps
# per SM for a gather-bound kernel. Untuned on a GPU.
_MAX_TILE = 512

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@functools.lru_cache(maxsize=None)
def is_triton_available() -> bool:
    r"""Whether Triton is installed (the kernels also need a CUDA device,
    or Triton's interpreter for CPU tensors: see :func:`interpreting`)."""
    try:
        return importlib.util.find_spec('triton') is not None
    except ValueError:  # sys.modules['triton'] is None: blocked.
        return False


def _load_triton() -> None:
    global triton, tl, _ADD, _MAX
    if triton is None:
        import triton
        import triton.language as tl
        _ADD = tl.standard._sum_combine
        _MAX = tl.standard._elementwise_max


def interpreting() -> bool:
    r"""Whether Triton itself runs interpreted in this process
    (:obj:`TRITON_INTERPRET=1` was set when it was first imported): then
    the kernels run under the interpreter on every device. Imports
    Triton."""
    _load_triton()
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(tl.sum, InterpretedFunction)


def interpreter_enabled() -> bool:
    r"""Whether CPU tensors may run the kernels under Triton's interpreter
    (slow; for tests): :obj:`TRITON_INTERPRET=1` is set now, or was when
    Triton was imported."""
    return os.environ.get('TRITON_INTERPRET', '0') == '1' or interpreting()


# ---------------------------------------------------------------------------
# Kernels (plain functions: jitted per mode on first use, see _kernels;
# their annotations stay strings, see the __future__ import)
# ---------------------------------------------------------------------------
def _forward_kernel(
        x_ptr, h_dst_ptr, h_src_ptr, gamma_ptr, log_weight_ptr, loop_ptr,
        rowptr_ptr, col_ptr, out_ptr, lse_ptr, num_x, num_h,
        HAS_WEIGHT: tl.constexpr, HAS_LOOPS: tl.constexpr,
        BLOCK_E: tl.constexpr, BLOCK_X: tl.constexpr,
        BLOCK_H: tl.constexpr, ACC: tl.constexpr,
        EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_ptr + row).to(tl.int64)
    end = tl.load(rowptr_ptr + row + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)

    h_i = tl.load(h_dst_ptr + row * num_h + fh, mask=fh_mask,
                  other=0.0).to(ACC)
    norm_i = tl.maximum(tl.sqrt(tl.reduce(h_i * h_i, 0, _ADD)), EPS)
    if HAS_LOOPS:
        # The self-loop starts the running softmax: logit gamma * self-cos
        # (1, or 0 for a row of norm <= EPS), value x_i; -inf for none.
        kept = tl.load(loop_ptr + row) != 0
        loop_logit = gamma * (norm_i > EPS).to(ACC)
        m = tl.where(kept, loop_logit, float('-inf')).to(ACC)
        s = kept.to(ACC)
        acc = tl.load(x_ptr + row * num_x + fx, mask=fx_mask & kept,
                      other=0.0).to(ACC)
    else:
        m = tl.full((), float('-inf'), ACC)
        s = tl.full((), 0.0, ACC)
        acc = tl.full((BLOCK_X, ), 0.0, ACC)

    first = start
    while first < end:  # Not range(): see _kernels.
        entry = first + lanes
        first += BLOCK_E
        entry_mask = entry < end
        col = tl.load(col_ptr + entry, mask=entry_mask, other=0).to(tl.int64)
        h_j = tl.load(h_src_ptr + col[:, None] * num_h + fh[None, :],
                      mask=entry_mask[:, None] & fh_mask[None, :],
                      other=0.0).to(ACC)
        norm_j = tl.maximum(tl.sqrt(tl.reduce(h_j * h_j, 1, _ADD)), EPS)
        cos = tl.reduce(h_j * h_i[None, :], 1, _ADD) / (norm_i * norm_j)
        z = gamma * cos
        if HAS_WEIGHT:
            z += tl.load(log_weight_ptr + entry, mask=entry_mask,
                         other=0.0).to(ACC)
        z = tl.where(entry_mask, z, float('-inf'))
        m_new = tl.maximum(m, tl.reduce(z, 0, _MAX))
        # Nothing finite yet (no self-loop, all masked): shift by 0, not
        # by -inf, so that exp() gives 0 rather than NaN.
        shift = tl.where(m_new == float('-inf'), 0.0, m_new).to(ACC)
        p = tl.exp(z - shift)
        correction = tl.exp(m - shift)
        s = s * correction + tl.reduce(p, 0, _ADD)
        x_j = tl.load(x_ptr + col[:, None] * num_x + fx[None, :],
                      mask=entry_mask[:, None] & fx_mask[None, :],
                      other=0.0).to(ACC)
        acc = acc * correction + tl.reduce(p[:, None] * x_j, 0, _ADD)
        m = m_new

    # A row with nothing to aggregate (s = 0) gets 0 and lse = -inf.
    nonempty = s > 0
    s_safe = tl.where(nonempty, s, 1.0).to(ACC)
    tl.store(out_ptr + row * num_x + fx,
             (acc / s_safe).to(out_ptr.dtype.element_ty), mask=fx_mask)
    lse = tl.where(nonempty, m + tl.log(s_safe), float('-inf')).to(ACC)
    tl.store(lse_ptr + row, lse)


def _backward_row_kernel(
        x_ptr, h_dst_ptr, h_src_ptr, gamma_ptr, log_weight_ptr, loop_ptr,
        rowptr_ptr, col_ptr, grad_out_ptr, lse_ptr, grad_h_dst_ptr,
        grad_gamma_ptr, delta_ptr, num_x, num_h,
        HAS_WEIGHT: tl.constexpr, HAS_LOOPS: tl.constexpr,
        NEED_H_DST: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_X: tl.constexpr,
        BLOCK_H: tl.constexpr, ACC: tl.constexpr, EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_ptr + row).to(tl.int64)
    end = tl.load(rowptr_ptr + row + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)
    lse = tl.load(lse_ptr + row).to(ACC)
    lse = tl.where(lse == float('-inf'), 0.0, lse).to(ACC)  # empty row
    grad_o = tl.load(grad_out_ptr + row * num_x + fx, mask=fx_mask,
                     other=0.0).to(ACC)
    h_i = tl.load(h_dst_ptr + row * num_h + fh, mask=fh_mask,
                  other=0.0).to(ACC)
    norm_i = tl.maximum(tl.sqrt(tl.reduce(h_i * h_i, 0, _ADD)), EPS)

    # dL/dz_ij = alpha_ij (g_ij - D_i), D_i = sum_j alpha_ij g_ij: the
    # sums over j of alpha g and of alpha apart, D_i applied at the end.
    # D_i from the recomputed alpha, in the accumulation dtype, not as
    # <dL/do_i, o_i> from a rounded half-precision o_i (which loses
    # digits where g_ij - D_i cancels).
    sum_ag_u = tl.full((BLOCK_H, ), 0.0, ACC)  # alpha g h_j / |h_j|
    sum_a_u = tl.full((BLOCK_H, ), 0.0, ACC)  # alpha h_j / |h_j|
    sum_ag_cos = tl.full((), 0.0, ACC)
    sum_a_cos = tl.full((), 0.0, ACC)
    delta = tl.full((), 0.0, ACC)
    first = start
    while first < end:  # Not range(): see _kernels.
        entry = first + lanes
        first += BLOCK_E
        entry_mask = entry < end
        col = tl.load(col_ptr + entry, mask=entry_mask, other=0).to(tl.int64)
        h_j = tl.load(h_src_ptr + col[:, None] * num_h + fh[None, :],
                      mask=entry_mask[:, None] & fh_mask[None, :],
                      other=0.0).to(ACC)
        norm_j = tl.maximum(tl.sqrt(tl.reduce(h_j * h_j, 1, _ADD)), EPS)
        cos = tl.reduce(h_j * h_i[None, :], 1, _ADD) / (norm_i * norm_j)
        z = gamma * cos
        if HAS_WEIGHT:
            z += tl.load(log_weight_ptr + entry, mask=entry_mask,
                         other=0.0).to(ACC)
        alpha = tl.exp(tl.where(entry_mask, z - lse, float('-inf')))
        x_j = tl.load(x_ptr + col[:, None] * num_x + fx[None, :],
                      mask=entry_mask[:, None] & fx_mask[None, :],
                      other=0.0).to(ACC)
        ag = alpha * tl.reduce(x_j * grad_o[None, :], 1, _ADD)
        delta += tl.reduce(ag, 0, _ADD)
        sum_ag_cos += tl.reduce(ag * cos, 0, _ADD)
        sum_a_cos += tl.reduce(alpha * cos, 0, _ADD)
        if NEED_H_DST:
            sum_ag_u += tl.reduce((ag / norm_j)[:, None] * h_j, 0, _ADD)
            sum_a_u += tl.reduce((alpha / norm_j)[:, None] * h_j, 0, _ADD)

    grad_gamma = tl.full((), 0.0, ACC)
    if HAS_LOOPS:
        # The self-loop: logit gamma * self-cos, value x_i.
        kept = tl.load(loop_ptr + row) != 0
        self_cos = (norm_i > EPS).to(ACC)
        self_alpha = tl.exp(tl.where(kept, gamma * self_cos - lse,
                                     float('-inf')))
        x_i = tl.load(x_ptr + row * num_x + fx, mask=fx_mask & kept,
                      other=0.0).to(ACC)
        self_ag = self_alpha * tl.reduce(grad_o * x_i, 0, _ADD)
        delta += self_ag
        grad_gamma += (self_ag - self_alpha * delta) * self_cos
    tl.store(delta_ptr + row, delta)
    grad_cos = sum_ag_cos - delta * sum_a_cos  # sum_j dz_ij cos_ij
    tl.store(grad_gamma_ptr + row, grad_gamma + grad_cos)
    if NEED_H_DST:
        # d cos_ij / d h_i = (h_j / |h_j| - cos_ij h_i / |h_i|) / |h_i|;
        # the second term vanishes where the norm is clamped at EPS.
        unit_i = h_i / norm_i * (norm_i > EPS).to(ACC)
        grad_h_i = gamma / norm_i * (sum_ag_u - delta * sum_a_u
                                     - grad_cos * unit_i)
        tl.store(grad_h_dst_ptr + row * num_h + fh,
                 grad_h_i.to(grad_h_dst_ptr.dtype.element_ty), mask=fh_mask)


def _backward_col_kernel(
        x_ptr, h_dst_ptr, h_src_ptr, gamma_ptr, log_weight_ptr, loop_ptr,
        rowptr_t_ptr, col_t_ptr, perm_t_ptr, grad_out_ptr, lse_ptr,
        delta_ptr, grad_h_partial_ptr, grad_x_ptr, grad_h_src_ptr,
        grad_logit_ptr, num_dst, num_x, num_h,
        HAS_WEIGHT: tl.constexpr, HAS_LOOPS: tl.constexpr,
        NEED_X: tl.constexpr, NEED_H_SRC: tl.constexpr,
        NEED_WEIGHT: tl.constexpr, SAME_H: tl.constexpr,
        BLOCK_E: tl.constexpr, BLOCK_X: tl.constexpr,
        BLOCK_H: tl.constexpr, ACC: tl.constexpr, EPS: tl.constexpr):
    src = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_t_ptr + src).to(tl.int64)
    end = tl.load(rowptr_t_ptr + src + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)

    h_j = tl.load(h_src_ptr + src * num_h + fh, mask=fh_mask,
                  other=0.0).to(ACC)
    norm_j = tl.maximum(tl.sqrt(tl.reduce(h_j * h_j, 0, _ADD)), EPS)
    x_j = tl.load(x_ptr + src * num_x + fx, mask=fx_mask, other=0.0).to(ACC)
    grad_x = tl.full((BLOCK_X, ), 0.0, ACC)
    if HAS_LOOPS:
        if NEED_X:
            # Destination src's self-loop aggregates x_src: its share of
            # dL/dx_src (loops need num_dst <= num_src).
            kept = (tl.load(loop_ptr + src, mask=src < num_dst, other=0)
                    != 0) & (src < num_dst)
            if SAME_H:
                self_norm = norm_j
            else:
                h_self = tl.load(h_dst_ptr + src * num_h + fh,
                                 mask=fh_mask & kept, other=0.0).to(ACC)
                self_norm = tl.sqrt(tl.reduce(h_self * h_self, 0, _ADD))
            self_cos = (self_norm > EPS).to(ACC)
            lse_j = tl.load(lse_ptr + src, mask=kept, other=0.0).to(ACC)
            self_alpha = tl.exp(tl.where(kept, gamma * self_cos - lse_j,
                                         float('-inf')))
            grad_o_j = tl.load(grad_out_ptr + src * num_x + fx,
                               mask=fx_mask & kept, other=0.0).to(ACC)
            grad_x += self_alpha * grad_o_j

    grad_h = tl.full((BLOCK_H, ), 0.0, ACC)  # sum_i dz_ij h_i / |h_i|
    grad_cos = tl.full((), 0.0, ACC)  # sum_i dz_ij cos_ij
    first = start
    while first < end:  # Not range(): see _kernels.
        entry = first + lanes
        first += BLOCK_E
        entry_mask = entry < end
        dst = tl.load(col_t_ptr + entry, mask=entry_mask,
                      other=0).to(tl.int64)
        h_i = tl.load(h_dst_ptr + dst[:, None] * num_h + fh[None, :],
                      mask=entry_mask[:, None] & fh_mask[None, :],
                      other=0.0).to(ACC)
        norm_i = tl.maximum(tl.sqrt(tl.reduce(h_i * h_i, 1, _ADD)), EPS)
        cos = tl.reduce(h_i * h_j[None, :], 1, _ADD) / (norm_i * norm_j)
        z = gamma * cos
        if HAS_WEIGHT or NEED_WEIGHT:
            # Per-entry values are stored in CSR order: entry perm_t[k].
            original = tl.load(perm_t_ptr + entry, mask=entry_mask,
                               other=0).to(tl.int64)
        if HAS_WEIGHT:
            z += tl.load(log_weight_ptr + original, mask=entry_mask,
                         other=0.0).to(ACC)
        lse_i = tl.load(lse_ptr + dst, mask=entry_mask, other=0.0).to(ACC)
        alpha = tl.exp(tl.where(entry_mask, z - lse_i, float('-inf')))
        grad_o = tl.load(grad_out_ptr + dst[:, None] * num_x + fx[None, :],
                         mask=entry_mask[:, None] & fx_mask[None, :],
                         other=0.0).to(ACC)
        if NEED_X:
            grad_x += tl.reduce(alpha[:, None] * grad_o, 0, _ADD)
        if NEED_H_SRC or NEED_WEIGHT:
            delta_i = tl.load(delta_ptr + dst, mask=entry_mask,
                              other=0.0).to(ACC)
            grad_z = alpha * (tl.reduce(grad_o * x_j[None, :], 1, _ADD)
                              - delta_i)
            if NEED_WEIGHT:  # d z_ij / d log w_ij = 1
                tl.store(grad_logit_ptr + original,
                         grad_z.to(grad_logit_ptr.dtype.element_ty),
                         mask=entry_mask)
            if NEED_H_SRC:
                grad_h += tl.reduce((grad_z / norm_i)[:, None] * h_i, 0,
                                    _ADD)
                grad_cos += tl.reduce(grad_z * cos, 0, _ADD)

    if NEED_X:
        tl.store(grad_x_ptr + src * num_x + fx,
                 grad_x.to(grad_x_ptr.dtype.element_ty), mask=fx_mask)
    if NEED_H_SRC:
        unit_j = h_j / norm_j * (norm_j > EPS).to(ACC)
        grad_h_j = gamma / norm_j * (grad_h - grad_cos * unit_j)
        if SAME_H:  # h_src is h_dst: add the row kernel's part.
            grad_h_j += tl.load(grad_h_partial_ptr + src * num_h + fh,
                                mask=fh_mask, other=0.0).to(ACC)
        tl.store(grad_h_src_ptr + src * num_h + fh,
                 grad_h_j.to(grad_h_src_ptr.dtype.element_ty), mask=fh_mask)


_KERNEL_FUNCTIONS = (_forward_kernel, _backward_row_kernel,
                     _backward_col_kernel)


@functools.lru_cache(maxsize=None)
def _kernels(interpret: bool) -> Dict[str, Any]:
    r"""The kernels jitted for Triton's interpreter or for compilation.
    :func:`triton.jit` reads :obj:`TRITON_INTERPRET` when it decorates: the
    knob is set for the decoration alone, so both kinds coexist in one
    process.

    The entry loops are :obj:`while` loops: Triton 3.6's interpreter
    fails on :obj:`range()` bounds loaded from memory with numpy >= 2.4
    (triton-lang/triton#9171). On a GPU a :obj:`while` loop is not
    software-pipelined, which matters little here: a program runs a few
    blocks, and many programs per SM hide the gather latency."""
    _load_triton()
    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = interpret
        return {fn.__name__: triton.jit(fn) for fn in _KERNEL_FUNCTIONS}


def _kernels_for(device: torch.device) -> Dict[str, Any]:
    # CUDA tensors compile, unless Triton itself runs interpreted.
    return _kernels(device.type != 'cuda' or interpreting())


# ---------------------------------------------------------------------------
# Launch configuration
# ---------------------------------------------------------------------------
class _Config:
    __slots__ = ('block_e', 'block_x', 'block_h', 'num_warps')

    def __init__(self, num_rows: int, num_entries: int, num_x: int,
                 num_h: int):
        # Power-of-two tiles of at least 16 features (masked beyond F).
        self.block_x = max(16, _next_power_of_2(max(num_x, 1)))
        self.block_h = max(16, _next_power_of_2(max(num_h, 1)))
        width = max(self.block_x, self.block_h)
        # Entries per block: the mean degree (WordNet's ~2 wastes no lanes
        # on a block of 16), within the tile budget.
        mean_degree = -(-num_entries // max(num_rows, 1))
        block_e = _next_power_of_2(max(mean_degree, 2))
        self.block_e = max(2, min(block_e, _MAX_TILE // width))
        # ~8 features a thread per gathered tile (16-byte loads in half).
        self.num_warps = max(1, min(8, self.block_e * width // 256))


def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _acc_dtype(*tensors: Optional[Tensor]) -> Any:
    _load_triton()
    double = any(t is not None and t.dtype == torch.float64
                 for t in tensors)
    return tl.float64 if double else tl.float32


def _or(tensor: Optional[Tensor], dummy: Tensor) -> Tensor:
    # A pointer argument the kernel never reads (its flag is off).
    return dummy if tensor is None else tensor


# ---------------------------------------------------------------------------
# Launches (the custom operators' implementations)
# ---------------------------------------------------------------------------
def _forward_impl(x: Tensor, h_dst: Tensor, h_src: Optional[Tensor],
                  gamma: Tensor, log_weight: Optional[Tensor],
                  loop_kept: Optional[Tensor], rowptr: Tensor,
                  col: Tensor) -> Tuple[Tensor, Tensor]:
    num_dst, num_x, num_h = rowptr.numel() - 1, x.size(1), h_dst.size(1)
    acc = _acc_dtype(x, h_dst, h_src)
    out = x.new_empty(num_dst, num_x)
    lse = x.new_empty(num_dst, dtype=torch.float64 if acc == tl.float64
                      else torch.float32)
    if num_dst == 0:
        return out, lse
    x, h_dst = x.contiguous(), h_dst.contiguous()
    h_src = h_dst if h_src is None else h_src.contiguous()
    if log_weight is not None:
        log_weight = log_weight.contiguous()
    config = _Config(num_dst, col.numel(), num_x, num_h)
    kernel = _kernels_for(x.device)['_forward_kernel']
    kernel[(num_dst, )](
        x, h_dst, h_src, gamma, _or(log_weight, gamma),
        _or(_as_bytes(loop_kept), gamma), rowptr, col, out, lse, num_x,
        num_h, HAS_WEIGHT=log_weight is not None,
        HAS_LOOPS=loop_kept is not None, BLOCK_E=config.block_e,
        BLOCK_X=config.block_x, BLOCK_H=config.block_h, ACC=acc,
        EPS=NORM_EPS, num_warps=config.num_warps)
    return out, lse


def _as_bytes(mask: Optional[Tensor]) -> Optional[Tensor]:
    # A bool tensor read as uint8 (no copy): the kernels compare with 0.
    return None if mask is None else mask.contiguous().view(torch.uint8)


def _forward_fake(x, h_dst, h_src, gamma, log_weight, loop_kept, rowptr,
                  col):
    double = any(t is not None and t.dtype == torch.float64
                 for t in (x, h_dst, h_src))
    num_dst = rowptr.size(0) - 1
    return (x.new_empty(num_dst, x.size(1)),
            x.new_empty(num_dst, dtype=torch.float64 if double
                        else torch.float32))


def _backward_impl(grad_out: Tensor, lse: Tensor, x: Tensor, h_dst: Tensor,
                   h_src: Optional[Tensor], gamma: Tensor,
                   log_weight: Optional[Tensor], loop_kept: Optional[Tensor],
                   rowptr: Tensor, col: Tensor, rowptr_t: Tensor,
                   col_t: Tensor, perm_t: Tensor,
                   needs_grad: List[bool]) -> Tuple[Tensor, ...]:
    need_x, need_h_dst, need_h_src, need_gamma, need_weight = needs_grad
    same_h = h_src is None
    if same_h:  # One tensor on both sides: one gradient, both parts.
        need_h_dst = need_h_src = need_h_dst or need_h_src
    need_weight = need_weight and log_weight is not None
    num_dst, num_src = rowptr.numel() - 1, rowptr_t.numel() - 1
    num_x, num_h = x.size(1), h_dst.size(1)
    acc = _acc_dtype(x, h_dst, h_src)
    # The kernels index rows as contiguous: inputs made so, and gradients
    # allocated so (not empty_like, which keeps a transposed layout).
    x, h_dst, grad_out = x.contiguous(), h_dst.contiguous(), \
        grad_out.contiguous()
    h_src = h_dst if same_h else h_src.contiguous()
    if log_weight is not None:
        log_weight = log_weight.contiguous()
    grad_x, grad_h_dst, grad_h_src, grad_gamma, grad_weight = _gradients(
        x, h_dst, None if same_h else h_src, gamma, log_weight,
        (need_x, need_h_dst, need_h_src and not same_h, need_gamma,
         need_weight))
    grad_gamma.zero_()
    if same_h:  # One buffer, written by the column kernel.
        grad_h_src = grad_h_dst
    kernels = _kernels_for(x.device)
    loops = _as_bytes(loop_kept)
    common = dict(HAS_WEIGHT=log_weight is not None,
                  HAS_LOOPS=loop_kept is not None, ACC=acc, EPS=NORM_EPS)
    # D_i, needed by every gradient but x's.
    need_delta = need_h_dst or need_h_src or need_gamma or need_weight
    delta = lse.new_empty(num_dst)
    grad_h_partial = None
    if need_delta and num_dst > 0:
        if same_h and need_h_dst:
            # The row kernel's part of the one gradient, which the column
            # kernel adds to its own; kept in the accumulation dtype.
            grad_h_partial = grad_h_src if grad_h_src.dtype == lse.dtype \
                else h_dst.new_empty(h_dst.shape, dtype=lse.dtype)
        row_grad_h = grad_h_partial if same_h else grad_h_dst
        gamma_parts = lse.new_empty(num_dst)
        config = _Config(num_dst, col.numel(), num_x, num_h)
        kernels['_backward_row_kernel'][(num_dst, )](
            x, h_dst, h_src, gamma, _or(log_weight, gamma),
            _or(loops, gamma), rowptr, col, grad_out, lse,
            _or(row_grad_h, gamma), gamma_parts, delta, num_x, num_h,
            NEED_H_DST=need_h_dst, BLOCK_E=config.block_e,
            BLOCK_X=config.block_x, BLOCK_H=config.block_h,
            num_warps=config.num_warps, **common)
        if need_gamma:
            # One partial sum a row, summed here: deterministic.
            grad_gamma = gamma_parts.sum().to(gamma.dtype).reshape(
                gamma.shape)
    if (need_x or need_h_src or need_weight) and num_src > 0:
        config = _Config(num_src, col_t.numel(), num_x, num_h)
        kernels['_backward_col_kernel'][(num_src, )](
            x, h_dst, h_src, gamma, _or(log_weight, gamma),
            _or(loops, gamma), rowptr_t, col_t, perm_t, grad_out, lse,
            delta, _or(grad_h_partial, gamma),
            grad_x if need_x else gamma,
            grad_h_src if need_h_src else gamma,
            grad_weight if need_weight else gamma, num_dst, num_x, num_h,
            NEED_X=need_x, NEED_H_SRC=need_h_src, NEED_WEIGHT=need_weight,
            SAME_H=same_h and need_h_dst, BLOCK_E=config.block_e,
            BLOCK_X=config.block_x, BLOCK_H=config.block_h,
            num_warps=config.num_warps, **common)
    if same_h:
        grad_h_src = x.new_empty(0)
    return grad_x, grad_h_dst, grad_h_src, grad_gamma, grad_weight


def _gradients(x: Tensor, h_dst: Tensor, h_src: Optional[Tensor],
               gamma: Tensor, log_weight: Optional[Tensor],
               needed: Tuple[bool, ...]) -> Tuple[Tensor, ...]:
    r"""Uninitialised, contiguous gradients of the inputs :obj:`needed`;
    the others empty (no two outputs of an operator may alias)."""
    inputs = (x, h_dst, h_src, gamma, log_weight)
    return tuple(value.new_empty(value.shape) if need else x.new_empty(0)
                 for value, need in zip(inputs, needed))


def _backward_fake(grad_out, lse, x, h_dst, h_src, gamma, log_weight,
                   loop_kept, rowptr, col, rowptr_t, col_t, perm_t,
                   needs_grad):
    need_x, need_h_dst, need_h_src, need_gamma, need_weight = needs_grad
    if h_src is None:
        need_h_dst, need_h_src = need_h_dst or need_h_src, False
    return _gradients(x, h_dst, h_src, gamma, log_weight,
                      (need_x, need_h_dst, need_h_src, need_gamma,
                       need_weight and log_weight is not None))


def _on_device_of_first(function: Callable) -> Callable:
    r"""Runs :obj:`function` with its first tensor's CUDA device current:
    Triton launches on the current device, which for tensors on
    :obj:`cuda:1` under a current :obj:`cuda:0` is the wrong one."""
    @functools.wraps(function)
    def on_device(*args):
        if args[0].device.type != 'cuda':
            return function(*args)
        with torch.cuda.device(args[0].device):
            return function(*args)

    return on_device


# Under torch.compile (and for meta tensors) one opaque operator each way.
_forward_op = custom_kernel(
    'triton_propagate',
    '(Tensor x, Tensor h_dst, Tensor? h_src, Tensor gamma, '
    'Tensor? log_weight, Tensor? loop_kept, Tensor rowptr, Tensor col) -> '
    '(Tensor, Tensor)', _forward_fake)(_on_device_of_first(_forward_impl))

_backward_op = custom_kernel(
    'triton_propagate_backward',
    '(Tensor grad_out, Tensor lse, Tensor x, Tensor h_dst, '
    'Tensor? h_src, Tensor gamma, Tensor? log_weight, Tensor? loop_kept, '
    'Tensor rowptr, Tensor col, Tensor rowptr_t, Tensor col_t, '
    'Tensor perm_t, bool[] needs_grad) -> '
    '(Tensor, Tensor, Tensor, Tensor, Tensor)',
    _backward_fake)(_on_device_of_first(_backward_impl))


# ---------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------
class _TritonPropagate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: CSRArrays, x: Tensor, h_dst: Tensor,
                h_src: Optional[Tensor], gamma: Tensor,
                log_weight: Optional[Tensor],
                loop_kept: Optional[Tensor]) -> Tensor:
        out, lse = _forward_op(x, h_dst, h_src, gamma, log_weight,
                               loop_kept, pattern.rowptr, pattern.col)
        # Index tensors autograd never differentiates: an attribute.
        ctx.pattern = pattern
        ctx.save_for_backward(x, h_dst, h_src, gamma, log_weight,
                              loop_kept, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        pattern = ctx.pattern
        x, h_dst, h_src, gamma, log_weight, loop_kept, lse = \
            ctx.saved_tensors
        needs_grad = tuple(ctx.needs_input_grad[1:6])
        if torch.is_grad_enabled():
            # A second derivative is asked for: differentiate the composed
            # sparse kernels (which have double backward) instead.
            inputs = (x, h_dst, h_src, gamma, log_weight)
            out = composed_attention_propagate(pattern, *inputs, loop_kept)
            wanted = [t for t, needed in zip(inputs, needs_grad) if needed]
            grads = iter(torch.autograd.grad(out, wanted, grad_out,
                                             create_graph=True,
                                             allow_unused=True))
            return (None, *[next(grads) if needed else None
                            for needed in needs_grad], None)

        grads = _backward_op(grad_out, lse, x, h_dst, h_src, gamma,
                             log_weight, loop_kept, pattern.rowptr,
                             pattern.col, pattern.rowptr_t, pattern.col_t,
                             pattern.perm_t, list(needs_grad))
        return (None, *[grad if needed else None
                        for grad, needed in zip(grads, needs_grad)], None)


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------
def triton_attention_propagate(
    edge_index: Adjacency,
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    temperature: Union[Tensor, float],
    log_weight: Optional[Tensor] = None,
    loop_kept: Optional[Tensor] = None,
) -> Tensor:
    r"""APNet's attention propagation in one fused kernel per pass:

    .. math::
        \mathbf{o}_i = \sum_{j} \alpha_{ij} \mathbf{x}_j, \qquad
        \alpha_{ij} = \operatorname{softmax}_j \left( \gamma
        \cos(\mathbf{h}^{dst}_i, \mathbf{h}^{src}_j) + \log w_{ij}
        \right),

    over the entries :math:`(i, j)` of :obj:`edge_index` and, where
    :obj:`loop_kept` is set, a self-loop :math:`(i, i)` with logit
    :math:`\gamma` (:math:`0` for a row :math:`\mathbf{h}^{dst}_i` of
    norm at most :data:`~apnet_pyg.nn.functional.NORM_EPS`) that
    aggregates :math:`\mathbf{x}_i`. Norms are bounded below by
    :data:`~apnet_pyg.nn.functional.NORM_EPS`. A row with nothing to
    aggregate gives :math:`\mathbf{0}`. Equal to
    :func:`composed_attention_propagate` (the
    :func:`~apnet_pyg.nn.functional.edge_cosine` and
    :func:`~apnet_pyg.nn.functional.softmax_spmm` path of
    :class:`~apnet_pyg.nn.APNetConv`), differentiable in :obj:`x`,
    :obj:`h_dst`, :obj:`h_src`, :obj:`temperature` and :obj:`log_weight`.

    Runs on CUDA tensors, and on CPU tensors under Triton's interpreter
    (:obj:`TRITON_INTERPRET=1`, for tests). Inputs may be float16,
    bfloat16, float32 or float64 (accumulated in float32, float64 for
    float64); the output has :obj:`x`'s dtype, each gradient its input's.

    Args:
        edge_index (torch_geometric.EdgeIndex or CSRArrays): the matrix
            of size :math:`(M, N)`, rows the destinations
            (:obj:`edge_index[0]`): an :class:`EdgeIndex` sorted by row
            with its sparse size (entries in its order; pass
            :obj:`edge_index.flip(0)` for PyG's source-to-target
            convention), or
            :func:`~apnet_pyg.nn.functional.csr_arrays` of one, not their
            :meth:`~apnet_pyg.nn.functional.CSRArrays.t`.
        x (torch.Tensor): source features, :obj:`[N, F]`.
        h_dst (torch.Tensor): destination projections, :obj:`[M, H]`.
        h_src (torch.Tensor, optional): source projections, :obj:`[N, H]`;
            :obj:`None` for :obj:`h_src = h_dst` (a square pattern).
        temperature (torch.Tensor or float): :math:`\gamma`, one element.
        log_weight (torch.Tensor, optional): :math:`\log w_{ij}`, one per
            entry in pattern order, :obj:`[nnz]`. (default: :obj:`None`)
        loop_kept (torch.Tensor, optional): boolean :obj:`[M]` (:math:`M
            \leq N`), which rows get the self-loop term.
            (default: :obj:`None`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[M, F]`
    """
    if not isinstance(temperature, Tensor) and isinstance(x, Tensor):
        # In float64 for float64 features (gradcheck), else float32.
        temperature = torch.tensor(
            float(temperature), device=x.device,
            dtype=torch.float64 if x.dtype == torch.float64
            else torch.float32)
    if not is_compiling():
        _check_triton()
    pattern = _as_arrays(edge_index)
    if not is_compiling():
        _check_inputs(pattern, x, h_dst, h_src, temperature, log_weight,
                      loop_kept)
    if h_src is h_dst:  # One tensor given twice to autograd: one gradient.
        h_src = None
    return _TritonPropagate.apply(pattern, x, h_dst, h_src, temperature,
                                  log_weight, loop_kept)


def composed_attention_propagate(
    edge_index: Adjacency,
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    temperature: Union[Tensor, float],
    log_weight: Optional[Tensor] = None,
    loop_kept: Optional[Tensor] = None,
) -> Tensor:
    r""":func:`triton_attention_propagate` from the sparse kernels
    :func:`~apnet_pyg.nn.functional.edge_cosine` and
    :func:`~apnet_pyg.nn.functional.softmax_spmm` (the path of
    :class:`~apnet_pyg.nn.APNetConv` today): the reference of the fused
    kernel, and its second derivative."""
    pattern = _as_arrays(edge_index)
    cos, self_cos = edge_cosine(pattern, h_dst, h_src)
    logits = temperature * cos
    if log_weight is not None:
        logits = logits + log_weight
    if loop_kept is None:
        return softmax_spmm(pattern, logits.to(x.dtype), x)[0]
    # A row with neither entries nor a self-loop would have no finite
    # logit, which softmax_spmm turns into NaN: it gets a constant finite
    # one, and its output is masked to 0.
    empty = (pattern.rowptr[1:] == pattern.rowptr[:-1]) & ~loop_kept
    loop_logits = torch.where(
        loop_kept, temperature * self_cos,
        torch.where(empty, 0.0, float('-inf')).to(self_cos.dtype))
    out = softmax_spmm(pattern, logits.to(x.dtype), x,
                       loop_logits.to(x.dtype))[0]
    return torch.where(empty.unsqueeze(-1), 0.0, out)


def _check_triton() -> None:
    if not is_triton_available():
        raise RuntimeError("triton_attention_propagate needs Triton, which "
                           "is not installed: pip install triton (it ships "
                           "with PyTorch's CUDA builds), or use the sparse "
                           "kernels (kernel='sparse')")


def _check_inputs(pattern: CSRArrays, x: Tensor, h_dst: Tensor,
                  h_src: Optional[Tensor], temperature: Tensor,
                  log_weight: Optional[Tensor],
                  loop_kept: Optional[Tensor]) -> None:
    if pattern.transposed:
        raise ValueError("'edge_index' is transposed CSRArrays (.t()): pass "
                         "the arrays csr_arrays() read, rows the "
                         "destination nodes")
    num_dst, num_src = pattern.size
    operands = [('x', x, 2, num_src), ('h_dst', h_dst, 2, num_dst)]
    if h_src is not None:
        operands.append(('h_src', h_src, 2, num_src))
    if log_weight is not None:
        operands.append(('log_weight', log_weight, 1, pattern.nnz))
    for name, tensor, dim, rows in operands:
        check_features(tensor, name, dim=dim)
        if tensor.dtype not in _FLOAT_DTYPES:
            raise ValueError(f"'{name}' has dtype {tensor.dtype}; the Triton "
                             f"kernel takes float16, bfloat16, float32 or "
                             f"float64")
        if tensor.size(0) != rows:
            raise ValueError(f"'{name}' must have {rows} rows for a pattern "
                             f"of size {pattern.size} (got shape "
                             f"{tuple(tensor.shape)})")
        check_same_device(tensor, name, pattern.rowptr, 'pattern')
    if h_src is None and num_dst != num_src:
        raise ValueError(f"h_src=None (h_src = h_dst) needs a square "
                         f"pattern (got size {pattern.size}); pass 'h_src'")
    if h_src is not None and h_src.size(1) != h_dst.size(1):
        raise ValueError(f"'h_src' and 'h_dst' must have the same number of "
                         f"features (got {h_src.size(1)} and "
                         f"{h_dst.size(1)})")
    for name, width in (('x', x.size(1)), ('h_dst', h_dst.size(1))):
        if width > MAX_FEATURES:
            raise ValueError(f"'{name}' has {width} features, more than the "
                             f"Triton kernel's {MAX_FEATURES} (one tile a "
                             f"row): use the sparse kernels "
                             f"(kernel='sparse')")
    if not isinstance(temperature, Tensor) or temperature.numel() != 1 or \
            not temperature.is_floating_point():
        raise ValueError(f"'temperature' must be a float or a floating-point "
                         f"tensor of one element (got "
                         f"{_describe(temperature)})")
    check_same_device(temperature, 'temperature', x)
    if loop_kept is not None:
        if not isinstance(loop_kept, Tensor) or loop_kept.dim() != 1 or \
                loop_kept.dtype != torch.bool or loop_kept.numel() != num_dst:
            raise ValueError(f"'loop_kept' must be a boolean tensor with one "
                             f"entry per destination row, [{num_dst}] (got "
                             f"{_describe(loop_kept)})")
        if num_dst > num_src:
            raise ValueError(f"'loop_kept' needs a pattern with no more rows "
                             f"than columns (got size {pattern.size}): row "
                             f"i's self-loop aggregates x[i]")
        check_same_device(loop_kept, 'loop_kept', x)
    device = x.device
    if device.type not in ('cpu', 'cuda', 'meta'):
        raise ValueError(f"The Triton kernel runs on CUDA tensors (got "
                         f"{device.type} tensors): use the sparse kernels "
                         f"(kernel='sparse')")
    if device.type == 'cpu' and not interpreter_enabled():
        raise ValueError("The Triton kernel runs on CUDA tensors (got CPU "
                         "tensors): move them to a GPU, use the sparse "
                         "kernels on CPU (kernel='sparse'), or set "
                         "TRITON_INTERPRET=1 to run it under Triton's "
                         "interpreter (slow; for tests)")


def _describe(value: Any) -> str:
    if isinstance(value, Tensor):
        return f'shape {tuple(value.shape)}, dtype {value.dtype}'
    return type(value).__name__


def propagation_floor_bytes(num_dst: int, num_src: int, num_entries: int,
                            x_channels: int, h_channels: int,
                            dtype: torch.dtype = torch.float32,
                            index_dtype: torch.dtype = torch.int32,
                            same_h: bool = True, weights: bool = False,
                            loops: bool = False,
                            backward: bool = False) -> int:
    r"""The bytes a propagation must move at least, the floor against
    which achieved bandwidth is stated: each entry's column index (and log
    weight) read and its source rows of :math:`\mathbf{h}` and
    :math:`\mathbf{x}` gathered once, each node row read or written once.

    With :math:`b` the element size of :obj:`dtype`, :math:`b_i` that of
    :obj:`index_dtype`, the forward pass moves at least
    :math:`|\mathcal{E}| (b_i [+ b] + (F + H) b) + (M + 1) b_i + M (H + F)
    b` (the entries; the row pointers; :math:`\mathbf{h}^{dst}` read, the
    output written), plus :math:`M (1 + F b)` with self-loops (the mask,
    :math:`\mathbf{x}_i`). With :obj:`backward=True`, the forward and
    backward passes together, the backward pass counted the same way: the
    entries gathered once more (and the weights' gradient written),
    :math:`\partial L / \partial \mathbf{o}` and :math:`\mathbf{h}^{dst}`
    read, :math:`\partial L / \partial \mathbf{x}` and :math:`\partial L
    / \partial \mathbf{h}` written. The kernels here gather each entry
    three times in all (forward, the row pass and the column pass of the
    backward pass), so their own traffic is above this floor.

    Args:
        num_dst (int): :math:`M`, the destination rows.
        num_src (int): :math:`N`, the source rows.
        num_entries (int): :math:`|\mathcal{E}|`.
        x_channels (int): :math:`F`, the width of :math:`\mathbf{x}`.
        h_channels (int): :math:`H`, the width of :math:`\mathbf{h}`.
        dtype (torch.dtype): the features' dtype.
        index_dtype (torch.dtype): the pattern's index dtype.
        same_h (bool): :math:`\mathbf{h}^{src} = \mathbf{h}^{dst}` (one
            gradient).
        weights (bool): with log weights.
        loops (bool): with self-loops.
        backward (bool): forward and backward pass together.
    """
    element = torch.empty((), dtype=dtype).element_size()
    index = torch.empty((), dtype=index_dtype).element_size()
    entries = num_entries * (index + (element if weights else 0) +
                             (x_channels + h_channels) * element)
    pointers = (num_dst + 1) * index
    loop_bytes = num_dst * (1 + x_channels * element) if loops else 0
    forward = entries + pointers + loop_bytes + \
        num_dst * (h_channels + x_channels) * element
    if not backward:
        return forward
    written = num_src * (x_channels + h_channels) + \
        (0 if same_h else num_dst * h_channels) + \
        (num_entries if weights else 0)
    return forward + entries + pointers + loop_bytes + \
        (num_dst * (x_channels + h_channels) + written) * element
