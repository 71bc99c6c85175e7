r"""The differentiable products (:func:`spmm`, :func:`sddmm`,
:func:`edge_cosine`, :func:`softmax_spmm`) and the autograd functions
behind them, whose backward passes call the kernels of
:mod:`apnet_pyg.nn.functional.kernels`."""

from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric import is_compiling

from apnet_pyg.checks import check_same_dtype, check_same_width
from apnet_pyg.nn.functional.csr import (
    Adjacency,
    CSRArrays,
    as_csr_arrays,
    check_entry_values_and_x,
    check_operand,
)
from apnet_pyg.nn.functional.kernels import (
    NORM_EPS,
    compute_dtype,
    edge_cosine_backward_kernel,
    edge_cosine_kernel,
    scaled,
    sddmm_kernel,
    softmax_spmm_backward_kernel,
    softmax_spmm_kernel,
    spmm_kernel,
)


# ---------------------------------------------------------------------------
# Autograd functions
# ---------------------------------------------------------------------------
def _grad_of(
    outputs: List[Tensor],
    grad_outputs: List[Optional[Tensor]],
    inputs: List[Optional[Tensor]],
    needs_grad: Tuple[bool, ...],
) -> List[Optional[Tensor]]:
    r"""The gradient of :obj:`outputs` with respect to those :obj:`inputs`
    that need one (:obj:`None` for the others), itself differentiable: the
    second-derivative path of the fused backward passes. An input the
    differentiated outputs do not use (:obj:`x` when only the attention
    is) gets :obj:`None`, autograd's zero."""
    pairs = [
        (out, grad)
        for out, grad in zip(outputs, grad_outputs)
        if grad is not None
    ]
    wanted = [t for t, needed in zip(inputs, needs_grad) if needed]
    grads = iter(
        torch.autograd.grad(
            [out for out, _ in pairs],
            wanted,
            [grad for _, grad in pairs],
            create_graph=True,
            allow_unused=True,
        )
    )
    return [next(grads) if needed else None for needed in needs_grad]


