r"""Launching the Triton kernels: the launch configuration and the
forward and backward implementations, registered as custom operators."""

import functools
from typing import Callable, List, Optional, Tuple

import torch
from torch import Tensor

from apnet_pyg.nn.functional import NORM_EPS, custom_kernel
from apnet_pyg.nn.triton_propagation import kernels as triton_kernels
from apnet_pyg.nn.triton_propagation.kernels import _acc_dtype, _kernels_for

#: The widest feature row (of :obj:`x` or :obj:`h`) a kernel holds in one
#: tile (registers, not memory, bound it); wider rows need the sparse
#: kernels.
MAX_FEATURES = 4096

# At most this many elements in one gathered [BLOCK_E, width] tile (at
# least two entries a block): ~8 per thread. In compiles for sm_90, larger
# tiles at F = 64 took 100-150 registers a thread (vs 50-90), too few warps
# per SM for a gather-bound kernel. Untuned on a GPU.
_MAX_TILE = 512


# ---------------------------------------------------------------------------
# Launch configuration
# ---------------------------------------------------------------------------
class _Config:
    __slots__ = ('block_e', 'block_x', 'block_h', 'num_warps')

    def __init__(
        self, num_rows: int, num_entries: int, num_x: int, num_h: int
    ):
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


def _or(tensor: Optional[Tensor], dummy: Tensor) -> Tensor:
    # A pointer argument the kernel never reads (its flag is off).
    return dummy if tensor is None else tensor


# ---------------------------------------------------------------------------
# Launches (the custom operators' implementations)
# ---------------------------------------------------------------------------
def _forward_impl(
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    gamma: Tensor,
    log_weight: Optional[Tensor],
    loop_kept: Optional[Tensor],
    rowptr: Tensor,
    col: Tensor,
) -> Tuple[Tensor, Tensor]:
    num_dst, num_x, num_h = rowptr.numel() - 1, x.size(1), h_dst.size(1)
    acc = _acc_dtype(x, h_dst, h_src)
    out = x.new_empty(num_dst, num_x)
    # triton_kernels.tl: Triton's language module, imported by _acc_dtype.
    lse = x.new_empty(
        num_dst,
        dtype=torch.float64
        if acc == triton_kernels.tl.float64
        else torch.float32,
    )
    if num_dst == 0:
        return out, lse
    x, h_dst = x.contiguous(), h_dst.contiguous()
    h_src = h_dst if h_src is None else h_src.contiguous()
    if log_weight is not None:
        log_weight = log_weight.contiguous()
    config = _Config(num_dst, col.numel(), num_x, num_h)
    kernel = _kernels_for(x.device)['_forward_kernel']
    kernel[(num_dst,)](
        x,
        h_dst,
        h_src,
        gamma,
        _or(log_weight, gamma),
        _or(_as_bytes(loop_kept), gamma),
        rowptr,
        col,
        out,
        lse,
        num_x,
        num_h,
        HAS_WEIGHT=log_weight is not None,
        HAS_LOOPS=loop_kept is not None,
        BLOCK_E=config.block_e,
        BLOCK_X=config.block_x,
        BLOCK_H=config.block_h,
        ACC=acc,
        EPS=NORM_EPS,
        num_warps=config.num_warps,
    )
    return out, lse


def _as_bytes(mask: Optional[Tensor]) -> Optional[Tensor]:
    # A bool tensor read as uint8 (no copy): the kernels compare with 0.
    return None if mask is None else mask.contiguous().view(torch.uint8)


def _forward_fake(x, h_dst, h_src, gamma, log_weight, loop_kept, rowptr, col):
    double = any(
        t is not None and t.dtype == torch.float64 for t in (x, h_dst, h_src)
    )
    num_dst = rowptr.size(0) - 1
    return (
        x.new_empty(num_dst, x.size(1)),
        x.new_empty(num_dst, dtype=torch.float64 if double else torch.float32),
    )


