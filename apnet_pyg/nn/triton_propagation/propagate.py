r"""The public functions of the fused propagation: the autograd function
over the custom operators, its argument checks, the composed reference,
and the bandwidth floor."""

from typing import Dict, Optional, Union

import torch
from torch import Tensor
from torch_geometric import is_compiling

from apnet_pyg.checks import (
    check_features,
    check_number,
    check_same_device,
    describe,
)
from apnet_pyg.nn.functional import (
    Adjacency,
    CSRArrays,
    compute_dtype,
    edge_cosine,
    softmax_spmm,
)
from apnet_pyg.nn.functional.csr import as_csr_arrays
from apnet_pyg.nn.triton_propagation.launch import (
    MAX_FEATURES,
    backward_op,
    dropout_scales,
    forward_op,
    interpreter_enabled,
    is_triton_available,
    pattern_is_symmetric,
)

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ---------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------
class _TritonPropagate(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx,
        pattern: CSRArrays,
        x: Tensor,
        h_dst: Tensor,
        h_src: Optional[Tensor],
        gamma: Tensor,
        log_weight: Optional[Tensor],
        loop_kept: Optional[Tensor],
        loop_log_weight: Optional[Tensor],
        dropout_seed: Optional[Tensor],
        dropout: float,
    ) -> Tensor:
        out, lse, out_acc = forward_op(
            x,
            h_dst,
            h_src,
            gamma,
            log_weight,
            loop_kept,
            loop_log_weight,
            pattern.rowptr,
            pattern.col,
            dropout_seed,
            dropout,
        )
        # Index tensors autograd never differentiates: an attribute.
        ctx.pattern = pattern
        # D_i reads the output in the accumulation dtype (out_acc, where
        # x's dtype is narrower).
        ctx.out_is_acc = out_acc.dim() == 2
        ctx.dropout = dropout
        ctx.save_for_backward(
            x,
            h_dst,
            h_src,
            gamma,
            log_weight,
            loop_kept,
            loop_log_weight,
            lse,
            out_acc if ctx.out_is_acc else out,
            dropout_seed,
        )
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        pattern = ctx.pattern
        (
            x,
            h_dst,
            h_src,
            gamma,
            log_weight,
            loop_kept,
            loop_log_weight,
            lse,
            out,
            dropout_seed,
        ) = ctx.saved_tensors
        inputs = (x, h_dst, h_src, gamma, log_weight, loop_log_weight)
        needs_grad = (*ctx.needs_input_grad[1:6], ctx.needs_input_grad[7])
        if torch.is_grad_enabled():
            # A second derivative is asked for: differentiate the composed
            # sparse kernels (which have double backward) instead.
            out = composed_attention_propagate(
                pattern,
                x,
                h_dst,
                h_src,
                gamma,
                log_weight,
                loop_kept,
                loop_log_weight,
                ctx.dropout,
                dropout_seed,
            )
            wanted = [t for t, needed in zip(inputs, needs_grad) if needed]
            grads = iter(
                torch.autograd.grad(
                    out, wanted, grad_out, create_graph=True, allow_unused=True
                )
            )
            grads = [next(grads) if needed else None for needed in needs_grad]
        else:
            grads = backward_op(
                grad_out,
                out,
                lse,
                x,
                h_dst,
                h_src,
                gamma,
                log_weight,
                loop_kept,
                loop_log_weight,
                pattern.rowptr,
                pattern.col,
                pattern.rowptr_t,
                pattern.col_t,
                pattern.perm_t,
                dropout_seed,
                ctx.dropout,
                list(needs_grad),
            )
            grads = [
                grad if needed else None
                for grad, needed in zip(grads, needs_grad)
            ]
        # (pattern, x, h_dst, h_src, gamma, log_weight, loop_kept,
        # loop_log_weight, dropout_seed, dropout)
        return (None, *grads[:5], None, grads[5], None, None)


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
    loop_log_weight: Optional[Tensor] = None,
    dropout: float = 0.0,
    dropout_seed: Optional[Tensor] = None,
) -> Tensor:
    r"""APNet's attention propagation in one fused kernel per pass:

    .. math::
        \mathbf{o}_i = \sum_{j} \alpha_{ij} \mathbf{x}_j, \qquad
        \alpha_{ij} = \operatorname{softmax}_j \left( \gamma
        \cos(\mathbf{h}^{dst}_i, \mathbf{h}^{src}_j) + \log w_{ij}
        \right),

    over the entries :math:`(i, j)` of :obj:`edge_index` and, where
    :obj:`loop_kept` is set, a self-loop :math:`(i, i)` with logit
    :math:`\gamma \cos_{ii} + \log w_{ii}` (:math:`\cos_{ii} = 1`, or
    :math:`0` for a row :math:`\mathbf{h}^{dst}_i` of norm at most
    :data:`~apnet_pyg.nn.functional.NORM_EPS`; :math:`\log w_{ii}` from
    :obj:`loop_log_weight`, else :math:`0`) that aggregates
    :math:`\mathbf{x}_i`. Norms are bounded below by
    :data:`~apnet_pyg.nn.functional.NORM_EPS`. A row with nothing to
    aggregate gives :math:`\mathbf{0}`. Equal to
    :func:`composed_attention_propagate` (the
    :func:`~apnet_pyg.nn.functional.edge_cosine` and
    :func:`~apnet_pyg.nn.functional.softmax_spmm` path of
    :class:`~apnet_pyg.nn.APNetConv`), differentiable in :obj:`x`,
    :obj:`h_dst`, :obj:`h_src`, :obj:`temperature`, :obj:`log_weight`
    and :obj:`loop_log_weight`.

    Runs on CUDA tensors, and on CPU tensors under Triton's interpreter
    (:obj:`TRITON_INTERPRET=1`, for tests). Inputs may be float16,
    bfloat16, float32 or float64 (accumulated in float32, float64 for
    float64); the output has :obj:`x`'s dtype, each gradient its input's.
    Deterministic: no atomics (``docs/triton-kernel.md`` says how the
    launch configurations, autotuned on large inputs, keep it so).

    Args:
        edge_index (torch_geometric.EdgeIndex or CSRArrays): the matrix
            of size :math:`(M, N)`, rows the destinations
            (:obj:`edge_index[0]`): an :class:`EdgeIndex` sorted by row
            with its sparse size (entries in its order; pass
            :obj:`edge_index.flip(0)` for PyG's source-to-target
            convention), or
            :func:`~apnet_pyg.nn.functional.csr_arrays` of one, not their
            :meth:`~apnet_pyg.nn.functional.CSRArrays.t`. Reuse one
            across calls on a static graph (it is read, never rebuilt).
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
        loop_log_weight (torch.Tensor, optional): :math:`\log w_{ii}` of
            each row's self-loop, :obj:`[M]` (any strides, e.g. a learned
            scalar's :obj:`expand(M)`), ignored where :obj:`loop_kept` is
            not set; needs :obj:`loop_kept`. (default: :obj:`None`)
        dropout (float, optional): attention dropout: each
            :math:`\alpha_{ij}` (and self-loop) aggregates times
            :math:`0` with this probability, else :math:`1 / (1 - p)`,
            drawn in the kernels from :obj:`dropout_seed` by entry (Philox,
            counter-based: the backward pass draws them again, nothing
            :math:`|\mathcal{E}|`-sized is stored). (default: :obj:`0.0`)
        dropout_seed (torch.Tensor, optional): int64 :obj:`[1]` on the
            features' device; :obj:`None` draws one from torch's
            generator of that device (so :func:`torch.manual_seed` fixes
            the draws). :func:`dropout_scales` gives the factors it
            draws. (default: :obj:`None`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[M, F]`
    """
    if not isinstance(temperature, Tensor) and isinstance(x, Tensor):
        # In float64 for float64 features (gradcheck), else float32.
        temperature = torch.tensor(
            float(temperature),
            device=x.device,
            dtype=torch.float64 if x.dtype == torch.float64 else torch.float32,
        )
    if not is_compiling():
        _check_triton()
        dropout = check_number(dropout, 'dropout', minimum=0.0, maximum=1.0)
        if dropout_seed is not None:
            if not (
                isinstance(dropout_seed, Tensor)
                and dropout_seed.dtype == torch.int64
                and dropout_seed.shape == (1,)
            ):
                raise ValueError(
                    f"'dropout_seed' must be an int64 tensor of shape [1] "
                    f'(got {describe(dropout_seed)}); None draws one'
                )
            check_same_device(dropout_seed, 'dropout_seed', x)
    pattern = as_csr_arrays(edge_index)
    if not is_compiling():
        _check_inputs(
            pattern,
            x,
            h_dst,
            h_src,
            temperature,
            log_weight,
            loop_kept,
            loop_log_weight,
        )
    if h_src is h_dst:  # One tensor given twice to autograd: one gradient.
        h_src = None
    if dropout > 0 and dropout_seed is None:
        dropout_seed = draw_dropout_seed(x.device)
    return _TritonPropagate.apply(
        pattern,
        x,
        h_dst,
        h_src,
        temperature,
        log_weight,
        loop_kept,
        loop_log_weight,
        dropout_seed if dropout > 0 else None,
        dropout,
    )


