r"""The raw kernels over CSR arrays (SDDMM, SpMM and the fused cosine
and softmax passes, forward and backward), each registered as a custom
operator by :func:`custom_kernel`, and the dtypes they compute in."""

import functools
import warnings
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric import is_compiling

from apnet_pyg.nn.functional.csr import transpose_entry_values


def custom_kernel(name: str, schema: str, fake: Callable) -> Callable:
    r"""Registers the decorated function as the custom operator
    :obj:`apnet_pyg::name` (with the :obj:`fake` implementation) and
    returns a function that calls the operator under :func:`torch.compile`
    (opaque to TorchDynamo) and on meta tensors, and the plain function
    otherwise."""

    def register(function: Callable) -> Callable:
        function = _without_autocast(function)
        op = torch.library.custom_op(
            f'apnet_pyg::{name}', function, mutates_args=(), schema=schema
        )
        op.register_fake(fake)

        def call(*args):
            # Meta tensors (shape inference without data) take the fake
            # implementation, which the operator dispatches them to.
            if is_compiling() or args[0].device.type == 'meta':
                return op(*args)
            return function(*args)

        call.__name__ = call.__qualname__ = function.__name__
        return call

    return register


def _without_autocast(function: Callable) -> Callable:
    r""":obj:`function` with :func:`torch.autocast` disabled while it runs
    (the kernels choose their dtypes themselves: autocast would run their
    matrix products in half precision, whose sums they keep in float32).
    The first argument is an index tensor on the operands' device."""

    @functools.wraps(function)
    def wrapper(*args):
        device_type = args[0].device.type
        if torch.amp.is_autocast_available(
            device_type
        ) and torch.is_autocast_enabled(device_type):
            with torch.autocast(device_type, enabled=False):
                return function(*args)
        return function(*args)

    return wrapper


#: The dtypes the kernels compute in float32.
LOW_PRECISION_DTYPES = (torch.float16, torch.bfloat16)


def compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    r"""The dtype the kernels compute in for operands of :obj:`dtypes`:
    the widest of them (:func:`torch.promote_types`), and float32 in place
    of float16 or bfloat16."""
    dtype = functools.reduce(torch.promote_types, dtypes)
    return torch.float32 if dtype in LOW_PRECISION_DTYPES else dtype


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------
def _entry_cells(rowptr: Tensor, col: Tensor, num_cols: int) -> Tensor:
    # The flat index row * num_cols + col of every entry.
    row = torch.repeat_interleave(
        torch.arange(rowptr.numel() - 1, device=col.device, dtype=col.dtype),
        rowptr.diff(),
        output_size=col.numel(),
    )
    return row.long() * num_cols + col.long()


def _csr_matmul(
    rowptr: Tensor, col: Tensor, values: Tensor, x: Tensor
) -> Tensor:
    num_rows = rowptr.numel() - 1
    if col.numel() == 0:
        return x.new_zeros(num_rows, x.size(1))
    if col.numel() > num_rows * x.size(0):
        # More entries than the matrix has cells (repeated entries):
        # cuSPARSE refuses such a matrix ('invalid value'). Their sums as a
        # dense matrix are smaller than the entries.
        dense = values.new_zeros(num_rows * x.size(0)).index_add_(
            0, _entry_cells(rowptr, col, x.size(0)), values
        )
        return dense.view(num_rows, x.size(0)) @ x
    with warnings.catch_warnings():
        # "Sparse CSR tensor support is in beta state": we rely only on
        # the two products here, which are stable and tested.
        warnings.simplefilter('ignore', UserWarning)
        csr = torch.sparse_csr_tensor(
            rowptr, col, values, (num_rows, x.size(0)), check_invariants=False
        )
    x = x.contiguous()  # A strided (e.g. expanded) operand costs a slow path.
    if x.device.type == 'cpu':
        # `csr @ x` zero-fills a buffer and copies it into the result;
        # addmm with beta=0 writes the result directly (and ignores the
        # uninitialised memory, NaNs included).
        out = x.new_empty(num_rows, x.size(1))
        return torch.addmm(out, csr, x, beta=0.0, out=out)
    return csr @ x