def _backward_impl(
    grad_out: Tensor,
    lse: Tensor,
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    gamma: Tensor,
    log_weight: Optional[Tensor],
    loop_kept: Optional[Tensor],
    rowptr: Tensor,
    col: Tensor,
    rowptr_t: Tensor,
    col_t: Tensor,
    perm_t: Tensor,
    needs_grad: List[bool],
) -> Tuple[Tensor, ...]:
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
    x, h_dst, grad_out = (
        x.contiguous(),
        h_dst.contiguous(),
        grad_out.contiguous(),
    )
    h_src = h_dst if same_h else h_src.contiguous()
    if log_weight is not None:
        log_weight = log_weight.contiguous()
    grad_x, grad_h_dst, grad_h_src, grad_gamma, grad_weight = _gradients(
        x,
        h_dst,
        None if same_h else h_src,
        gamma,
        log_weight,
        (
            need_x,
            need_h_dst,
            need_h_src and not same_h,
            need_gamma,
            need_weight,
        ),
    )
    grad_gamma.zero_()
    if same_h:  # One buffer, written by the column kernel.
        grad_h_src = grad_h_dst
    kernels = _kernels_for(x.device)
    loops = _as_bytes(loop_kept)
    common = dict(
        HAS_WEIGHT=log_weight is not None,
        HAS_LOOPS=loop_kept is not None,
        ACC=acc,
        EPS=NORM_EPS,
    )
    # D_i, needed by every gradient but x's.
    need_delta = need_h_dst or need_h_src or need_gamma or need_weight
    delta = lse.new_empty(num_dst)
    grad_h_partial = None
    if need_delta and num_dst > 0:
        if same_h and need_h_dst:
            # The row kernel's part of the one gradient, which the column
            # kernel adds to its own; kept in the accumulation dtype.
            grad_h_partial = (
                grad_h_src
                if grad_h_src.dtype == lse.dtype
                else h_dst.new_empty(h_dst.shape, dtype=lse.dtype)
            )
        row_grad_h = grad_h_partial if same_h else grad_h_dst
        gamma_parts = lse.new_empty(num_dst)
        config = _Config(num_dst, col.numel(), num_x, num_h)
        kernels['_backward_row_kernel'][(num_dst,)](
            x,
            h_dst,
            h_src,
            gamma,
            _or(log_weight, gamma),
            _or(loops, gamma),
            rowptr,
            col,
            grad_out,
            lse,
            _or(row_grad_h, gamma),
            gamma_parts,
            delta,
            num_x,
            num_h,
            NEED_H_DST=need_h_dst,
            BLOCK_E=config.block_e,
            BLOCK_X=config.block_x,
            BLOCK_H=config.block_h,
            num_warps=config.num_warps,
            **common,
        )
        if need_gamma:
            # One partial sum a row, summed here: deterministic.
            grad_gamma = gamma_parts.sum().to(gamma.dtype).reshape(gamma.shape)
    if (need_x or need_h_src or need_weight) and num_src > 0:
        config = _Config(num_src, col_t.numel(), num_x, num_h)
        kernels['_backward_col_kernel'][(num_src,)](
            x,
            h_dst,
            h_src,
            gamma,
            _or(log_weight, gamma),
            _or(loops, gamma),
            rowptr_t,
            col_t,
            perm_t,
            grad_out,
            lse,
            delta,
            _or(grad_h_partial, gamma),
            grad_x if need_x else gamma,
            grad_h_src if need_h_src else gamma,
            grad_weight if need_weight else gamma,
            num_dst,
            num_x,
            num_h,
            NEED_X=need_x,
            NEED_H_SRC=need_h_src,
            NEED_WEIGHT=need_weight,
            SAME_H=same_h and need_h_dst,
            BLOCK_E=config.block_e,
            BLOCK_X=config.block_x,
            BLOCK_H=config.block_h,
            num_warps=config.num_warps,
            **common,
        )
    if same_h:
        grad_h_src = x.new_empty(0)
    return grad_x, grad_h_dst, grad_h_src, grad_gamma, grad_weight


def _gradients(
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    gamma: Tensor,
    log_weight: Optional[Tensor],
    needed: Tuple[bool, ...],
) -> Tuple[Tensor, ...]:
    r"""Uninitialised, contiguous gradients of the inputs :obj:`needed`;
    the others empty (no two outputs of an operator may alias)."""
    inputs = (x, h_dst, h_src, gamma, log_weight)
    return tuple(
        value.new_empty(value.shape) if need else x.new_empty(0)
        for value, need in zip(inputs, needed)
    )


def _backward_fake(
    grad_out,
    lse,
    x,
    h_dst,
    h_src,
    gamma,
    log_weight,
    loop_kept,
    rowptr,
    col,
    rowptr_t,
    col_t,
    perm_t,
    needs_grad,
):
    need_x, need_h_dst, need_h_src, need_gamma, need_weight = needs_grad
    if h_src is None:
        need_h_dst, need_h_src = need_h_dst or need_h_src, False
    return _gradients(
        x,
        h_dst,
        h_src,
        gamma,
        log_weight,
        (
            need_x,
            need_h_dst,
            need_h_src,
            need_gamma,
            need_weight and log_weight is not None,
        ),
    )


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
    '(Tensor, Tensor)',
    _forward_fake,
)(_on_device_of_first(_forward_impl))

_backward_op = custom_kernel(
    'triton_propagate_backward',
    '(Tensor grad_out, Tensor lse, Tensor x, Tensor h_dst, '
    'Tensor? h_src, Tensor gamma, Tensor? log_weight, Tensor? loop_kept, '
    'Tensor rowptr, Tensor col, Tensor rowptr_t, Tensor col_t, '
    'Tensor perm_t, bool[] needs_grad) -> '
    '(Tensor, Tensor, Tensor, Tensor, Tensor)',
    _backward_fake,
)(_on_device_of_first(_backward_impl))