def draw_dropout_seed(device: torch.device) -> Tensor:
    r"""A seed of attention dropout's draws in the Triton kernels, from
    torch's generator of :obj:`device` (on the device: no host
    synchronisation; torch's CUDA generator is graph-safe)."""
    return torch.randint(0, 2**31 - 1, (1,), device=device, dtype=torch.int64)


def composed_attention_propagate(
    edge_index: Adjacency,
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    temperature: Union[Tensor, float],
    log_weight: Optional[Tensor] = None,
    loop_kept: Optional[Tensor] = None,
    loop_log_weight: Optional[Tensor] = None,
    dropout: float = 0.0,
    dropout_seed: Optional[Tensor] = None,
) -> Tensor:
    r""":func:`triton_attention_propagate` from the sparse kernels
    :func:`~apnet_pyg.nn.functional.edge_cosine` and
    :func:`~apnet_pyg.nn.functional.softmax_spmm` (the path of
    :class:`~apnet_pyg.nn.APNetConv` today), with the dropout factors the
    kernels draw from :obj:`dropout_seed` (:func:`dropout_scales`): the
    reference of the fused kernel, and its second derivative."""
    pattern = as_csr_arrays(edge_index)
    scale = loop_scale = None
    if dropout > 0:
        _check_triton()  # The factors are the kernels' draws.
        scales = dropout_scales(
            dropout_seed,
            dropout,
            pattern.nnz + pattern.size[0],
            compute_dtype(x.dtype, h_dst.dtype),
        )
        scale, loop_scale = scales[: pattern.nnz], scales[pattern.nnz :]
    cos, self_cos = edge_cosine(pattern, h_dst, h_src)
    logits = temperature * cos
    if log_weight is not None:
        logits = logits + log_weight
    if loop_kept is None:
        return softmax_spmm(pattern, logits.to(x.dtype), x, None, scale)[0]
    # A row with neither entries nor a self-loop would have no finite
    # logit, which softmax_spmm turns into NaN: it gets a constant finite
    # one, and its output is masked to 0.
    empty = (pattern.rowptr[1:] == pattern.rowptr[:-1]) & ~loop_kept
    loop_logit = temperature * self_cos
    if loop_log_weight is not None:
        loop_logit = loop_logit + loop_log_weight
    loop_logits = torch.where(
        loop_kept,
        loop_logit,
        torch.where(empty, 0.0, float('-inf')).to(loop_logit.dtype),
    )
    out = softmax_spmm(
        pattern,
        logits.to(x.dtype),
        x,
        loop_logits.to(x.dtype),
        scale,
        loop_scale,
    )[0]
    return torch.where(empty.unsqueeze(-1), 0.0, out)