def _sampled_dot(rowptr: Tensor, col: Tensor, a: Tensor, b: Tensor) -> Tensor:
    num_rows, num_cols = a.size(0), b.size(0)
    if col.numel() > num_rows * num_cols:
        # More entries than the matrix has cells (repeated entries): torch's
        # sampled_addmm then rewrites the index tensors it is given (seen
        # on CPU, torch 2.13: col shrinks to M * N entries, and the heap
        # is corrupted). The dense product is no larger than the entries.
        cell = _entry_cells(rowptr, col, num_cols)
        return (a @ b.t()).view(-1).index_select(0, cell)
    values = a.new_zeros(col.numel())
    if col.numel() == 0:
        return values
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        csr = torch.sparse_csr_tensor(
            rowptr, col, values, (a.size(0), b.size(0)), check_invariants=False
        )
    # Written into `values` (out=), which is then no view of a sparse
    # tensor. b.t() must stay a transposed view: a contiguous [F, N] copy
    # runs the kernel five times slower on CPU.
    torch.sparse.sampled_addmm(
        csr, a.contiguous(), b.contiguous().t(), beta=0.0, out=csr
    )
    return values


@custom_kernel(
    'spmm',
    '(Tensor rowptr, Tensor col, Tensor values, Tensor x) -> Tensor',
    lambda rowptr, col, values, x: x.new_empty(rowptr.size(0) - 1, x.size(1)),
)
def spmm_kernel(
    rowptr: Tensor, col: Tensor, values: Tensor, x: Tensor
) -> Tensor:
    dtype = compute_dtype(x.dtype)
    return _csr_matmul(rowptr, col, values.to(dtype), x.to(dtype)).to(x.dtype)


@custom_kernel(
    'sddmm',
    '(Tensor rowptr, Tensor col, Tensor a, Tensor b) -> Tensor',
    lambda rowptr, col, a, b: a.new_empty(col.size(0)),
)
def sddmm_kernel(rowptr: Tensor, col: Tensor, a: Tensor, b: Tensor) -> Tensor:
    dtype = compute_dtype(a.dtype)
    return _sampled_dot(rowptr, col, a.to(dtype), b.to(dtype)).to(a.dtype)


#: The lower bound of the norms in :func:`edge_cosine`, as in
#: :func:`torch.nn.functional.normalize`. A constant rather than an argument:
#: a float argument would turn symbolic under torch.compile(dynamic=True).
NORM_EPS = 1e-12


def _normalize(x: Tensor) -> Tuple[Tensor, Tensor]:
    # In the compute dtype: a half-precision x is read once, not copied
    # to float32 first (the product promotes it).
    inv_norm = torch.linalg.vector_norm(
        x, dim=-1, dtype=compute_dtype(x.dtype)
    )
    inv_norm = inv_norm.clamp_min_(NORM_EPS).reciprocal_()
    return x * inv_norm.unsqueeze(-1), inv_norm


def _edge_cosine_fake(rowptr, col, a, b):
    dtype = compute_dtype(a.dtype)
    h_b, inv_b = a.new_empty(0, dtype=dtype), a.new_empty(0, dtype=dtype)
    if b is not None:
        h_b = b.new_empty(b.shape, dtype=dtype)
        inv_b = b.new_empty(b.size(0), dtype=dtype)
    return (
        a.new_empty(col.size(0), dtype=dtype),
        a.new_empty(a.shape, dtype=dtype),
        a.new_empty(a.size(0), dtype=dtype),
        h_b,
        inv_b,
    )


