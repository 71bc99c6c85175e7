r"""The three Triton kernels of the fused propagation (forward, backward
rows, backward columns), jitted on first use, and Triton's lazy import."""

# Annotations as strings: the kernels' tl.constexpr is read by Triton from
# the source when it jits them, and Triton is not imported here.
from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any, Dict, Optional

import torch
from torch import Tensor

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
    x_ptr,
    h_dst_ptr,
    h_src_ptr,
    gamma_ptr,
    log_weight_ptr,
    loop_ptr,
    rowptr_ptr,
    col_ptr,
    out_ptr,
    lse_ptr,
    num_x,
    num_h,
    HAS_WEIGHT: tl.constexpr,
    HAS_LOOPS: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_X: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ACC: tl.constexpr,
    EPS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_ptr + row).to(tl.int64)
    end = tl.load(rowptr_ptr + row + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)

    h_i = tl.load(h_dst_ptr + row * num_h + fh, mask=fh_mask, other=0.0).to(
        ACC
    )
    norm_i = tl.maximum(tl.sqrt(tl.reduce(h_i * h_i, 0, _ADD)), EPS)
    if HAS_LOOPS:
        # The self-loop starts the running softmax: logit gamma * self-cos
        # (1, or 0 for a row of norm <= EPS), value x_i; -inf for none.
        kept = tl.load(loop_ptr + row) != 0
        loop_logit = gamma * (norm_i > EPS).to(ACC)
        m = tl.where(kept, loop_logit, float('-inf')).to(ACC)
        s = kept.to(ACC)
        acc = tl.load(
            x_ptr + row * num_x + fx, mask=fx_mask & kept, other=0.0
        ).to(ACC)
    else:
        m = tl.full((), float('-inf'), ACC)
        s = tl.full((), 0.0, ACC)
        acc = tl.full((BLOCK_X,), 0.0, ACC)

    first = start
    while first < end:  # Not range(): see _kernels.
        entry = first + lanes
        first += BLOCK_E
        entry_mask = entry < end
        col = tl.load(col_ptr + entry, mask=entry_mask, other=0).to(tl.int64)
        h_j = tl.load(
            h_src_ptr + col[:, None] * num_h + fh[None, :],
            mask=entry_mask[:, None] & fh_mask[None, :],
            other=0.0,
        ).to(ACC)
        norm_j = tl.maximum(tl.sqrt(tl.reduce(h_j * h_j, 1, _ADD)), EPS)
        cos = tl.reduce(h_j * h_i[None, :], 1, _ADD) / (norm_i * norm_j)
        z = gamma * cos
        if HAS_WEIGHT:
            z += tl.load(
                log_weight_ptr + entry, mask=entry_mask, other=0.0
            ).to(ACC)
        z = tl.where(entry_mask, z, float('-inf'))
        m_new = tl.maximum(m, tl.reduce(z, 0, _MAX))
        # Nothing finite yet (no self-loop, all masked): shift by 0, not
        # by -inf, so that exp() gives 0 rather than NaN.
        shift = tl.where(m_new == float('-inf'), 0.0, m_new).to(ACC)
        p = tl.exp(z - shift)
        correction = tl.exp(m - shift)
        s = s * correction + tl.reduce(p, 0, _ADD)
        x_j = tl.load(
            x_ptr + col[:, None] * num_x + fx[None, :],
            mask=entry_mask[:, None] & fx_mask[None, :],
            other=0.0,
        ).to(ACC)
        acc = acc * correction + tl.reduce(p[:, None] * x_j, 0, _ADD)
        m = m_new

    # A row with nothing to aggregate (s = 0) gets 0 and lse = -inf.
    nonempty = s > 0
    s_safe = tl.where(nonempty, s, 1.0).to(ACC)
    tl.store(
        out_ptr + row * num_x + fx,
        (acc / s_safe).to(out_ptr.dtype.element_ty),
        mask=fx_mask,
    )
    lse = tl.where(nonempty, m + tl.log(s_safe), float('-inf')).to(ACC)
    tl.store(lse_ptr + row, lse)