def is_symmetric_pattern(edge_index: Adjacency) -> bool:
    r"""Whether the pattern's CSR arrays equal its transpose's (an
    undirected graph's, as :func:`~apnet_pyg.nn.functional.
    edge_index_arrays` builds them): then, for :obj:`h_src = h_dst` and
    :math:`F \leq H`, the backward pass of
    :func:`triton_attention_propagate` runs one pass over the entries
    instead of two. Compared once per pattern (one host synchronisation),
    remembered while its arrays live."""
    pattern = as_csr_arrays(edge_index)
    return pattern_is_symmetric(
        pattern.rowptr, pattern.col, pattern.rowptr_t, pattern.col_t
    )


def _check_triton() -> None:
    if not is_triton_available():
        raise RuntimeError(
            'triton_attention_propagate needs Triton, which '
            'is not installed: pip install triton (it ships '
            "with PyTorch's CUDA builds), or use the sparse "
            "kernels (kernel='sparse')"
        )


def _check_inputs(
    pattern: CSRArrays,
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    temperature: Tensor,
    log_weight: Optional[Tensor],
    loop_kept: Optional[Tensor],
    loop_log_weight: Optional[Tensor],
) -> None:
    if pattern.transposed:
        raise ValueError(
            "'edge_index' is transposed CSRArrays (.t()): pass "
            'the arrays csr_arrays() read, rows the '
            'destination nodes'
        )
    num_dst, num_src = pattern.size
    operands = [('x', x, 2, num_src), ('h_dst', h_dst, 2, num_dst)]
    if h_src is not None:
        operands.append(('h_src', h_src, 2, num_src))
    if log_weight is not None:
        operands.append(('log_weight', log_weight, 1, pattern.nnz))
    for name, tensor, dim, rows in operands:
        check_features(tensor, name, dim=dim)
        if tensor.dtype not in _FLOAT_DTYPES:
            raise ValueError(
                f"'{name}' has dtype {tensor.dtype}; the Triton "
                f'kernel takes float16, bfloat16, float32 or '
                f'float64'
            )
        if tensor.size(0) != rows:
            raise ValueError(
                f"'{name}' must have {rows} rows for a pattern "
                f'of size {pattern.size} (got shape '
                f'{tuple(tensor.shape)})'
            )
        check_same_device(tensor, name, pattern.rowptr, 'pattern')
    if h_src is None and num_dst != num_src:
        raise ValueError(
            f'h_src=None (h_src = h_dst) needs a square '
            f"pattern (got size {pattern.size}); pass 'h_src'"
        )
    if h_src is not None and h_src.size(1) != h_dst.size(1):
        raise ValueError(
            f"'h_src' and 'h_dst' must have the same number of "
            f'features (got {h_src.size(1)} and '
            f'{h_dst.size(1)})'
        )
    for name, width in (('x', x.size(1)), ('h_dst', h_dst.size(1))):
        if width > MAX_FEATURES:
            raise ValueError(
                f"'{name}' has {width} features, more than the "
                f"Triton kernel's {MAX_FEATURES} (one tile a "
                f'row): use the sparse kernels '
                f"(kernel='sparse')"
            )
    if (
        not isinstance(temperature, Tensor)
        or temperature.numel() != 1
        or not temperature.is_floating_point()
    ):
        raise ValueError(
            f"'temperature' must be a float or a floating-point "
            f'tensor of one element (got '
            f'{describe(temperature)})'
        )
    check_same_device(temperature, 'temperature', x)
    if loop_kept is not None:
        if (
            not isinstance(loop_kept, Tensor)
            or loop_kept.dim() != 1
            or loop_kept.dtype != torch.bool
            or loop_kept.numel() != num_dst
        ):
            raise ValueError(
                f"'loop_kept' must be a boolean tensor with one "
                f'entry per destination row, [{num_dst}] (got '
                f'{describe(loop_kept)})'
            )
        if num_dst > num_src:
            raise ValueError(
                f"'loop_kept' needs a pattern with no more rows "
                f'than columns (got size {pattern.size}): row '
                f"i's self-loop aggregates x[i]"
            )
        check_same_device(loop_kept, 'loop_kept', x)
    if loop_log_weight is not None:
        if loop_kept is None:
            raise ValueError(
                "'loop_log_weight' is the log weight of the "
                "self-loops, which 'loop_kept' names: pass "
                "'loop_kept' too"
            )
        check_features(loop_log_weight, 'loop_log_weight', dim=1)
        if loop_log_weight.dtype not in _FLOAT_DTYPES:
            raise ValueError(
                f"'loop_log_weight' has dtype {loop_log_weight.dtype}; "
                f'the Triton kernel takes float16, bfloat16, float32 or '
                f'float64'
            )
        if loop_log_weight.numel() != num_dst:
            raise ValueError(
                f"'loop_log_weight' must have one entry per "
                f'destination row, [{num_dst}] (got shape '
                f'{tuple(loop_log_weight.shape)}): expand a scalar '
                f'with .expand({num_dst})'
            )
        check_same_device(loop_log_weight, 'loop_log_weight', x)
    device = x.device
    if device.type not in ('cpu', 'cuda', 'meta'):
        raise ValueError(
            f'The Triton kernel runs on CUDA tensors (got '
            f'{device.type} tensors): use the sparse kernels '
            f"(kernel='sparse')"
        )
    if device.type == 'cpu' and not interpreter_enabled():
        raise ValueError(
            'The Triton kernel runs on CUDA tensors (got CPU '
            'tensors): move them to a GPU, use the sparse '
            "kernels on CPU (kernel='sparse'), or run it under Triton's "
            'interpreter (slow; for tests): set TRITON_INTERPRET=1 before '
            'Triton is first imported'
        )