@custom_kernel(
    'edge_cosine',
    '(Tensor rowptr, Tensor col, Tensor a, Tensor? b) -> '
    '(Tensor, Tensor, Tensor, Tensor, Tensor)',
    _edge_cosine_fake,
)
def edge_cosine_kernel(
    rowptr: Tensor, col: Tensor, a: Tensor, b: Optional[Tensor]
) -> Tuple[Tensor, ...]:
    # The cosines and, for the backward pass, the normalised rows and
    # inverse norms of a and b (empty for b=None: b is a), all in the
    # compute dtype.
    h_a, inv_a = _normalize(a)
    if b is None:
        return (
            _sampled_dot(rowptr, col, h_a, h_a),
            h_a,
            inv_a,
            h_a.new_empty(0),
            h_a.new_empty(0),
        )
    h_b, inv_b = _normalize(b)
    return _sampled_dot(rowptr, col, h_a, h_b), h_a, inv_a, h_b, inv_b


def _edge_cosine_backward_fake(
    rowptr,
    row,
    col,
    rowptr_t,
    col_t,
    perm_t,
    transposed,
    grad_cos,
    cos,
    h_a,
    inv_a,
    h_b,
    inv_b,
    needs_grad_b,
):
    if h_b is None or not needs_grad_b:
        return torch.empty_like(h_a), h_a.new_empty(0)
    return torch.empty_like(h_a), torch.empty_like(h_b)


# The pattern, as the backward kernels take it (the arguments of
# _backward_args).
_PATTERN_SCHEMA = (
    'Tensor rowptr, Tensor row, Tensor col, Tensor rowptr_t, '
    'Tensor col_t, Tensor perm_t, bool transposed'
)


@custom_kernel(
    'edge_cosine_backward',
    f'({_PATTERN_SCHEMA}, Tensor grad_cos, Tensor cos, '
    f'Tensor h_a, Tensor inv_a, Tensor? h_b, Tensor? inv_b, '
    f'bool needs_grad_b) -> (Tensor, Tensor)',
    _edge_cosine_backward_fake,
)
def edge_cosine_backward_kernel(
    rowptr: Tensor,
    row: Tensor,
    col: Tensor,
    rowptr_t: Tensor,
    col_t: Tensor,
    perm_t: Tensor,
    transposed: bool,
    grad_cos: Tensor,
    cos: Tensor,
    h_a: Tensor,
    inv_a: Tensor,
    h_b: Optional[Tensor],
    inv_b: Optional[Tensor],
    needs_grad_b: bool,
) -> Tuple[Tensor, Tensor]:
    # With h = x / |x| and c_ij = <ha_i, hb_j>:
    #   dL/da_i = (sum_j g_ij hb_j - s_i ha_i) / |a_i|,  s_i = sum_j g_ij c_ij
    #   dL/db_j = (sum_i g_ij ha_i - t_j hb_j) / |b_j|,  t_j = sum_i g_ij c_ij
    # and for b = a both terms add up. In the compute dtype (cos's).
    grad_cos = grad_cos.to(cos.dtype)
    grad_transposed = transpose_entry_values(grad_cos, perm_t, transposed)
    weighted = grad_cos * cos
    if h_b is None:
        # One SpMM instead of two when the transpose has the same index
        # arrays (both sorted the same way); checked on CPU only, where it
        # costs no host synchronisation.
        if (
            rowptr.device.type == 'cpu'
            and rowptr.numel() == rowptr_t.numel()
            and torch.equal(rowptr, rowptr_t)
            and torch.equal(col, col_t)
        ):
            grad_a = _csr_matmul(rowptr, col, grad_cos + grad_transposed, h_a)
        else:
            grad_a = _csr_matmul(rowptr, col, grad_cos, h_a)
            grad_a += _csr_matmul(rowptr_t, col_t, grad_transposed, h_a)
        incident = inv_a.new_zeros(inv_a.numel())
        incident.index_add_(0, row, weighted)
        incident.index_add_(0, col, weighted)
        grad_a.addcmul_(h_a, incident.unsqueeze(-1), value=-1.0)
        return grad_a.mul_(inv_a.unsqueeze(-1)), grad_a.new_empty(0)

    assert inv_b is not None
    grad_a = _csr_matmul(rowptr, col, grad_cos, h_b)
    incident = inv_a.new_zeros(inv_a.numel()).index_add_(0, row, weighted)
    grad_a.addcmul_(h_a, incident.unsqueeze(-1), value=-1.0)
    grad_a.mul_(inv_a.unsqueeze(-1))
    if not needs_grad_b:
        return grad_a, grad_a.new_empty(0)
    grad_b = _csr_matmul(rowptr_t, col_t, grad_transposed, h_a)
    incident = inv_b.new_zeros(inv_b.numel()).index_add_(0, col, weighted)
    grad_b.addcmul_(h_b, incident.unsqueeze(-1), value=-1.0)
    return grad_a, grad_b.mul_(inv_b.unsqueeze(-1))