def _backward_row_kernel(
    x_ptr,
    h_dst_ptr,
    h_src_ptr,
    gamma_ptr,
    log_weight_ptr,
    loop_ptr,
    rowptr_ptr,
    col_ptr,
    grad_out_ptr,
    lse_ptr,
    grad_h_dst_ptr,
    grad_gamma_ptr,
    delta_ptr,
    num_x,
    num_h,
    HAS_WEIGHT: tl.constexpr,
    HAS_LOOPS: tl.constexpr,
    NEED_H_DST: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_X: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ACC: tl.constexpr,
    EPS: tl.constexpr,
):
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
    grad_o = tl.load(
        grad_out_ptr + row * num_x + fx, mask=fx_mask, other=0.0
    ).to(ACC)
    h_i = tl.load(h_dst_ptr + row * num_h + fh, mask=fh_mask, other=0.0).to(
        ACC
    )
    norm_i = tl.maximum(tl.sqrt(tl.reduce(h_i * h_i, 0, _ADD)), EPS)

    # dL/dz_ij = alpha_ij (g_ij - D_i), D_i = sum_j alpha_ij g_ij: the
    # sums over j of alpha g and of alpha apart, D_i applied at the end.
    # D_i from the recomputed alpha, in the accumulation dtype, not as
    # <dL/do_i, o_i> from a rounded half-precision o_i (which loses
    # digits where g_ij - D_i cancels).
    sum_ag_u = tl.full((BLOCK_H,), 0.0, ACC)  # alpha g h_j / |h_j|
    sum_a_u = tl.full((BLOCK_H,), 0.0, ACC)  # alpha h_j / |h_j|
    sum_ag_cos = tl.full((), 0.0, ACC)
    sum_a_cos = tl.full((), 0.0, ACC)
    delta = tl.full((), 0.0, ACC)
    first = start
    while first < end:  # Not range(): see _kernels.
        entry = first + lanes
        first += BLOCK_E
        entry_mask = entry < end
        col = tl.load(col_ptr + entry, mask=entry_mask, other=0).to(tl.int64)
        h_j = tl.load(
            h_src_ptr + col[:, None] * num_h + fh[None, :],
            mask=entry_mask[:, None] & fh_mask[None, :],
            other=0.0,
        ).to(ACC)
        norm_j = tl.maximum(tl.sqrt(tl.reduce(h_j * h_j, 1, _ADD)), EPS)
        cos = tl.reduce(h_j * h_i[None, :], 1, _ADD) / (norm_i * norm_j)
        z = gamma * cos
        if HAS_WEIGHT:
            z += tl.load(
                log_weight_ptr + entry, mask=entry_mask, other=0.0
            ).to(ACC)
        alpha = tl.exp(tl.where(entry_mask, z - lse, float('-inf')))
        x_j = tl.load(
            x_ptr + col[:, None] * num_x + fx[None, :],
            mask=entry_mask[:, None] & fx_mask[None, :],
            other=0.0,
        ).to(ACC)
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
        self_alpha = tl.exp(
            tl.where(kept, gamma * self_cos - lse, float('-inf'))
        )
        x_i = tl.load(
            x_ptr + row * num_x + fx, mask=fx_mask & kept, other=0.0
        ).to(ACC)
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
        grad_h_i = (
            gamma / norm_i * (sum_ag_u - delta * sum_a_u - grad_cos * unit_i)
        )
        tl.store(
            grad_h_dst_ptr + row * num_h + fh,
            grad_h_i.to(grad_h_dst_ptr.dtype.element_ty),
            mask=fh_mask,
        )


