r"""The Triton kernels of the fused propagation: the forward pass, the
row dot :math:`D_i`, and the backward passes (column, row, symmetric).

This module imports Triton and jits its kernels at import: it is imported
by :mod:`~apnet_pyg.nn.triton_propagation.launch` behind an import guard,
in the mode (compiled or interpreted) Triton's own library runs in.

The entry kernels run one program per node and loop over that node's
entries (CSR of the matrix or of its transpose) in blocks of
:obj:`BLOCK_E`,
holding a whole feature row in one tile (:obj:`BLOCK_X` features of
:math:`\mathbf{x}`, :obj:`BLOCK_H` of :math:`\mathbf{h}`): gathers of
whole rows, coalesced and 16-byte wide, and each output row written once
by the one program that owns it (no atomics). Loads are converted to
:obj:`ACC` (float32, float64 for float64 inputs) and accumulated there.
"""

import triton
import triton.language as tl

__all__ = [
    'forward_kernel',
    'output_dot_kernel',
    'column_backward_kernel',
    'row_backward_kernel',
    'symmetric_backward_kernel',
    'dropout_scale_kernel',
    'INTERPRETED',
    'CONFIGS',
    'KEY',
    'PRUNE',
    'prune_configs',
]

#: Whether these kernels were jitted for Triton's interpreter (the launch
#: module imports this module in the mode Triton's library runs in).
INTERPRETED = bool(triton.knobs.runtime.interpret)


# ---------------------------------------------------------------------------
# Autotuning: the configurations, pruned to the tile sizes that fit
# ---------------------------------------------------------------------------
def _configs(blocks, warps):
    if INTERPRETED:
        # One small configuration: the interpreter runs Python (no timing).
        return [triton.Config({'BLOCK_E': 4}, num_warps=1, num_stages=1)]
    # num_stages=1: the entry loops of rows of mean degree below ~32 run
    # one or two iterations, which software pipelining does not speed up;
    # many programs per SM hide the gather latency instead.
    return [
        triton.Config({'BLOCK_E': block}, num_warps=warp, num_stages=1)
        for block in blocks
        for warp in warps
    ]