def _row_dot(a: Tensor, b: Tensor) -> Tensor:
    return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)


def _softmax_spmm_fake(
    rowptr, row, col, logits, x, loop_logits, scale, loop_scale
):
    dtype = compute_dtype(logits.dtype, x.dtype)
    alpha_loop = logits.new_empty(
        0 if loop_logits is None else loop_logits.size(0), dtype=dtype
    )
    return (
        x.new_empty(rowptr.size(0) - 1, x.size(1), dtype=dtype),
        logits.new_empty(logits.shape, dtype=dtype),
        alpha_loop,
    )


@custom_kernel(
    'softmax_spmm',
    '(Tensor rowptr, Tensor row, Tensor col, Tensor logits, '
    'Tensor x, Tensor? loop_logits, Tensor? scale, Tensor? loop_scale) '
    '-> (Tensor, Tensor, Tensor)',
    _softmax_spmm_fake,
)
def softmax_spmm_kernel(
    rowptr: Tensor,
    row: Tensor,
    col: Tensor,
    logits: Tensor,
    x: Tensor,
    loop_logits: Optional[Tensor],
    scale: Optional[Tensor],
    loop_scale: Optional[Tensor],
) -> Tuple[Tensor, ...]:
    # All three outputs in the compute dtype (the autograd function saves
    # them for the backward pass and returns them in the inputs' dtypes).
    # The attention is returned as the softmax gives it; the aggregation
    # takes it times `scale` (attention dropout's draws).
    dtype = compute_dtype(logits.dtype, x.dtype)
    logits, x = logits.to(dtype), x.to(dtype)
    if loop_logits is not None:
        loop_logits = loop_logits.to(dtype)
    # The row maximum keeps exp() in range at any temperature.
    row_max = torch.segment_reduce(logits, 'max', offsets=rowptr, unsafe=True)
    if loop_logits is not None:
        row_max = torch.maximum(row_max, loop_logits)
    alpha = (logits - row_max.index_select(0, row)).exp_()
    denominator = logits.new_zeros(rowptr.numel() - 1)
    denominator.index_add_(0, row, alpha)
    if loop_logits is None:
        alpha.div_(denominator.index_select(0, row))
        out = _csr_matmul(rowptr, col, scaled(alpha, scale), x)
        return out, alpha, logits.new_empty(0)
    alpha_loop = (loop_logits - row_max).exp_()
    denominator += alpha_loop
    alpha.div_(denominator.index_select(0, row))
    alpha_loop /= denominator
    out = _csr_matmul(rowptr, col, scaled(alpha, scale), x)
    out.addcmul_(
        scaled(alpha_loop, loop_scale).unsqueeze(-1), x[: alpha_loop.numel()]
    )
    return out, alpha, alpha_loop


def scaled(alpha: Tensor, scale: Optional[Tensor]) -> Tensor:
    r""":obj:`alpha` times :obj:`scale` in :obj:`alpha`'s dtype
    (:obj:`alpha` itself for none): the attention as it aggregates under
    attention dropout's draws."""
    return alpha if scale is None else alpha * scale.to(alpha.dtype)