def _backward_col_kernel(
    x_ptr,
    h_dst_ptr,
    h_src_ptr,
    gamma_ptr,
    log_weight_ptr,
    loop_ptr,
    rowptr_t_ptr,
    col_t_ptr,
    perm_t_ptr,
    grad_out_ptr,
    lse_ptr,
    delta_ptr,
    grad_h_partial_ptr,
    grad_x_ptr,
    grad_h_src_ptr,
    grad_logit_ptr,
    num_dst,
    num_x,
    num_h,
    HAS_WEIGHT: tl.constexpr,
    HAS_LOOPS: tl.constexpr,
    NEED_X: tl.constexpr,
    NEED_H_SRC: tl.constexpr,
    NEED_WEIGHT: tl.constexpr,
    SAME_H: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_X: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ACC: tl.constexpr,
    EPS: tl.constexpr,
):
    src = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_t_ptr + src).to(tl.int64)
    end = tl.load(rowptr_t_ptr + src + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)

    h_j = tl.load(h_src_ptr + src * num_h + fh, mask=fh_mask, other=0.0).to(
        ACC
    )
    norm_j = tl.maximum(tl.sqrt(tl.reduce(h_j * h_j, 0, _ADD)), EPS)
    x_j = tl.load(x_ptr + src * num_x + fx, mask=fx_mask, other=0.0).to(ACC)
    grad_x = tl.full((BLOCK_X,), 0.0, ACC)
    if HAS_LOOPS:
        if NEED_X:
            # Destination src's self-loop aggregates x_src: its share of
            # dL/dx_src (loops need num_dst <= num_src).
            kept = (
                tl.load(loop_ptr + src, mask=src < num_dst, other=0) != 0
            ) & (src < num_dst)
            if SAME_H:
                self_norm = norm_j
            else:
                h_self = tl.load(
                    h_dst_ptr + src * num_h + fh,
                    mask=fh_mask & kept,
                    other=0.0,
                ).to(ACC)
                self_norm = tl.sqrt(tl.reduce(h_self * h_self, 0, _ADD))
            self_cos = (self_norm > EPS).to(ACC)
            lse_j = tl.load(lse_ptr + src, mask=kept, other=0.0).to(ACC)
            self_alpha = tl.exp(
                tl.where(kept, gamma * self_cos - lse_j, float('-inf'))
            )
            grad_o_j = tl.load(
                grad_out_ptr + src * num_x + fx, mask=fx_mask & kept, other=0.0
            ).to(ACC)
            grad_x += self_alpha * grad_o_j

    grad_h = tl.full((BLOCK_H,), 0.0, ACC)  # sum_i dz_ij h_i / |h_i|
    grad_cos = tl.full((), 0.0, ACC)  # sum_i dz_ij cos_ij
    first = start
    while first < end:  # Not range(): see _kernels.
        entry = first + lanes
        first += BLOCK_E
        entry_mask = entry < end
        dst = tl.load(col_t_ptr + entry, mask=entry_mask, other=0).to(tl.int64)
        h_i = tl.load(
            h_dst_ptr + dst[:, None] * num_h + fh[None, :],
            mask=entry_mask[:, None] & fh_mask[None, :],
            other=0.0,
        ).to(ACC)
        norm_i = tl.maximum(tl.sqrt(tl.reduce(h_i * h_i, 1, _ADD)), EPS)
        cos = tl.reduce(h_i * h_j[None, :], 1, _ADD) / (norm_i * norm_j)
        z = gamma * cos
        if HAS_WEIGHT or NEED_WEIGHT:
            # Per-entry values are stored in CSR order: entry perm_t[k].
            original = tl.load(
                perm_t_ptr + entry, mask=entry_mask, other=0
            ).to(tl.int64)
        if HAS_WEIGHT:
            z += tl.load(
                log_weight_ptr + original, mask=entry_mask, other=0.0
            ).to(ACC)
        lse_i = tl.load(lse_ptr + dst, mask=entry_mask, other=0.0).to(ACC)
        alpha = tl.exp(tl.where(entry_mask, z - lse_i, float('-inf')))
        grad_o = tl.load(
            grad_out_ptr + dst[:, None] * num_x + fx[None, :],
            mask=entry_mask[:, None] & fx_mask[None, :],
            other=0.0,
        ).to(ACC)
        if NEED_X:
            grad_x += tl.reduce(alpha[:, None] * grad_o, 0, _ADD)
        if NEED_H_SRC or NEED_WEIGHT:
            delta_i = tl.load(delta_ptr + dst, mask=entry_mask, other=0.0).to(
                ACC
            )
            grad_z = alpha * (
                tl.reduce(grad_o * x_j[None, :], 1, _ADD) - delta_i
            )
            if NEED_WEIGHT:  # d z_ij / d log w_ij = 1
                tl.store(
                    grad_logit_ptr + original,
                    grad_z.to(grad_logit_ptr.dtype.element_ty),
                    mask=entry_mask,
                )
            if NEED_H_SRC:
                grad_h += tl.reduce((grad_z / norm_i)[:, None] * h_i, 0, _ADD)
                grad_cos += tl.reduce(grad_z * cos, 0, _ADD)

    if NEED_X:
        tl.store(
            grad_x_ptr + src * num_x + fx,
            grad_x.to(grad_x_ptr.dtype.element_ty),
            mask=fx_mask,
        )
    if NEED_H_SRC:
        unit_j = h_j / norm_j * (norm_j > EPS).to(ACC)
        grad_h_j = gamma / norm_j * (grad_h - grad_cos * unit_j)
        if SAME_H:  # h_src is h_dst: add the row kernel's part.
            grad_h_j += tl.load(
                grad_h_partial_ptr + src * num_h + fh, mask=fh_mask, other=0.0
            ).to(ACC)
        tl.store(
            grad_h_src_ptr + src * num_h + fh,
            grad_h_j.to(grad_h_src_ptr.dtype.element_ty),
            mask=fh_mask,
        )


_KERNEL_FUNCTIONS = (
    _forward_kernel,
    _backward_row_kernel,
    _backward_col_kernel,
)


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


def _acc_dtype(*tensors: Optional[Tensor]) -> Any:
    _load_triton()
    double = any(t is not None and t.dtype == torch.float64 for t in tensors)
    return tl.float64 if double else tl.float32