def prune_configs(configs, named_args, **kwargs):
    r"""Keeps the tiles of 16 to 32 elements a thread (of the widest
    gathered tile, :obj:`[BLOCK_E, width]`) whose :obj:`BLOCK_E` is the
    mean degree's power of two (:obj:`degree`), half or twice it: about
    five candidates a key, so that tuning costs a few compilations."""
    width = max(kwargs.get('BLOCK_X', 16), kwargs.get('BLOCK_H', 16))
    degree = named_args['degree']
    wanted = {
        min(max(block, 4), 32) for block in (degree // 2, degree, 2 * degree)
    }

    def per_thread(config):
        return config.kwargs['BLOCK_E'] * width // (32 * config.num_warps)

    kept = [
        config
        for config in configs
        if config.kwargs['BLOCK_E'] in wanted
        and 16 <= per_thread(config) <= 32
    ]
    if kept:
        return kept
    # The widest rows (4,096 features): the smallest tile, the most warps.
    return [min(configs, key=lambda c: (c.kwargs['BLOCK_E'], -c.num_warps))]


#: The candidates of every entry loop (before :func:`prune_configs`).
CONFIGS = _configs((2, 4, 8, 16, 32), (1, 2, 4, 8))
#: The keys: the widths and the mean degree's power of two (each tensor
#: argument's dtype is part of the key too).
KEY = ['num_x', 'num_h', 'degree']
PRUNE = {'early_config_prune': prune_configs}


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
@triton.jit
def _gather_rows(ptr, rows, row_mask, features, feature_mask, width):
    r"""Rows :obj:`rows` of a row-major matrix of :obj:`width` columns, a
    :obj:`[BLOCK_E, BLOCK_F]` tile (zero where masked)."""
    return tl.load(
        ptr + rows[:, None] * width + features[None, :],
        mask=row_mask[:, None] & feature_mask[None, :],
        other=0.0,
    )


@triton.jit
def _scores(h_other, h_self, norm_self, gamma, EPS: tl.constexpr):
    r"""The cosines of the gathered rows :obj:`h_other` with :obj:`h_self`
    (norms clamped at :obj:`EPS`) and their logits :math:`\gamma \cos`:
    what the forward pass computes and every backward pass recomputes.
    Returns the clamped norms of :obj:`h_other`, the cosines and the
    logits."""
    norm_other = tl.maximum(tl.sqrt(tl.sum(h_other * h_other, 1)), EPS)
    cos = tl.sum(h_other * h_self[None, :], 1) / (norm_self * norm_other)
    return norm_other, cos, gamma * cos


@triton.jit
def _self_loop_logit(
    row,
    norm_self,
    gamma,
    loop_ptr,
    loop_weight_ptr,
    loop_weight_stride,
    HAS_LOOP_WEIGHT: tl.constexpr,
    EPS: tl.constexpr,
):
    r"""Whether row :obj:`row` keeps its self-loop, the loop's cosine
    (:math:`1`, or :math:`0` for a row of norm at most :obj:`EPS`) and its
    logit :math:`\gamma \cos_{ii} + \log w_{ii}`."""
    kept = tl.load(loop_ptr + row) != 0
    self_cos = (norm_self > EPS).to(norm_self.dtype)
    logit = gamma * self_cos
    if HAS_LOOP_WEIGHT:
        logit += tl.load(loop_weight_ptr + row * loop_weight_stride).to(
            norm_self.dtype
        )
    return kept, self_cos, logit


@triton.jit
def _dropout_scale(seed_ptr, offsets, p, keep_scale):
    r"""Attention dropout's factor for the draws :obj:`offsets` (an entry
    :math:`k` of the pattern, or :obj:`nnz` plus a row for its
    self-loop): :math:`0` with probability :obj:`p`, else
    :obj:`keep_scale` (:math:`1 / (1 - p)`); counter-based (Philox from
    the seed at :obj:`seed_ptr`), so the forward and backward passes draw
    the same without storing them."""
    kept = tl.rand(tl.load(seed_ptr), offsets) >= p
    return tl.where(kept, keep_scale, 0.0)


@triton.jit
def _unit(h, norm, EPS: tl.constexpr):
    r""":math:`\mathbf{h} / |\mathbf{h}|` where the norm is not clamped,
    :math:`0` where it is (the clamped norm has no gradient)."""
    return h / norm * (norm > EPS).to(norm.dtype)


# ---------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------
@triton.autotune(CONFIGS, key=KEY, prune_configs_by=PRUNE)
@triton.jit(do_not_specialize=['degree'])
def forward_kernel(
    x_ptr,
    h_dst_ptr,
    h_src_ptr,
    gamma_ptr,
    log_weight_ptr,
    loop_ptr,
    loop_weight_ptr,
    loop_weight_stride,
    rowptr_ptr,
    col_ptr,
    out_ptr,
    out_acc_ptr,
    lse_ptr,
    seed_ptr,
    p,
    keep_scale,
    nnz,
    num_x,
    num_h,
    degree,
    HAS_WEIGHT: tl.constexpr,
    HAS_LOOPS: tl.constexpr,
    HAS_LOOP_WEIGHT: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    STORE_ACC: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_X: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ACC: tl.constexpr,
    EPS: tl.constexpr,
):
    r"""One destination row :math:`i`: the online softmax over its entries
    (FlashAttention's running maximum :math:`m`, sum :math:`s` and
    weighted sum), started by the self-loop where it is kept. Stores
    :math:`\mathbf{o}_i` (and in :obj:`ACC` where :obj:`STORE_ACC`, for
    :math:`D_i` of a half-precision output) and
    :math:`\mathrm{lse}_i = m + \log s`; a row with nothing to aggregate
    gets :math:`\mathbf{0}` and :math:`-\infty`. With
    :obj:`HAS_DROPOUT` the weighted sum takes each term times its dropout
    factor, the sum :math:`s` none."""
    row = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_ptr + row).to(tl.int64)
    end = tl.load(rowptr_ptr + row + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)

    h_i = tl.load(h_dst_ptr + row * num_h + fh, mask=fh_mask, other=0.0)
    h_i = h_i.to(ACC)
    norm_i = tl.maximum(tl.sqrt(tl.sum(h_i * h_i, 0)), EPS)
    if HAS_LOOPS:
        kept, self_cos, loop_logit = _self_loop_logit(
            row,
            norm_i,
            gamma,
            loop_ptr,
            loop_weight_ptr,
            loop_weight_stride,
            HAS_LOOP_WEIGHT,
            EPS,
        )
        m = tl.where(kept, loop_logit, float('-inf'))
        s = kept.to(ACC)
        acc = tl.load(
            x_ptr + row * num_x + fx, mask=fx_mask & kept, other=0.0
        ).to(ACC)
        if HAS_DROPOUT:
            acc *= _dropout_scale(seed_ptr, nnz + row, p, keep_scale).to(ACC)
    else:
        m = tl.full((), float('-inf'), ACC)
        s = tl.zeros((), ACC)
        acc = tl.zeros((BLOCK_X,), ACC)

    for first in range(start, end, BLOCK_E):
        entries = first + lanes
        mask = entries < end
        cols = tl.load(col_ptr + entries, mask=mask, other=0).to(tl.int64)
        # Both gathers issued before the arithmetic: in flight together.
        h_j = _gather_rows(h_src_ptr, cols, mask, fh, fh_mask, num_h)
        x_j = _gather_rows(x_ptr, cols, mask, fx, fx_mask, num_x)
        norm_j, cos, z = _scores(h_j.to(ACC), h_i, norm_i, gamma, EPS)
        if HAS_WEIGHT:
            z += tl.load(log_weight_ptr + entries, mask=mask).to(ACC)
        z = tl.where(mask, z, float('-inf'))
        m_new = tl.maximum(m, tl.max(z, 0))
        # Nothing finite yet (no self-loop, all masked): shift by 0, not
        # by -inf, so that exp() gives 0 rather than NaN.
        shift = tl.where(m_new == float('-inf'), 0.0, m_new)
        weight = tl.exp(z - shift)
        correction = tl.exp(m - shift)
        s = s * correction + tl.sum(weight, 0)
        if HAS_DROPOUT:
            weight *= _dropout_scale(seed_ptr, entries, p, keep_scale).to(ACC)
        acc = acc * correction + tl.sum(weight[:, None] * x_j.to(ACC), 0)
        m = m_new

    nonempty = s > 0
    s_safe = tl.where(nonempty, s, 1.0)
    out = acc / s_safe
    tl.store(
        out_ptr + row * num_x + fx,
        out.to(out_ptr.dtype.element_ty),
        mask=fx_mask,
    )
    if STORE_ACC:
        tl.store(out_acc_ptr + row * num_x + fx, out, mask=fx_mask)
    tl.store(lse_ptr + row, tl.where(nonempty, m + tl.log(s_safe), m))