def _in_dtype(tensor: Tensor, dtype: torch.dtype) -> Tensor:
    r""":obj:`tensor` itself when it has :obj:`dtype`, else a copy in it.
    Not :obj:`tensor.to(dtype)`, which is an alias op when traced: under
    torch 2.11's AOTAutograd an output of an autograd function that
    aliases a tensor it saved got a zero gradient in the compiled
    backward."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def _save(ctx, pattern: CSRArrays, *tensors: Optional[Tensor]) -> None:
    # The pattern holds index tensors that autograd never differentiates:
    # kept as an attribute, which costs less than saving seven tensors.
    ctx.pattern = pattern
    ctx.save_for_backward(*tensors)


def _saved(ctx) -> Tuple[CSRArrays, Tuple[Optional[Tensor], ...]]:
    return ctx.pattern, ctx.saved_tensors


def _backward_args(pattern: CSRArrays) -> Tuple:
    return (
        pattern.rowptr,
        pattern.row,
        pattern.col,
        pattern.rowptr_t,
        pattern.col_t,
        pattern.perm_t,
        pattern.transposed,
    )


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: CSRArrays, values: Tensor, x: Tensor) -> Tensor:
        _save(ctx, pattern, values, x)
        return spmm_kernel(pattern.rowptr, pattern.col, values, x)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        pattern, (values, x) = _saved(ctx)
        grad_values = grad_x = None
        if ctx.needs_input_grad[1]:
            # d out_i / d v_ij = x_j: an SDDMM of the output gradient with x.
            grad_values = sddmm(pattern, grad_out, x)
        if ctx.needs_input_grad[2]:
            # d out / d x = A^T: an SpMM on the transposed pattern.
            grad_x = spmm(
                pattern.t(), pattern.transpose_values(values), grad_out
            )
        return None, grad_values, grad_x


class _SDDMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: CSRArrays, a: Tensor, b: Tensor) -> Tensor:
        _save(ctx, pattern, a, b)
        return sddmm_kernel(pattern.rowptr, pattern.col, a, b)

    @staticmethod
    def backward(ctx, grad_values: Tensor):
        pattern, (a, b) = _saved(ctx)
        grad_a = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a = spmm(pattern, grad_values, b)
        if ctx.needs_input_grad[2]:
            grad_b = spmm(
                pattern.t(), pattern.transpose_values(grad_values), a
            )
        return None, grad_a, grad_b


class _EdgeCosine(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, pattern: CSRArrays, a: Tensor, b: Optional[Tensor]
    ) -> Tuple[Tensor, Tensor]:
        # Saved in the compute dtype; the cosines returned in a's.
        cos, h_a, inv_a, h_b, inv_b = edge_cosine_kernel(
            pattern.rowptr, pattern.col, a, b
        )
        if b is None:  # The kernel's empty placeholders.
            h_b = inv_b = None
        _save(ctx, pattern, a, b, cos, h_a, inv_a, h_b, inv_b)
        ctx.mark_non_differentiable(inv_a)
        return _in_dtype(cos, a.dtype), inv_a

    @staticmethod
    def backward(ctx, grad_cos: Tensor, _):
        pattern, (a, b, cos, h_a, inv_a, h_b, inv_b) = _saved(ctx)
        needs_grad = ctx.needs_input_grad[1:3]
        if torch.is_grad_enabled():
            # A second derivative is asked for: differentiate the composable
            # version (normalize + differentiable SDDMM) instead.
            h_a = F.normalize(
                _in_dtype(a, cos.dtype), p=2.0, dim=-1, eps=NORM_EPS
            )
            h_b = (
                h_a
                if b is None
                else F.normalize(
                    _in_dtype(b, cos.dtype), p=2.0, dim=-1, eps=NORM_EPS
                )
            )
            grad_a, grad_b = _grad_of(
                [sddmm(pattern, h_a, h_b).to(a.dtype)],
                [grad_cos],
                [a, b],
                needs_grad,
            )
            return None, grad_a, grad_b, None

        grad_a, grad_b = edge_cosine_backward_kernel(
            *_backward_args(pattern),
            grad_cos,
            cos,
            h_a,
            inv_a,
            h_b,
            inv_b,
            needs_grad[1],
        )
        return (
            None,
            _in_dtype(grad_a, a.dtype) if needs_grad[0] else None,
            _in_dtype(grad_b, b.dtype) if needs_grad[1] else None,
            None,
        )


class _SoftmaxSpMM(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        pattern: CSRArrays,
        logits: Tensor,
        x: Tensor,
        loop_logits: Optional[Tensor],
        scale: Optional[Tensor],
        loop_scale: Optional[Tensor],
    ) -> Tuple[Tensor, Tensor, Tensor]:
        # Saved in the compute dtype; returned in the inputs' dtypes.
        out, alpha, alpha_loop = softmax_spmm_kernel(
            pattern.rowptr,
            pattern.row,
            pattern.col,
            logits,
            x,
            loop_logits,
            scale,
            loop_scale,
        )
        _save(
            ctx,
            pattern,
            logits,
            x,
            loop_logits,
            scale,
            loop_scale,
            out,
            alpha,
            None if loop_logits is None else alpha_loop,
        )
        ctx.set_materialize_grads(False)  # Often only `out` is used.
        return (
            _in_dtype(out, x.dtype),
            _in_dtype(alpha, logits.dtype),
            _in_dtype(alpha_loop, logits.dtype),
        )

    @staticmethod
    def backward(
        ctx,
        grad_out: Optional[Tensor],
        grad_alpha: Optional[Tensor],
        grad_alpha_loop: Optional[Tensor],
    ):
        pattern, saved = _saved(ctx)
        logits, x, loop_logits, scale, loop_scale, out, alpha, alpha_loop = (
            saved
        )
        needs_grad = ctx.needs_input_grad[1:4]
        if torch.is_grad_enabled():
            # A second derivative is asked for: differentiate the composable
            # version (softmax from torch operations + differentiable SpMM).
            outputs = _composable_softmax_spmm(
                pattern, logits, x, loop_logits, scale, loop_scale
            )
            grads = _grad_of(
                list(outputs),
                [grad_out, grad_alpha, grad_alpha_loop],
                [logits, x, loop_logits],
                needs_grad,
            )
            return None, *grads, None, None

        if grad_out is None:  # Only the attention is used downstream.
            grad_out = torch.zeros_like(out)
        grad_logits, grad_x, grad_loop = softmax_spmm_backward_kernel(
            *_backward_args(pattern),
            x,
            out,
            alpha,
            alpha_loop,
            scale,
            loop_scale,
            grad_out,
            grad_alpha,
            grad_alpha_loop,
            needs_grad[1],
        )
        return (
            None,
            _in_dtype(grad_logits, logits.dtype) if needs_grad[0] else None,
            _in_dtype(grad_x, x.dtype) if needs_grad[1] else None,
            _in_dtype(grad_loop, logits.dtype) if needs_grad[2] else None,
            None,
            None,
        )


def _composable_softmax_spmm(
    pattern: CSRArrays,
    logits: Tensor,
    x: Tensor,
    loop_logits: Optional[Tensor],
    scale: Optional[Tensor],
    loop_scale: Optional[Tensor],
) -> Tuple[Tensor, Tensor, Tensor]:
    # In the compute dtype, the results in the inputs' dtypes, as the
    # fused kernels.
    dtypes = x.dtype, logits.dtype
    dtype = compute_dtype(*dtypes)
    logits, x = logits.to(dtype), x.to(dtype)
    if loop_logits is not None:
        loop_logits = loop_logits.to(dtype)
    row = pattern.row
    row_max = torch.segment_reduce(
        logits.detach(), 'max', offsets=pattern.rowptr, unsafe=True
    )
    if loop_logits is not None:
        row_max = torch.maximum(row_max, loop_logits.detach())
    exp = (logits - row_max.index_select(0, row)).exp()
    denominator = exp.new_zeros(pattern.size[0]).index_add(0, row, exp)
    alpha_loop = logits.new_empty(0)
    if loop_logits is not None:
        exp_loop = (loop_logits - row_max).exp()
        denominator = denominator + exp_loop
        alpha_loop = exp_loop / denominator
    alpha = exp / denominator.index_select(0, row)
    out = spmm(pattern, scaled(alpha, scale), x)
    if loop_logits is not None:
        weight = scaled(alpha_loop, loop_scale)
        out = out + weight.unsqueeze(-1) * x[: alpha_loop.numel()]
    return out.to(dtypes[0]), alpha.to(dtypes[1]), alpha_loop.to(dtypes[1])


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------
# Each takes the matrix as an EdgeIndex sorted by row, of a known sparse
# size (entries are its edges, in its order; rows edge_index[0]), or as
# CSRArrays, which a caller that runs several products on one graph reads
# once (APNetConv does; also what works under torch.compile, where
# EdgeIndex's cache methods do not trace).


def spmm(edge_index: Adjacency, values: Tensor, x: Tensor) -> Tensor:
    r"""Sparse-dense product :math:`\mathbf{o}_i = \sum_{(i, j)}
    v_{ij} \mathbf{x}_j`, differentiable in :obj:`values` and :obj:`x`
    without a dense :math:`M \times N` intermediate (PyG's
    :meth:`EdgeIndex.matmul` has no gradient for the values).

    Args:
        edge_index (torch_geometric.EdgeIndex or CSRArrays): the matrix,
            of size :math:`(M, N)`: an :class:`EdgeIndex` sorted by row,
            with its sparse size (entries: its edges, in its order), or
            :func:`csr_arrays` of one.
        values (torch.Tensor): one value per entry, :obj:`[nnz]`.
        x (torch.Tensor): dense features, :obj:`[N, F]`, of the dtype of
            :obj:`values` (float16 and bfloat16 are summed in float32).

    :rtype: :class:`torch.Tensor` of shape :obj:`[M, F]`, in :obj:`x`'s
        dtype
    """
    pattern = as_csr_arrays(edge_index)
    if not is_compiling():
        check_entry_values_and_x(pattern, values, 'values', x)
    return _SpMM.apply(pattern, values, x)


def sddmm(edge_index: Adjacency, a: Tensor, b: Tensor) -> Tensor:
    r"""Sampled dense-dense product :math:`v_{ij} = \langle \mathbf{a}_i,
    \mathbf{b}_j \rangle` for every entry :math:`(i, j)`,
    differentiable in :obj:`a` and :obj:`b`.

    Args:
        edge_index (torch_geometric.EdgeIndex or CSRArrays): the matrix,
            of size :math:`(M, N)`: an :class:`EdgeIndex` sorted by row,
            with its sparse size (entries: its edges, in its order), or
            :func:`csr_arrays` of one.
        a (torch.Tensor): :obj:`[M, F]`.
        b (torch.Tensor): :obj:`[N, F]`, of the dtype of :obj:`a`
            (float16 and bfloat16 are summed in float32).

    :rtype: :class:`torch.Tensor` of shape :obj:`[nnz]`, in entry order,
        in :obj:`a`'s dtype
    """
    pattern = as_csr_arrays(edge_index)
    if not is_compiling():
        check_operand(a, 'a', pattern, pattern.size[0], 'number of rows')
        check_operand(b, 'b', pattern, pattern.size[1], 'number of columns')
        check_same_width(b, 'b', a, 'a')
        check_same_dtype(b, 'b', a, 'a')
    return _SDDMM.apply(pattern, a, b)


def edge_cosine(
    edge_index: Adjacency, a: Tensor, b: Optional[Tensor] = None
) -> Tuple[Tensor, Tensor]:
    r"""Cosine similarity :math:`\cos(\mathbf{a}_i, \mathbf{b}_j)` for
    every entry :math:`(i, j)`, equal to :obj:`sddmm(edge_index,
    F.normalize(a), F.normalize(b))` (norms bounded below by
    :data:`NORM_EPS`), with a fused backward (see the module docstring). A
    zero row has cosine :math:`0` with every row.

    Args:
        edge_index (torch_geometric.EdgeIndex or CSRArrays): the matrix,
            of size :math:`(M, N)`: an :class:`EdgeIndex` sorted by row,
            with its sparse size (entries: its edges, in its order), or
            :func:`csr_arrays` of one.
        a (torch.Tensor): :obj:`[M, F]`.
        b (torch.Tensor, optional): :obj:`[N, F]`, of the dtype of
            :obj:`a`; :obj:`None` for :obj:`b = a` (a square matrix),
            which saves an SpMM in the backward pass of a symmetric
            pattern. (default: :obj:`None`)

    :rtype: (:class:`torch.Tensor` :obj:`[nnz]`, :class:`torch.Tensor`
        :obj:`[M]`): the cosines in entry order, and the cosine of every
        row of :obj:`a` with itself (the logit of a self-loop: :math:`1`,
        or :math:`0` for a row of norm at most :data:`NORM_EPS`; constant),
        both in :obj:`a`'s dtype (computed in float32 for float16 and
        bfloat16: pass :obj:`a.float()` to keep the float32 cosines, as
        :class:`~apnet_pyg.nn.APNetConv` does)
    """
    pattern = as_csr_arrays(edge_index)
    if b is a:  # The same nodes (and one tensor given twice to autograd).
        b = None
    if not is_compiling():
        check_operand(a, 'a', pattern, pattern.size[0], 'number of rows')
        if b is None and pattern.size[0] != pattern.size[1]:
            raise ValueError(
                f'b=None (b = a) needs a square pattern (got '
                f"size {pattern.size}); pass 'b'"
            )
        if b is not None:
            check_operand(
                b, 'b', pattern, pattern.size[1], 'number of columns'
            )
            check_same_width(b, 'b', a, 'a')
            check_same_dtype(b, 'b', a, 'a')
    cos, inv_a = _EdgeCosine.apply(pattern, a, b)
    # inv_a = 1 / max(|a_i|, eps) is below 1 / eps exactly when |a_i| > eps.
    return cos, (inv_a < 1.0 / NORM_EPS).to(cos.dtype)


def softmax_spmm(
    edge_index: Adjacency,
    logits: Tensor,
    x: Tensor,
    loop_logits: Optional[Tensor] = None,
    scale: Optional[Tensor] = None,
    loop_scale: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    r"""Attention aggregation: the softmax of :obj:`logits` over the
    entries of every row, :math:`\alpha_{ij} = \exp(z_{ij}) / \sum_k
    \exp(z_{ik})`, and the sparse-dense product :math:`\mathbf{o}_i =
    \sum_j s_{ij} \alpha_{ij} \mathbf{x}_j` (:math:`s = 1` without a
    :obj:`scale`), differentiable in :obj:`logits`, :obj:`x` and
    :obj:`loop_logits`, with a fused backward (see the module
    docstring). A row without entries gets :math:`\mathbf{o}_i =
    \mathbf{0}`.

    :obj:`x` may have another floating dtype than the logits, e.g.
    float16 features with float32 logits: everything is computed in
    :func:`compute_dtype` of both (float32 at least), the aggregation is
    returned in :obj:`x`'s dtype and the attention in the logits'.

    Args:
        edge_index (torch_geometric.EdgeIndex or CSRArrays): the matrix,
            of size :math:`(M, N)`: an :class:`EdgeIndex` sorted by row,
            with its sparse size (entries: its edges, in its order), or
            :func:`csr_arrays` of one.
        logits (torch.Tensor): one logit per entry, :obj:`[nnz]`.
        x (torch.Tensor): dense features, :obj:`[N, F]`.
        loop_logits (torch.Tensor, optional): the logit :math:`z_{ii}` of
            a self-loop on every row, :obj:`[M]` (:math:`M \leq N`), of
            the logits' dtype, which joins the softmax of its row and
            aggregates :math:`\mathbf{x}_i` (:math:`-\infty` for none).
            (default: :obj:`None`)
        scale (torch.Tensor, optional): a constant factor :math:`s_{ij}`
            per entry, :obj:`[nnz]`, on the attention in the aggregation
            only: attention dropout's draws, :math:`0` or :math:`1 / (1 -
            p)`, without an :math:`|\mathcal{E}|`-sized copy of the
            attention for autograd. (default: :obj:`None`)
        loop_scale (torch.Tensor, optional): the same for the self-loops,
            :obj:`[M]`, with :obj:`loop_logits`. (default: :obj:`None`)

    :rtype: (:class:`torch.Tensor` :obj:`[M, F]`, :class:`torch.Tensor`
        :obj:`[nnz]`, :class:`torch.Tensor` :obj:`[M]` or :obj:`None`): the
        aggregation and the attention :math:`\alpha` (in entry order) of
        the entries and of the self-loops, before :obj:`scale`
    """
    pattern = as_csr_arrays(edge_index)
    if not is_compiling():
        check_entry_values_and_x(
            pattern, logits, 'logits', x, same_dtype=False
        )
        if loop_logits is not None:
            check_operand(
                loop_logits,
                'loop_logits',
                pattern,
                pattern.size[0],
                'number of rows',
                dim=1,
            )
            check_same_dtype(loop_logits, 'loop_logits', logits, 'logits')
            if pattern.size[0] > pattern.size[1]:
                raise ValueError(
                    f"'loop_logits' needs a pattern with no "
                    f'more rows than columns (got size '
                    f"{pattern.size}): row i's self-loop "
                    f'aggregates x[i]'
                )
        if scale is not None:
            check_entry_values_and_x(
                pattern, scale, 'scale', x, same_dtype=False
            )
        if loop_scale is not None:
            if loop_logits is None:
                raise ValueError(
                    "'loop_scale' scales the self-loops of "
                    "'loop_logits': pass both, or neither"
                )
            check_operand(
                loop_scale,
                'loop_scale',
                pattern,
                pattern.size[0],
                'number of rows',
                dim=1,
            )
    out, alpha, alpha_loop = _SoftmaxSpMM.apply(
        pattern, logits, x, loop_logits, scale, loop_scale
    )
    return out, alpha, None if loop_logits is None else alpha_loop