def _softmax_spmm_backward_fake(
    rowptr,
    row,
    col,
    rowptr_t,
    col_t,
    perm_t,
    transposed,
    x,
    out,
    alpha,
    alpha_loop,
    scale,
    loop_scale,
    grad_out,
    grad_alpha,
    grad_alpha_loop,
    needs_grad_x,
):
    # All in the compute dtype (out's).
    grad_x = x.new_empty(x.shape if needs_grad_x else (0,), dtype=out.dtype)
    grad_loop = (
        alpha.new_empty(0)
        if alpha_loop is None
        else torch.empty_like(alpha_loop)
    )
    return torch.empty_like(alpha), grad_x, grad_loop


@custom_kernel(
    'softmax_spmm_backward',
    f'({_PATTERN_SCHEMA}, Tensor x, Tensor out, Tensor alpha, '
    f'Tensor? alpha_loop, Tensor? scale, Tensor? loop_scale, '
    f'Tensor grad_out, Tensor? grad_alpha, '
    f'Tensor? grad_alpha_loop, bool needs_grad_x) -> '
    f'(Tensor, Tensor, Tensor)',
    _softmax_spmm_backward_fake,
)
def softmax_spmm_backward_kernel(
    rowptr: Tensor,
    row: Tensor,
    col: Tensor,
    rowptr_t: Tensor,
    col_t: Tensor,
    perm_t: Tensor,
    transposed: bool,
    x: Tensor,
    out: Tensor,
    alpha: Tensor,
    alpha_loop: Optional[Tensor],
    scale: Optional[Tensor],
    loop_scale: Optional[Tensor],
    grad_out: Tensor,
    grad_alpha: Optional[Tensor],
    grad_alpha_loop: Optional[Tensor],
    needs_grad_x: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    # out_i = sum_j s_ij alpha_ij x_j (+ s_ii alpha_ii x_i), alpha =
    # softmax(z) and s the scale (1 without one), so
    #   dL/dz_ij = alpha_ij (g_ij - sum_k alpha_ik g_ik),
    #   g_ij = s_ij <go_i, x_j>,
    # where sum_k alpha_ik g_ik = <go_i, out_i>: a row dot, no scatter.
    # In the compute dtype (out's, alpha's).
    dtype = out.dtype
    x, grad_out = x.to(dtype), grad_out.to(dtype)
    if grad_alpha is not None:
        grad_alpha = grad_alpha.to(dtype)
    if grad_alpha_loop is not None:
        grad_alpha_loop = grad_alpha_loop.to(dtype)
    grad = _sampled_dot(rowptr, col, grad_out, x)
    if scale is not None:
        grad.mul_(scale.to(dtype))
    row_sum = _row_dot(grad_out, out)
    if grad_alpha is not None:  # The attention itself is used downstream.
        grad += grad_alpha
        row_sum.index_add_(0, row, alpha * grad_alpha)
    grad_loop_logits = alpha.new_empty(0)
    if alpha_loop is not None:
        grad_loop = _row_dot(grad_out, x[: alpha_loop.numel()])
        if loop_scale is not None:
            grad_loop.mul_(loop_scale.to(dtype))
        if grad_alpha_loop is not None:
            grad_loop += grad_alpha_loop
            row_sum.addcmul_(alpha_loop, grad_alpha_loop)
        grad_loop_logits = grad_loop.sub_(row_sum).mul_(alpha_loop)
    grad_logits = grad.sub_(row_sum.index_select(0, row)).mul_(alpha)
    grad_x = x.new_empty(0)
    if needs_grad_x:
        grad_x = _csr_matmul(
            rowptr_t,
            col_t,
            transpose_entry_values(scaled(alpha, scale), perm_t, transposed),
            grad_out,
        )
        if alpha_loop is not None:
            grad_x[: alpha_loop.numel()].addcmul_(
                scaled(alpha_loop, loop_scale).unsqueeze(-1), grad_out
            )
    return grad_logits, grad_x, grad_loop_logits