# ---------------------------------------------------------------------------
# Backward: D_i
# ---------------------------------------------------------------------------
@triton.jit
def output_dot_kernel(
    grad_out_ptr,
    out_ptr,
    delta_ptr,
    num_rows,
    num_x,
    BLOCK_R: tl.constexpr,
    BLOCK_X: tl.constexpr,
    ACC: tl.constexpr,
):
    r""":math:`D_i = \langle \partial L / \partial \mathbf{o}_i,
    \mathbf{o}_i \rangle = \sum_j \alpha_{ij} g_{ij}` for
    :obj:`BLOCK_R` rows (:obj:`out_ptr`: the output in :obj:`ACC`)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < num_rows
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    grad_o = _gather_rows(grad_out_ptr, rows, row_mask, fx, fx_mask, num_x)
    out = _gather_rows(out_ptr, rows, row_mask, fx, fx_mask, num_x)
    delta = tl.sum(grad_o.to(ACC) * out.to(ACC), 1)
    tl.store(delta_ptr + rows, delta, mask=row_mask)


# ---------------------------------------------------------------------------
# Backward: columns (the transpose's CSR), then rows
# ---------------------------------------------------------------------------
@triton.autotune(CONFIGS, key=KEY, prune_configs_by=PRUNE)
@triton.jit(do_not_specialize=['degree'])
def column_backward_kernel(
    x_ptr,
    h_dst_ptr,
    h_src_ptr,
    gamma_ptr,
    log_weight_ptr,
    loop_ptr,
    loop_weight_ptr,
    loop_weight_stride,
    rowptr_t_ptr,
    col_t_ptr,
    perm_t_ptr,
    grad_out_ptr,
    lse_ptr,
    delta_ptr,
    grad_x_ptr,
    grad_h_src_ptr,
    grad_z_ptr,
    grad_loop_ptr,
    gamma_part_ptr,
    seed_ptr,
    p,
    keep_scale,
    nnz,
    num_dst,
    num_x,
    num_h,
    degree,
    HAS_WEIGHT: tl.constexpr,
    HAS_LOOPS: tl.constexpr,
    HAS_LOOP_WEIGHT: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    NEED_X: tl.constexpr,
    NEED_Z: tl.constexpr,
    NEED_H_SRC: tl.constexpr,
    STORE_Z: tl.constexpr,
    STORE_LOOP: tl.constexpr,
    SAME_H: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_X: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ACC: tl.constexpr,
    EPS: tl.constexpr,
):
    r"""One source :math:`j` over its entries :math:`(i, j)` (the
    transpose's CSR; per-entry values of entry :obj:`perm_t[k]`): gathers
    :math:`\mathbf{h}^{dst}_i`, :math:`\partial L / \partial \mathbf{o}_i`,
    :math:`\mathrm{lse}_i` and :math:`D_i`, recomputes
    :math:`\alpha_{ij}`, and gives :math:`\partial L / \partial
    \mathbf{x}_j = \sum_i \alpha_{ij} \partial L / \partial \mathbf{o}_i`,
    :math:`\partial L / \partial z_{ij} = \alpha_{ij} (g_{ij} - D_i)`
    (stored per entry where :obj:`STORE_Z`), :math:`\partial L / \partial
    \mathbf{h}^{src}_j` and this source's share of :math:`\partial L /
    \partial \gamma`; and for the destination :math:`j`'s self-loop (which
    aggregates :math:`\mathbf{x}_j`), its share of both and
    :math:`\partial L / \partial z_{jj}` (stored where :obj:`STORE_LOOP`).
    Each output only where its :obj:`NEED_` or :obj:`STORE_` flag is set.
    With :obj:`HAS_DROPOUT`, :math:`\alpha_{ij}` aggregates times its
    dropout factor :math:`d_{ij}`: :math:`g_{ij}` and
    :math:`\partial L / \partial \mathbf{x}_j` take it."""
    src = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_t_ptr + src).to(tl.int64)
    end = tl.load(rowptr_t_ptr + src + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)

    h_j = tl.load(h_src_ptr + src * num_h + fh, mask=fh_mask, other=0.0)
    h_j = h_j.to(ACC)
    norm_j = tl.maximum(tl.sqrt(tl.sum(h_j * h_j, 0)), EPS)
    x_j = tl.load(x_ptr + src * num_x + fx, mask=fx_mask, other=0.0).to(ACC)
    grad_x = tl.zeros((BLOCK_X,), ACC)
    grad_u = tl.zeros((BLOCK_H,), ACC)  # sum_i dz_ij h_i / |h_i|
    grad_cos = tl.zeros((), ACC)  # sum_i dz_ij cos_ij

    for first in range(start, end, BLOCK_E):
        entries = first + lanes
        mask = entries < end
        dst = tl.load(col_t_ptr + entries, mask=mask, other=0).to(tl.int64)
        h_i = _gather_rows(h_dst_ptr, dst, mask, fh, fh_mask, num_h)
        grad_o = _gather_rows(grad_out_ptr, dst, mask, fx, fx_mask, num_x)
        lse_i = tl.load(lse_ptr + dst, mask=mask, other=0.0)
        if NEED_Z:
            delta_i = tl.load(delta_ptr + dst, mask=mask, other=0.0)
        if HAS_WEIGHT or STORE_Z or HAS_DROPOUT:
            original = tl.load(perm_t_ptr + entries, mask=mask, other=0)
            original = original.to(tl.int64)
        h_i = h_i.to(ACC)
        grad_o = grad_o.to(ACC)
        norm_i, cos, z = _scores(h_i, h_j, norm_j, gamma, EPS)
        if HAS_WEIGHT:
            z += tl.load(log_weight_ptr + original, mask=mask).to(ACC)
        alpha = tl.exp(tl.where(mask, z - lse_i, float('-inf')))
        kept = alpha
        if HAS_DROPOUT:
            kept = alpha * _dropout_scale(
                seed_ptr, original, p, keep_scale
            ).to(ACC)
        if NEED_X:
            grad_x += tl.sum(kept[:, None] * grad_o, 0)
        if NEED_Z:
            grad_z = kept * tl.sum(grad_o * x_j[None, :], 1) - alpha * delta_i
            if STORE_Z:
                tl.store(grad_z_ptr + original, grad_z, mask=mask)
            grad_cos += tl.sum(grad_z * cos, 0)
            if NEED_H_SRC:
                grad_u += tl.sum((grad_z / norm_i)[:, None] * h_i, 0)

    grad_gamma = grad_cos
    if HAS_LOOPS:
        # Destination src's self-loop (loops need num_dst <= num_src).
        has_row = src < num_dst
        row = tl.where(has_row, src, 0)
        if SAME_H:
            norm_self = norm_j
        else:
            h_self = tl.load(
                h_dst_ptr + row * num_h + fh, mask=fh_mask, other=0.0
            ).to(ACC)
            norm_self = tl.maximum(tl.sqrt(tl.sum(h_self * h_self, 0)), EPS)
        kept, self_cos, loop_logit = _self_loop_logit(
            row,
            norm_self,
            gamma,
            loop_ptr,
            loop_weight_ptr,
            loop_weight_stride,
            HAS_LOOP_WEIGHT,
            EPS,
        )
        kept = kept & has_row
        self_alpha = tl.exp(
            tl.where(kept, loop_logit - tl.load(lse_ptr + row), float('-inf'))
        )
        grad_o = tl.load(
            grad_out_ptr + row * num_x + fx, mask=fx_mask & kept, other=0.0
        ).to(ACC)
        self_kept = self_alpha
        if HAS_DROPOUT:
            self_kept *= _dropout_scale(seed_ptr, nnz + row, p, keep_scale).to(
                ACC
            )
        if NEED_X:
            grad_x += self_kept * grad_o
        if NEED_Z:
            self_grad_z = self_kept * tl.sum(
                grad_o * x_j, 0
            ) - self_alpha * tl.load(delta_ptr + row)
            grad_gamma += self_grad_z * self_cos
            if STORE_LOOP:
                tl.store(grad_loop_ptr + row, self_grad_z, mask=has_row)
    if NEED_X:
        tl.store(
            grad_x_ptr + src * num_x + fx,
            grad_x.to(grad_x_ptr.dtype.element_ty),
            mask=fx_mask,
        )
    if NEED_Z:
        tl.store(gamma_part_ptr + src, grad_gamma)
    if NEED_H_SRC:
        # d cos_ij / d h_j = (h_i / |h_i| - cos_ij unit_j) / |h_j|.
        grad_h = gamma / norm_j * (grad_u - grad_cos * _unit(h_j, norm_j, EPS))
        tl.store(
            grad_h_src_ptr + src * num_h + fh,
            grad_h.to(grad_h_src_ptr.dtype.element_ty),
            mask=fh_mask,
        )


@triton.autotune(
    CONFIGS,
    key=KEY,
    prune_configs_by=PRUNE,
    # It may add to its output (ADD_PARTIAL in place): rerun when timed.
    restore_value=['grad_h_dst_ptr'],
)
@triton.jit(do_not_specialize=['degree'])
def row_backward_kernel(
    h_dst_ptr,
    h_src_ptr,
    gamma_ptr,
    rowptr_ptr,
    col_ptr,
    grad_z_ptr,
    partial_ptr,
    grad_h_dst_ptr,
    num_x,
    num_h,
    degree,
    ADD_PARTIAL: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ACC: tl.constexpr,
    EPS: tl.constexpr,
):
    r"""One destination row :math:`i` over its entries, from the stored
    :math:`\partial L / \partial z_{ij}`: gathers
    :math:`\mathbf{h}^{src}_j` only and gives :math:`\partial L / \partial
    \mathbf{h}^{dst}_i` (plus the row :obj:`partial_ptr` where
    :obj:`ADD_PARTIAL`: the column pass's part when :math:`\mathbf{h}^{src}
    = \mathbf{h}^{dst}`). :obj:`num_x` is part of the autotuning key
    only."""
    row = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_ptr + row).to(tl.int64)
    end = tl.load(rowptr_ptr + row + 1).to(tl.int64)
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)
    h_i = tl.load(h_dst_ptr + row * num_h + fh, mask=fh_mask, other=0.0)
    h_i = h_i.to(ACC)
    norm_i = tl.maximum(tl.sqrt(tl.sum(h_i * h_i, 0)), EPS)

    grad_u = tl.zeros((BLOCK_H,), ACC)  # sum_j dz_ij h_j / |h_j|
    grad_cos = tl.zeros((), ACC)  # sum_j dz_ij cos_ij
    for first in range(start, end, BLOCK_E):
        entries = first + lanes
        mask = entries < end
        cols = tl.load(col_ptr + entries, mask=mask, other=0).to(tl.int64)
        h_j = _gather_rows(h_src_ptr, cols, mask, fh, fh_mask, num_h)
        grad_z = tl.load(grad_z_ptr + entries, mask=mask, other=0.0)
        h_j = h_j.to(ACC)
        norm_j, cos, z = _scores(h_j, h_i, norm_i, gamma, EPS)
        grad_cos += tl.sum(grad_z * cos, 0)
        grad_u += tl.sum((grad_z / norm_j)[:, None] * h_j, 0)

    grad_h = gamma / norm_i * (grad_u - grad_cos * _unit(h_i, norm_i, EPS))
    if ADD_PARTIAL:
        grad_h += tl.load(
            partial_ptr + row * num_h + fh, mask=fh_mask, other=0.0
        ).to(ACC)
    tl.store(
        grad_h_dst_ptr + row * num_h + fh,
        grad_h.to(grad_h_dst_ptr.dtype.element_ty),
        mask=fh_mask,
    )


# ---------------------------------------------------------------------------
# Backward: one pass for a symmetric pattern with h_src = h_dst
# ---------------------------------------------------------------------------
@triton.autotune(CONFIGS, key=KEY, prune_configs_by=PRUNE)
@triton.jit(do_not_specialize=['degree'])
def symmetric_backward_kernel(
    x_ptr,
    h_ptr,
    gamma_ptr,
    log_weight_ptr,
    loop_ptr,
    loop_weight_ptr,
    loop_weight_stride,
    rowptr_ptr,
    col_ptr,
    perm_t_ptr,
    grad_out_ptr,
    lse_ptr,
    delta_ptr,
    grad_x_ptr,
    grad_h_ptr,
    grad_z_ptr,
    grad_loop_ptr,
    gamma_part_ptr,
    seed_ptr,
    p,
    keep_scale,
    nnz,
    num_x,
    num_h,
    degree,
    HAS_WEIGHT: tl.constexpr,
    HAS_LOOPS: tl.constexpr,
    HAS_LOOP_WEIGHT: tl.constexpr,
    HAS_DROPOUT: tl.constexpr,
    STORE_Z: tl.constexpr,
    STORE_LOOP: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_X: tl.constexpr,
    BLOCK_H: tl.constexpr,
    ACC: tl.constexpr,
    EPS: tl.constexpr,
):
    r"""One node :math:`n` of a symmetric pattern (its transpose has the
    same arrays) with :math:`\mathbf{h}^{src} = \mathbf{h}^{dst} =
    \mathbf{h}`: entry :math:`k = (n, i)` of row :math:`n` and its mirror
    :obj:`perm_t[k]` :math:`= (i, n)` share one cosine, so one gather of
    :math:`\mathbf{h}_i`, :math:`\mathbf{x}_i` and :math:`\partial L /
    \partial \mathbf{o}_i` gives both: :math:`\partial L / \partial
    z_{ni}` (row :math:`n`'s entry, stored where :obj:`STORE_Z`, counted in
    :math:`\partial L / \partial \gamma`) and :math:`\partial L / \partial
    z_{in}` (column :math:`n`'s), whence :math:`\partial L / \partial
    \mathbf{x}_n` and the whole :math:`\partial L / \partial
    \mathbf{h}_n`; with :obj:`HAS_DROPOUT`, each entry's own dropout
    factor (row :math:`n`'s entry :math:`k`, column :math:`n`'s
    :obj:`perm_t[k]`)."""
    node = tl.program_id(0).to(tl.int64)
    start = tl.load(rowptr_ptr + node).to(tl.int64)
    end = tl.load(rowptr_ptr + node + 1).to(tl.int64)
    fx = tl.arange(0, BLOCK_X)
    fx_mask = fx < num_x
    fh = tl.arange(0, BLOCK_H)
    fh_mask = fh < num_h
    lanes = tl.arange(0, BLOCK_E)
    gamma = tl.load(gamma_ptr).to(ACC)

    h_n = tl.load(h_ptr + node * num_h + fh, mask=fh_mask, other=0.0)
    h_n = h_n.to(ACC)
    norm_n = tl.maximum(tl.sqrt(tl.sum(h_n * h_n, 0)), EPS)
    x_n = tl.load(x_ptr + node * num_x + fx, mask=fx_mask, other=0.0).to(ACC)
    grad_o_n = tl.load(
        grad_out_ptr + node * num_x + fx, mask=fx_mask, other=0.0
    ).to(ACC)
    lse_n = tl.load(lse_ptr + node)
    delta_n = tl.load(delta_ptr + node)
    grad_x = tl.zeros((BLOCK_X,), ACC)
    grad_u = tl.zeros((BLOCK_H,), ACC)  # sum dz h_i / |h_i|, both roles
    grad_cos = tl.zeros((), ACC)  # sum dz cos, both roles
    grad_gamma = tl.zeros((), ACC)  # sum dz_ni cos: each entry once

    for first in range(start, end, BLOCK_E):
        entries = first + lanes
        mask = entries < end
        cols = tl.load(col_ptr + entries, mask=mask, other=0).to(tl.int64)
        h_i = _gather_rows(h_ptr, cols, mask, fh, fh_mask, num_h)
        x_i = _gather_rows(x_ptr, cols, mask, fx, fx_mask, num_x)
        grad_o = _gather_rows(grad_out_ptr, cols, mask, fx, fx_mask, num_x)
        lse_i = tl.load(lse_ptr + cols, mask=mask, other=0.0)
        delta_i = tl.load(delta_ptr + cols, mask=mask, other=0.0)
        h_i = h_i.to(ACC)
        grad_o = grad_o.to(ACC)
        norm_i, cos, z = _scores(h_i, h_n, norm_n, gamma, EPS)
        z_row = z
        z_col = z
        if HAS_WEIGHT or HAS_DROPOUT:
            mirror = tl.load(perm_t_ptr + entries, mask=mask, other=0)
            mirror = mirror.to(tl.int64)
        if HAS_WEIGHT:
            z_row += tl.load(log_weight_ptr + entries, mask=mask).to(ACC)
            z_col += tl.load(log_weight_ptr + mirror, mask=mask).to(ACC)
        # Entry (n, i): row n's softmax; entry (i, n): row i's.
        alpha_row = tl.exp(tl.where(mask, z_row - lse_n, float('-inf')))
        alpha_col = tl.exp(tl.where(mask, z_col - lse_i, float('-inf')))
        kept_row = alpha_row
        kept_col = alpha_col
        if HAS_DROPOUT:
            kept_row = alpha_row * _dropout_scale(
                seed_ptr, entries, p, keep_scale
            ).to(ACC)
            kept_col = alpha_col * _dropout_scale(
                seed_ptr, mirror, p, keep_scale
            ).to(ACC)
        grad_z_row = (
            kept_row * tl.sum(grad_o_n[None, :] * x_i.to(ACC), 1)
            - alpha_row * delta_n
        )
        grad_z_col = (
            kept_col * tl.sum(grad_o * x_n[None, :], 1) - alpha_col * delta_i
        )
        if STORE_Z:
            tl.store(grad_z_ptr + entries, grad_z_row, mask=mask)
        grad_x += tl.sum(kept_col[:, None] * grad_o, 0)
        grad_z = grad_z_row + grad_z_col
        grad_cos += tl.sum(grad_z * cos, 0)
        grad_gamma += tl.sum(grad_z_row * cos, 0)
        grad_u += tl.sum((grad_z / norm_i)[:, None] * h_i, 0)

    if HAS_LOOPS:
        kept, self_cos, loop_logit = _self_loop_logit(
            node,
            norm_n,
            gamma,
            loop_ptr,
            loop_weight_ptr,
            loop_weight_stride,
            HAS_LOOP_WEIGHT,
            EPS,
        )
        self_alpha = tl.exp(tl.where(kept, loop_logit - lse_n, float('-inf')))
        self_kept = self_alpha
        if HAS_DROPOUT:
            self_kept *= _dropout_scale(
                seed_ptr, nnz + node, p, keep_scale
            ).to(ACC)
        grad_x += self_kept * grad_o_n
        self_grad_z = (
            self_kept * tl.sum(grad_o_n * x_n, 0) - self_alpha * delta_n
        )
        grad_gamma += self_grad_z * self_cos
        if STORE_LOOP:
            tl.store(grad_loop_ptr + node, self_grad_z)
    tl.store(
        grad_x_ptr + node * num_x + fx,
        grad_x.to(grad_x_ptr.dtype.element_ty),
        mask=fx_mask,
    )
    tl.store(gamma_part_ptr + node, grad_gamma)
    grad_h = gamma / norm_n * (grad_u - grad_cos * _unit(h_n, norm_n, EPS))
    tl.store(
        grad_h_ptr + node * num_h + fh,
        grad_h.to(grad_h_ptr.dtype.element_ty),
        mask=fh_mask,
    )


# ---------------------------------------------------------------------------
# Attention dropout's factors, as the kernels draw them
# ---------------------------------------------------------------------------
@triton.jit
def dropout_scale_kernel(
    seed_ptr,
    out_ptr,
    p,
    keep_scale,
    count,
    BLOCK: tl.constexpr,
    ACC: tl.constexpr,
):
    r"""The dropout factors of draws :math:`0, \ldots,` :obj:`count`
    :math:`- 1` (the pattern's entries, then one self-loop a row), as the
    propagation kernels draw them: for the composed second derivative and
    for tests."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < count
    scale = _dropout_scale(seed_ptr, offsets, p, keep_scale).to(ACC)
    tl.store(out_ptr + offsets, scale, mask=mask)