def propagation_floor_bytes(
    num_dst: int,
    num_src: int,
    num_entries: int,
    x_channels: int,
    h_channels: int,
    dtype: torch.dtype = torch.float32,
    index_dtype: torch.dtype = torch.int32,
    same_h: bool = True,
    weights: bool = False,
    loops: bool = False,
    backward: bool = False,
) -> int:
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
    / \partial \mathbf{h}` written. The kernels' own traffic is above
    this floor: :func:`propagation_kernel_bytes` counts it.

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
    entries = num_entries * (
        index
        + (element if weights else 0)
        + (x_channels + h_channels) * element
    )
    pointers = (num_dst + 1) * index
    loop_bytes = num_dst * (1 + x_channels * element) if loops else 0
    forward = (
        entries
        + pointers
        + loop_bytes
        + num_dst * (h_channels + x_channels) * element
    )
    if not backward:
        return forward
    written = (
        num_src * (x_channels + h_channels)
        + (0 if same_h else num_dst * h_channels)
        + (num_entries if weights else 0)
    )
    return (
        forward
        + entries
        + pointers
        + loop_bytes
        + (num_dst * (x_channels + h_channels) + written) * element
    )


def propagation_kernel_bytes(
    num_dst: int,
    num_src: int,
    num_entries: int,
    x_channels: int,
    h_channels: int,
    dtype: torch.dtype = torch.float32,
    index_dtype: torch.dtype = torch.int32,
    same_h: bool = True,
    weights: bool = False,
    loops: bool = False,
    backward: bool = False,
    symmetric: bool = False,
) -> Dict[str, int]:
    r"""The bytes each pass of :func:`triton_attention_propagate`'s kernels
    asks of memory, by pass (:obj:`'forward'`, and with
    :obj:`backward=True` :obj:`'output_dot'` then :obj:`'symmetric'`, or
    :obj:`'columns'` and :obj:`'rows'`), every gradient wanted: a model of
    the kernels' traffic to set beside :func:`propagation_floor_bytes`.
    Rows gathered count their width; a gathered scalar (an index, a
    log-sum-exp) its own size, though memory serves it as a 32-byte
    sector; each node row read or written once a pass.

    Per entry, the forward pass gathers :math:`F + H` features (the source
    rows of :math:`\mathbf{x}` and :math:`\mathbf{h}`); the backward pass
    :math:`H + F` in the column pass (:math:`\mathbf{h}^{dst}_i`,
    :math:`\partial L / \partial \mathbf{o}_i`) and :math:`H` in the row
    pass (:math:`\mathbf{h}^{src}_j`), or, for a symmetric pattern with
    :math:`\mathbf{h}^{src} = \mathbf{h}^{dst}` and :math:`F \leq H`
    (:obj:`symmetric=True`), :math:`H + 2F` in its one pass.

    Args: as :func:`propagation_floor_bytes`'s, and
        symmetric (bool): the backward pass of a symmetric pattern
            (:func:`is_symmetric_pattern`), taken when :obj:`same_h` and
            :math:`F \leq H`.
    """
    b = torch.empty((), dtype=dtype).element_size()
    b_i = torch.empty((), dtype=index_dtype).element_size()
    b_a = 8 if dtype == torch.float64 else 4  # The accumulation dtype.
    E, M, N, F, H = num_entries, num_dst, num_src, x_channels, h_channels
    w = b if weights else 0
    half = b < b_a  # The output also stored in the accumulation dtype.
    pointers = (M + 1) * b_i
    # The self-loops: the mask and x_i (forward), dL/do_i too (backward).
    loops_forward = M * (1 + F * b) if loops else 0
    passes = {
        'forward': E * (b_i + w + (F + H) * b)
        + pointers
        + loops_forward
        + M * (H + F) * b
        + (M * F * b_a if half else 0)
        + M * b_a,
    }
    if not backward:
        return passes
    passes['output_dot'] = M * F * (b + (b_a if half else b)) + M * b_a
    loops_backward = M * (1 + 2 * F * b + 2 * b_a) if loops else 0
    if symmetric and same_h and F <= H:
        passes['symmetric'] = (
            E * (2 * b_i + 2 * w + (H + 2 * F) * b + 2 * b_a)
            + (E * b_a if weights else 0)
            + pointers
            + M * (H + 2 * F) * b
            + 2 * M * b_a
            + M * (F + H) * b
            + M * b_a
            + (loops_backward - M * F * b if loops else 0)
        )
        return passes
    passes['columns'] = (
        E * (2 * b_i + w + (H + F) * b + 2 * b_a + b_a)
        + (N + 1) * b_i
        + N * (H + F) * b
        + N * F * b
        + N * H * (b_a if same_h else b)
        + N * b_a
        + loops_backward
    )
    passes['rows'] = (
        E * (b_i + b_a + H * b)
        + pointers
        + M * H * b
        + (M * H * b_a if same_h else 0)
        + M * H * b
    )
    return passes
