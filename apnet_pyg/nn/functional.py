r"""Sparse kernels behind :class:`~apnet_pyg.nn.APNetConv`.

Attention propagation needs two sparse products over the same pattern
:math:`\mathcal{E}` (entry :math:`(i, j)` for an edge :math:`j \to i`):

* SDDMM (sampled dense-dense product), :math:`v_{ij} = \langle
  \mathbf{a}_i, \mathbf{b}_j \rangle` for :math:`(i, j) \in \mathcal{E}`,
  which gives the cosine of every edge from normalised projections;
* SpMM (sparse-dense product), :math:`\mathbf{o}_i = \sum_j v_{ij}
  \mathbf{x}_j`, which aggregates the neighbours.

Both run on CSR tensors (:class:`SparsePattern`, pointers from
:func:`torch_geometric.index.index2ptr`), which avoids materialising an
:math:`|\mathcal{E}| \times F` message tensor. Their backward passes are
written here: PyTorch's own backward of a sparse product with respect to
the sparse values builds a dense :math:`M \times N` matrix, and
:meth:`torch_geometric.EdgeIndex.matmul` has no gradient for the values.
Each backward is again an SDDMM or an SpMM (on the transposed pattern), so
second derivatives work too.

:func:`edge_cosine` fuses the normalisation into the SDDMM and
:func:`softmax_spmm` the edge softmax (and the self-loops, as a diagonal
term) into the SpMM: their backward passes are one or two SpMMs plus
elementwise passes, where autograd through
:func:`torch.nn.functional.normalize` and a scatter softmax would allocate
and traverse several :math:`N \times F` and :math:`|\mathcal{E}|`
temporaries. On CPU, where allocating and first touching a large tensor
costs as much as reading it, this matters.

Under :func:`torch.compile`, every kernel runs as a
:func:`torch.library.custom_op` with a fake (meta) implementation, inside
an autograd function that TorchDynamo traces: one opaque operator each,
forward and backward, and no graph break. In eager mode the same kernels
are called directly, which saves the operator dispatch (tens of
microseconds a call, what a small graph's whole layer costs).

**Precision.** The kernels take float16 and bfloat16 operands too (also
under :func:`torch.autocast`, which they do not apply inside): they
compute in :func:`compute_dtype`, float32 for those two, since torch's
sparse CSR products have no half-precision version on CPU (nor in
:func:`torch.sparse.sampled_addmm` on CUDA) and the cosines, softmax and
sums need float32 to stay accurate at a high temperature. Outputs and
gradients come back in the dtypes of the inputs they belong to; float32
and float64 operands are used as they are, without a copy.
"""
import functools
import warnings
from typing import Callable, List, NamedTuple, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric import is_compiling
from torch_geometric.index import index2ptr

from apnet_pyg.utils import check_features, check_int, check_same_device


class SparsePattern(NamedTuple):
    r"""The sparsity pattern of an :math:`M \times N` matrix in CSR form
    (rows grouped, columns ascending within a row), with the CSR form of
    its transpose; built by :func:`sparse_pattern`. Stored entries may
    repeat (a repeated edge contributes one term per copy, as in message
    passing). Index tensors are int32 whenever the sizes allow (faster in
    MKL and cuSPARSE), int64 otherwise.

    Attributes:
        rowptr (torch.Tensor): CSR row pointer, :obj:`[M + 1]`.
        row (torch.Tensor): row of each entry, :obj:`[nnz]`.
        col (torch.Tensor): column of each entry, :obj:`[nnz]`.
        rowptr_t (torch.Tensor): CSR row pointer of the transpose,
            :obj:`[N + 1]`.
        row_t (torch.Tensor): row of each entry of the transpose.
        col_t (torch.Tensor): column of each entry of the transpose.
        perm_t (torch.Tensor): entry :obj:`k` of the transpose holds the
            value of entry :obj:`perm_t[k]` of this pattern (the other way
            round if :obj:`transposed`).
        transposed (bool): whether this is the :meth:`t` of a built
            pattern.
    """
    rowptr: Tensor
    row: Tensor
    col: Tensor
    rowptr_t: Tensor
    row_t: Tensor
    col_t: Tensor
    perm_t: Tensor
    transposed: bool = False

    @property
    def size(self) -> Tuple[int, int]:
        return self.rowptr.numel() - 1, self.rowptr_t.numel() - 1

    @property
    def nnz(self) -> int:
        return self.col.numel()

    def t(self) -> 'SparsePattern':
        r"""The pattern of the transposed matrix (no computation)."""
        return SparsePattern(self.rowptr_t, self.row_t, self.col_t,
                             self.rowptr, self.row, self.col, self.perm_t,
                             not self.transposed)

    def transpose_values(self, values: Tensor) -> Tensor:
        r"""The per-entry :obj:`values` reordered for the pattern
        :meth:`t`."""
        return _transpose_values(values, self.perm_t, self.transposed)

    def __repr__(self) -> str:
        return f'SparsePattern(size={self.size}, nnz={self.nnz})'


def _transpose_values(values: Tensor, perm_t: Tensor,
                      transposed: bool) -> Tensor:
    if transposed:  # perm_t maps the other way: scatter, not gather
        # (index_add of a permutation: index_copy takes no int32 index).
        return torch.zeros_like(values).index_add(0, perm_t, values)
    return values.index_select(0, perm_t)


def _kernel(name: str, schema: str, fake: Callable) -> Callable:
    r"""Registers the decorated function as the custom operator
    :obj:`apnet_pyg::name` (with the :obj:`fake` implementation) and
    returns a function that calls the operator under :func:`torch.compile`
    (opaque to TorchDynamo) and on meta tensors, and the plain function
    otherwise."""
    def register(function: Callable) -> Callable:
        function = _without_autocast(function)
        op = torch.library.custom_op(f'apnet_pyg::{name}', function,
                                     mutates_args=(), schema=schema)
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
        if torch.amp.is_autocast_available(device_type) and \
                torch.is_autocast_enabled(device_type):
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
# Building the pattern
# ---------------------------------------------------------------------------
def _index_dtype(num_rows: int, num_cols: int, nnz: int) -> torch.dtype:
    # 32-bit CSR indices run ~20% faster in MKL and cuSPARSE; 64-bit only
    # when they do not fit.
    limit = torch.iinfo(torch.int32).max
    return torch.int32 if max(num_rows, num_cols, nnz) < limit else torch.long


def _is_sorted(key: Tensor) -> bool:
    return key.numel() < 2 or bool((key[1:] >= key[:-1]).all())


def _argsort(key: Tensor) -> Tensor:
    if key.device.type == 'cpu':
        # numpy's introsort runs 3-4x faster than torch.sort on CPU at
        # these sizes. Ties (repeated edges) come in some fixed order, which
        # is all a pattern needs.
        return torch.from_numpy(np.argsort(key.numpy(), kind='quicksort'))
    return torch.argsort(key)


def _sparse_pattern_fake(row, col, num_rows, num_cols):
    nnz = row.size(0)
    dtype = _index_dtype(num_rows, num_cols, nnz)
    sizes = (num_rows + 1, nnz, nnz, num_cols + 1, nnz, nnz, nnz)
    return (*[row.new_empty(size, dtype=dtype) for size in sizes],
            row.new_empty(nnz, dtype=torch.long))


@_kernel('sparse_pattern',
         '(Tensor row, Tensor col, SymInt num_rows, SymInt num_cols) -> '
         '(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)',
         _sparse_pattern_fake)
def _sparse_pattern(row: Tensor, col: Tensor, num_rows: int,
                    num_cols: int) -> Tuple[Tensor, ...]:
    # On CPU, reading "is it sorted?" costs no host synchronisation, and a
    # sort skipped saves most of the fixed cost of a small graph's layer.
    on_cpu = row.device.type == 'cpu'
    # int64 keys: row * num_cols overflows int32 from 46,341 nodes on.
    row, col = row.long(), col.long()
    key = row * num_cols + col
    if on_cpu and _is_sorted(key):  # Already sorted by (row, col).
        perm = torch.arange(key.numel(), device=key.device)
    else:
        perm = _argsort(key)
    sorted_by_col = on_cpu and _is_sorted(col * num_rows + row)
    row, col = row.index_select(0, perm), col.index_select(0, perm)
    if sorted_by_col:
        # A coalesced edge_index read as its transpose: the transpose is in
        # input order, no second sort.
        perm_t = torch.empty_like(perm)
        perm_t[perm] = torch.arange(perm.numel(), device=perm.device)
    else:
        # Sorted by (col, row), so that a symmetric pattern and its
        # transpose have the same index arrays.
        perm_t = _argsort(col * num_rows + row)
    row_t, col_t = col.index_select(0, perm_t), row.index_select(0, perm_t)

    dtype = _index_dtype(num_rows, num_cols, key.numel())
    row, col, row_t, col_t, perm_t = (
        t.to(dtype) for t in (row, col, row_t, col_t, perm_t))
    return (index2ptr(row, num_rows), row, col, index2ptr(row_t, num_cols),
            row_t, col_t, perm_t, perm)


def sparse_pattern(row: Tensor, col: Tensor, size: Tuple[int, int], *,
                   check: bool = True) -> Tuple[SparsePattern, Tensor]:
    r"""Builds the pattern of the entries :obj:`(row[k], col[k])` of an
    :math:`M \times N` matrix, without a host synchronisation (on CPU it
    skips the sorts that an already sorted input does not need). Indices
    out of range raise (an asynchronous assertion: a :class:`RuntimeError`
    on CPU, a device assertion on a GPU); :obj:`check=False` skips the
    checks, for a caller that made them (as
    :class:`~apnet_pyg.nn.APNetConv` does).

    Returns:
        The pattern and :obj:`perm`, such that entry :obj:`k` of the
        pattern is input entry :obj:`perm[k]` (reorder per-entry values
        with :obj:`values[perm]`).
    """
    if check and not is_compiling():
        _check_entries(row, col, size)
    *tensors, perm = _sparse_pattern(row, col, size[0], size[1])
    return SparsePattern(*tensors), perm


def _check_entries(row: Tensor, col: Tensor, size: Tuple[int, int]) -> None:
    if not isinstance(size, (tuple, list)) or len(size) != 2:
        raise ValueError(f"'size' must be a pair (num_rows, num_cols) "
                         f"(got {size!r})")
    check_int(size[0], 'size[0]', minimum=0)
    check_int(size[1], 'size[1]', minimum=0)
    for name, index in (('row', row), ('col', col)):
        if not isinstance(index, Tensor) or index.dim() != 1 or \
                index.is_floating_point() or index.is_complex() or \
                index.dtype == torch.bool:
            raise ValueError(f"'{name}' must be a 1-D tensor of integer "
                             f"indices (got {_describe(index)})")
    if row.numel() != col.numel():
        raise ValueError(f"'row' and 'col' must have one entry each per "
                         f"entry (got {row.numel()} and {col.numel()})")
    check_same_device(col, 'col', row, 'row')
    if row.numel() > 0:
        # An asynchronous assertion: no host synchronisation.
        in_range = ((row.min() >= 0) & (row.max() < size[0]) &
                    (col.min() >= 0) & (col.max() < size[1]))
        torch._assert_async(in_range, f"'row' or 'col' holds indices "
                            f"outside the size {tuple(size)}")


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f'shape {tuple(value.shape)}, dtype {value.dtype}'
    return type(value).__name__


def _check_operand(tensor: Tensor, name: str, pattern: SparsePattern,
                   rows: int, side: str, dim: int = 2) -> None:
    r"""Checks that :obj:`tensor` (:obj:`dim`-D, floating point) has
    :obj:`rows` rows and lives on the pattern's device (metadata only;
    the kernels would otherwise read out of bounds)."""
    check_features(tensor, name, dim=dim)
    if tensor.size(0) != rows:
        raise ValueError(f"'{name}' must have {rows} rows, the pattern's "
                         f"{side} (got shape {tuple(tensor.shape)})")
    check_same_device(tensor, name, pattern.rowptr, 'pattern')


def _check_pattern(pattern: SparsePattern) -> None:
    if not isinstance(pattern, SparsePattern):
        raise ValueError(f"'pattern' must be a SparsePattern from "
                         f"sparse_pattern(row, col, size) (got "
                         f"{type(pattern).__name__})")


def _check_entry_values_and_x(pattern: SparsePattern, values: Tensor,
                              name: str, x: Tensor,
                              same_dtype: bool = True) -> None:
    r"""The operands of a sparse-dense product: one value per entry of
    :obj:`pattern` and a row of :obj:`x` per column (of one dtype if
    :obj:`same_dtype`)."""
    _check_pattern(pattern)
    _check_operand(values, name, pattern, pattern.nnz, 'number of entries',
                   dim=1)
    _check_operand(x, 'x', pattern, pattern.size[1], 'number of columns')
    if same_dtype:
        _check_same_dtype(values, name, x, 'x')


def _check_same_dtype(tensor: Tensor, name: str, reference: Tensor,
                      reference_name: str) -> None:
    if tensor.dtype != reference.dtype:
        raise ValueError(f"'{name}' has dtype {tensor.dtype} but "
                         f"'{reference_name}' {reference.dtype}: convert one "
                         f"to the other")


def _check_same_width(tensor: Tensor, name: str, reference: Tensor,
                      reference_name: str) -> None:
    if tensor.size(-1) != reference.size(-1):
        raise ValueError(f"'{name}' and '{reference_name}' must have the "
                         f"same number of features (got "
                         f"{tensor.size(-1)} and {reference.size(-1)})")


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------
def _csr_matmul(rowptr: Tensor, col: Tensor, values: Tensor,
                x: Tensor) -> Tensor:
    num_rows = rowptr.numel() - 1
    if col.numel() == 0:
        return x.new_zeros(num_rows, x.size(1))
    with warnings.catch_warnings():
        # "Sparse CSR tensor support is in beta state": we rely only on
        # the two products here, which are stable and tested.
        warnings.simplefilter('ignore', UserWarning)
        csr = torch.sparse_csr_tensor(rowptr, col, values,
                                      (num_rows, x.size(0)),
                                      check_invariants=False)
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
        row = torch.repeat_interleave(
            torch.arange(num_rows, device=col.device, dtype=col.dtype),
            rowptr.diff(), output_size=col.numel())
        return (a @ b.t()).view(-1).index_select(0, row * num_cols + col)
    values = a.new_zeros(col.numel())
    if col.numel() == 0:
        return values
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        csr = torch.sparse_csr_tensor(rowptr, col, values,
                                      (a.size(0), b.size(0)),
                                      check_invariants=False)
    # Written into `values` (out=), which is then no view of a sparse
    # tensor. b.t() must stay a transposed view: a contiguous [F, N] copy
    # runs the kernel five times slower on CPU.
    torch.sparse.sampled_addmm(csr, a.contiguous(), b.contiguous().t(),
                               beta=0.0, out=csr)
    return values


@_kernel('spmm', '(Tensor rowptr, Tensor col, Tensor values, Tensor x) -> '
         'Tensor', lambda rowptr, col, values, x: x.new_empty(
             rowptr.size(0) - 1, x.size(1)))
def _spmm_kernel(rowptr: Tensor, col: Tensor, values: Tensor,
                 x: Tensor) -> Tensor:
    dtype = compute_dtype(x.dtype)
    return _csr_matmul(rowptr, col, values.to(dtype),
                       x.to(dtype)).to(x.dtype)


@_kernel('sddmm', '(Tensor rowptr, Tensor col, Tensor a, Tensor b) -> Tensor',
         lambda rowptr, col, a, b: a.new_empty(col.size(0)))
def _sddmm_kernel(rowptr: Tensor, col: Tensor, a: Tensor,
                  b: Tensor) -> Tensor:
    dtype = compute_dtype(a.dtype)
    return _sampled_dot(rowptr, col, a.to(dtype), b.to(dtype)).to(a.dtype)


#: The lower bound of the norms in :func:`edge_cosine`, as in
#: :func:`torch.nn.functional.normalize`. A constant rather than an argument:
#: a float argument would turn symbolic under torch.compile(dynamic=True).
NORM_EPS = 1e-12


def _normalize(x: Tensor) -> Tuple[Tensor, Tensor]:
    # In the compute dtype: a half-precision x is read once, not copied
    # to float32 first (the product promotes it).
    inv_norm = torch.linalg.vector_norm(x, dim=-1,
                                        dtype=compute_dtype(x.dtype))
    inv_norm = inv_norm.clamp_min_(NORM_EPS).reciprocal_()
    return x * inv_norm.unsqueeze(-1), inv_norm


def _edge_cosine_fake(rowptr, col, a, b):
    dtype = compute_dtype(a.dtype)
    h_b, inv_b = a.new_empty(0, dtype=dtype), a.new_empty(0, dtype=dtype)
    if b is not None:
        h_b = b.new_empty(b.shape, dtype=dtype)
        inv_b = b.new_empty(b.size(0), dtype=dtype)
    return (a.new_empty(col.size(0), dtype=dtype),
            a.new_empty(a.shape, dtype=dtype),
            a.new_empty(a.size(0), dtype=dtype), h_b, inv_b)


@_kernel('edge_cosine',
         '(Tensor rowptr, Tensor col, Tensor a, Tensor? b) -> '
         '(Tensor, Tensor, Tensor, Tensor, Tensor)', _edge_cosine_fake)
def _edge_cosine_kernel(rowptr: Tensor, col: Tensor, a: Tensor,
                        b: Optional[Tensor]) -> Tuple[Tensor, ...]:
    # The cosines and, for the backward pass, the normalised rows and
    # inverse norms of a and b (empty for b=None: b is a), all in the
    # compute dtype.
    h_a, inv_a = _normalize(a)
    if b is None:
        return (_sampled_dot(rowptr, col, h_a, h_a), h_a, inv_a,
                h_a.new_empty(0), h_a.new_empty(0))
    h_b, inv_b = _normalize(b)
    return _sampled_dot(rowptr, col, h_a, h_b), h_a, inv_a, h_b, inv_b


def _edge_cosine_backward_fake(rowptr, row, col, rowptr_t, col_t, perm_t,
                               transposed, grad_cos, cos, h_a, inv_a, h_b,
                               inv_b, needs_grad_b):
    if h_b is None or not needs_grad_b:
        return torch.empty_like(h_a), h_a.new_empty(0)
    return torch.empty_like(h_a), torch.empty_like(h_b)


# The pattern, as the backward kernels take it (the arguments of
# _backward_args).
_PATTERN_SCHEMA = ('Tensor rowptr, Tensor row, Tensor col, Tensor rowptr_t, '
                   'Tensor col_t, Tensor perm_t, bool transposed')


@_kernel('edge_cosine_backward',
         f'({_PATTERN_SCHEMA}, Tensor grad_cos, Tensor cos, Tensor h_a, '
         f'Tensor inv_a, Tensor? h_b, Tensor? inv_b, bool needs_grad_b) -> '
         f'(Tensor, Tensor)', _edge_cosine_backward_fake)
def _edge_cosine_backward_kernel(
        rowptr: Tensor, row: Tensor, col: Tensor, rowptr_t: Tensor,
        col_t: Tensor, perm_t: Tensor, transposed: bool, grad_cos: Tensor,
        cos: Tensor, h_a: Tensor, inv_a: Tensor, h_b: Optional[Tensor],
        inv_b: Optional[Tensor], needs_grad_b: bool) -> Tuple[Tensor, Tensor]:
    # With h = x / |x| and c_ij = <ha_i, hb_j>:
    #   dL/da_i = (sum_j g_ij hb_j - s_i ha_i) / |a_i|,  s_i = sum_j g_ij c_ij
    #   dL/db_j = (sum_i g_ij ha_i - t_j hb_j) / |b_j|,  t_j = sum_i g_ij c_ij
    # and for b = a both terms add up. In the compute dtype (cos's).
    grad_cos = grad_cos.to(cos.dtype)
    grad_transposed = _transpose_values(grad_cos, perm_t, transposed)
    weighted = grad_cos * cos
    if h_b is None:
        # One SpMM instead of two when the transpose has the same index
        # arrays (both sorted the same way); checked on CPU only, where it
        # costs no host synchronisation.
        if (rowptr.device.type == 'cpu' and rowptr.numel() == rowptr_t.numel()
                and torch.equal(rowptr, rowptr_t) and torch.equal(col, col_t)):
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


def _softmax_spmm_fake(rowptr, row, col, logits, x, loop_logits):
    dtype = compute_dtype(logits.dtype, x.dtype)
    alpha_loop = logits.new_empty(
        0 if loop_logits is None else loop_logits.size(0), dtype=dtype)
    return (x.new_empty(rowptr.size(0) - 1, x.size(1), dtype=dtype),
            logits.new_empty(logits.shape, dtype=dtype), alpha_loop)


@_kernel('softmax_spmm',
         '(Tensor rowptr, Tensor row, Tensor col, Tensor logits, Tensor x, '
         'Tensor? loop_logits) -> (Tensor, Tensor, Tensor)',
         _softmax_spmm_fake)
def _softmax_spmm_kernel(rowptr: Tensor, row: Tensor, col: Tensor,
                         logits: Tensor, x: Tensor,
                         loop_logits: Optional[Tensor]) -> Tuple[Tensor, ...]:
    # All three outputs in the compute dtype (the autograd function saves
    # them for the backward pass and returns them in the inputs' dtypes).
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
        return _csr_matmul(rowptr, col, alpha, x), alpha, logits.new_empty(0)
    alpha_loop = (loop_logits - row_max).exp_()
    denominator += alpha_loop
    alpha.div_(denominator.index_select(0, row))
    alpha_loop /= denominator
    out = _csr_matmul(rowptr, col, alpha, x)
    out.addcmul_(alpha_loop.unsqueeze(-1), x[:alpha_loop.numel()])
    return out, alpha, alpha_loop


def _softmax_spmm_backward_fake(rowptr, row, col, rowptr_t, col_t, perm_t,
                                transposed, x, out, alpha, alpha_loop,
                                grad_out, grad_alpha, grad_alpha_loop,
                                needs_grad_x):
    # All in the compute dtype (out's).
    grad_x = x.new_empty(x.shape if needs_grad_x else (0, ),
                         dtype=out.dtype)
    grad_loop = alpha.new_empty(0) if alpha_loop is None else \
        torch.empty_like(alpha_loop)
    return torch.empty_like(alpha), grad_x, grad_loop


@_kernel('softmax_spmm_backward',
         f'({_PATTERN_SCHEMA}, Tensor x, Tensor out, Tensor alpha, '
         f'Tensor? alpha_loop, Tensor grad_out, Tensor? grad_alpha, '
         f'Tensor? grad_alpha_loop, bool needs_grad_x) -> '
         f'(Tensor, Tensor, Tensor)', _softmax_spmm_backward_fake)
def _softmax_spmm_backward_kernel(
        rowptr: Tensor, row: Tensor, col: Tensor, rowptr_t: Tensor,
        col_t: Tensor, perm_t: Tensor, transposed: bool, x: Tensor,
        out: Tensor, alpha: Tensor, alpha_loop: Optional[Tensor],
        grad_out: Tensor, grad_alpha: Optional[Tensor],
        grad_alpha_loop: Optional[Tensor],
        needs_grad_x: bool) -> Tuple[Tensor, Tensor, Tensor]:
    # out_i = sum_j alpha_ij x_j (+ alpha_ii x_i) and alpha = softmax(z), so
    #   dL/dz_ij = alpha_ij (g_ij - sum_k alpha_ik g_ik),  g_ij = <go_i, x_j>,
    # where sum_k alpha_ik g_ik = <go_i, out_i>: a row dot, no scatter.
    # In the compute dtype (out's, alpha's).
    dtype = out.dtype
    x, grad_out = x.to(dtype), grad_out.to(dtype)
    if grad_alpha is not None:
        grad_alpha = grad_alpha.to(dtype)
    if grad_alpha_loop is not None:
        grad_alpha_loop = grad_alpha_loop.to(dtype)
    grad = _sampled_dot(rowptr, col, grad_out, x)
    row_sum = _row_dot(grad_out, out)
    if grad_alpha is not None:  # The attention itself is used downstream.
        grad += grad_alpha
        row_sum.index_add_(0, row, alpha * grad_alpha)
    grad_loop_logits = alpha.new_empty(0)
    if alpha_loop is not None:
        grad_loop = _row_dot(grad_out, x[:alpha_loop.numel()])
        if grad_alpha_loop is not None:
            grad_loop += grad_alpha_loop
            row_sum.addcmul_(alpha_loop, grad_alpha_loop)
        grad_loop_logits = grad_loop.sub_(row_sum).mul_(alpha_loop)
    grad_logits = grad.sub_(row_sum.index_select(0, row)).mul_(alpha)
    grad_x = x.new_empty(0)
    if needs_grad_x:
        grad_x = _csr_matmul(rowptr_t, col_t,
                             _transpose_values(alpha, perm_t, transposed),
                             grad_out)
        if alpha_loop is not None:
            grad_x[:alpha_loop.numel()].addcmul_(alpha_loop.unsqueeze(-1),
                                                 grad_out)
    return grad_logits, grad_x, grad_loop_logits


# ---------------------------------------------------------------------------
# Autograd functions
# ---------------------------------------------------------------------------
def _grad_of(outputs: List[Tensor], grad_outputs: List[Optional[Tensor]],
             inputs: List[Optional[Tensor]],
             needs_grad: Tuple[bool, ...]) -> List[Optional[Tensor]]:
    r"""The gradient of :obj:`outputs` with respect to those :obj:`inputs`
    that need one (:obj:`None` for the others), itself differentiable: the
    second-derivative path of the fused backward passes. An input the
    differentiated outputs do not use (:obj:`x` when only the attention
    is) gets :obj:`None`, autograd's zero."""
    pairs = [(out, grad) for out, grad in zip(outputs, grad_outputs)
             if grad is not None]
    wanted = [t for t, needed in zip(inputs, needs_grad) if needed]
    grads = iter(torch.autograd.grad([out for out, _ in pairs], wanted,
                                     [grad for _, grad in pairs],
                                     create_graph=True, allow_unused=True))
    return [next(grads) if needed else None for needed in needs_grad]


def _save(ctx, pattern: SparsePattern, *tensors: Optional[Tensor]) -> None:
    # The pattern holds index tensors that autograd never differentiates:
    # kept as an attribute, which costs less than saving seven tensors.
    ctx.pattern = pattern
    ctx.save_for_backward(*tensors)


def _saved(ctx) -> Tuple[SparsePattern, Tuple[Optional[Tensor], ...]]:
    return ctx.pattern, ctx.saved_tensors


def _backward_args(pattern: SparsePattern) -> Tuple:
    return (pattern.rowptr, pattern.row, pattern.col, pattern.rowptr_t,
            pattern.col_t, pattern.perm_t, pattern.transposed)


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: SparsePattern, values: Tensor,
                x: Tensor) -> Tensor:
        _save(ctx, pattern, values, x)
        return _spmm_kernel(pattern.rowptr, pattern.col, values, x)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        pattern, (values, x) = _saved(ctx)
        grad_values = grad_x = None
        if ctx.needs_input_grad[1]:
            # d out_i / d v_ij = x_j: an SDDMM of the output gradient with x.
            grad_values = sddmm(pattern, grad_out, x)
        if ctx.needs_input_grad[2]:
            # d out / d x = A^T: an SpMM on the transposed pattern.
            grad_x = spmm(pattern.t(), pattern.transpose_values(values),
                          grad_out)
        return None, grad_values, grad_x


class _SDDMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: SparsePattern, a: Tensor, b: Tensor) -> Tensor:
        _save(ctx, pattern, a, b)
        return _sddmm_kernel(pattern.rowptr, pattern.col, a, b)

    @staticmethod
    def backward(ctx, grad_values: Tensor):
        pattern, (a, b) = _saved(ctx)
        grad_a = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a = spmm(pattern, grad_values, b)
        if ctx.needs_input_grad[2]:
            grad_b = spmm(pattern.t(), pattern.transpose_values(grad_values),
                          a)
        return None, grad_a, grad_b


class _EdgeCosine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: SparsePattern, a: Tensor,
                b: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        # Saved in the compute dtype; the cosines returned in a's.
        cos, h_a, inv_a, h_b, inv_b = _edge_cosine_kernel(
            pattern.rowptr, pattern.col, a, b)
        if b is None:  # The kernel's empty placeholders.
            h_b = inv_b = None
        _save(ctx, pattern, a, b, cos, h_a, inv_a, h_b, inv_b)
        ctx.mark_non_differentiable(inv_a)
        return cos.to(a.dtype), inv_a

    @staticmethod
    def backward(ctx, grad_cos: Tensor, _):
        pattern, (a, b, cos, h_a, inv_a, h_b, inv_b) = _saved(ctx)
        needs_grad = ctx.needs_input_grad[1:3]
        if torch.is_grad_enabled():
            # A second derivative is asked for: differentiate the composable
            # version (normalize + differentiable SDDMM) instead.
            h_a = F.normalize(a.to(cos.dtype), p=2.0, dim=-1, eps=NORM_EPS)
            h_b = h_a if b is None else F.normalize(
                b.to(cos.dtype), p=2.0, dim=-1, eps=NORM_EPS)
            grad_a, grad_b = _grad_of(
                [sddmm(pattern, h_a, h_b).to(a.dtype)], [grad_cos], [a, b],
                needs_grad)
            return None, grad_a, grad_b, None

        grad_a, grad_b = _edge_cosine_backward_kernel(
            *_backward_args(pattern), grad_cos, cos, h_a, inv_a, h_b, inv_b,
            needs_grad[1])
        return (None, grad_a.to(a.dtype) if needs_grad[0] else None,
                grad_b.to(b.dtype) if needs_grad[1] else None, None)


class _SoftmaxSpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: SparsePattern, logits: Tensor, x: Tensor,
                loop_logits: Optional[Tensor]) -> Tuple[Tensor, Tensor,
                                                        Tensor]:
        # Saved in the compute dtype; returned in the inputs' dtypes.
        out, alpha, alpha_loop = _softmax_spmm_kernel(
            pattern.rowptr, pattern.row, pattern.col, logits, x, loop_logits)
        _save(ctx, pattern, logits, x, loop_logits, out, alpha,
              None if loop_logits is None else alpha_loop)
        ctx.set_materialize_grads(False)  # Often only `out` is used.
        return (out.to(x.dtype), alpha.to(logits.dtype),
                alpha_loop.to(logits.dtype))

    @staticmethod
    def backward(ctx, grad_out: Optional[Tensor], grad_alpha: Optional[Tensor],
                 grad_alpha_loop: Optional[Tensor]):
        pattern, (logits, x, loop_logits, out, alpha,
                  alpha_loop) = _saved(ctx)
        needs_grad = ctx.needs_input_grad[1:4]
        if torch.is_grad_enabled():
            # A second derivative is asked for: differentiate the composable
            # version (softmax from torch operations + differentiable SpMM).
            outputs = _composable_softmax_spmm(pattern, logits, x,
                                               loop_logits)
            grads = _grad_of(list(outputs),
                             [grad_out, grad_alpha, grad_alpha_loop],
                             [logits, x, loop_logits], needs_grad)
            return None, *grads

        if grad_out is None:  # Only the attention is used downstream.
            grad_out = torch.zeros_like(out)
        grad_logits, grad_x, grad_loop = _softmax_spmm_backward_kernel(
            *_backward_args(pattern), x, out, alpha, alpha_loop, grad_out,
            grad_alpha, grad_alpha_loop, needs_grad[1])
        return (None, grad_logits.to(logits.dtype) if needs_grad[0] else None,
                grad_x.to(x.dtype) if needs_grad[1] else None,
                grad_loop.to(logits.dtype) if needs_grad[2] else None)


def _composable_softmax_spmm(
        pattern: SparsePattern, logits: Tensor, x: Tensor,
        loop_logits: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    # In the compute dtype, the results in the inputs' dtypes, as the
    # fused kernels.
    dtypes = x.dtype, logits.dtype
    dtype = compute_dtype(*dtypes)
    logits, x = logits.to(dtype), x.to(dtype)
    if loop_logits is not None:
        loop_logits = loop_logits.to(dtype)
    row = pattern.row
    row_max = torch.segment_reduce(logits.detach(), 'max',
                                   offsets=pattern.rowptr, unsafe=True)
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
    out = spmm(pattern, alpha, x)
    if loop_logits is not None:
        out = out + alpha_loop.unsqueeze(-1) * x[:alpha_loop.numel()]
    return out.to(dtypes[0]), alpha.to(dtypes[1]), alpha_loop.to(dtypes[1])


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------
def spmm(pattern: SparsePattern, values: Tensor, x: Tensor) -> Tensor:
    r"""Sparse-dense product :math:`\mathbf{o}_i = \sum_{(i, j)}
    v_{ij} \mathbf{x}_j`, differentiable in :obj:`values` and :obj:`x`
    without a dense :math:`M \times N` intermediate.

    Args:
        pattern (SparsePattern): the pattern, of size :math:`(M, N)`.
        values (torch.Tensor): one value per entry, :obj:`[nnz]`.
        x (torch.Tensor): dense features, :obj:`[N, F]`, of the dtype of
            :obj:`values` (float16 and bfloat16 are summed in float32).

    :rtype: :class:`torch.Tensor` of shape :obj:`[M, F]`, in :obj:`x`'s
        dtype
    """
    if not is_compiling():
        _check_entry_values_and_x(pattern, values, 'values', x)
    return _SpMM.apply(pattern, values, x)


def sddmm(pattern: SparsePattern, a: Tensor, b: Tensor) -> Tensor:
    r"""Sampled dense-dense product :math:`v_{ij} = \langle \mathbf{a}_i,
    \mathbf{b}_j \rangle` for every entry :math:`(i, j)` of the pattern,
    differentiable in :obj:`a` and :obj:`b`.

    Args:
        pattern (SparsePattern): the pattern, of size :math:`(M, N)`.
        a (torch.Tensor): :obj:`[M, F]`.
        b (torch.Tensor): :obj:`[N, F]`, of the dtype of :obj:`a`
            (float16 and bfloat16 are summed in float32).

    :rtype: :class:`torch.Tensor` of shape :obj:`[nnz]`, in pattern order,
        in :obj:`a`'s dtype
    """
    if not is_compiling():
        _check_pattern(pattern)
        _check_operand(a, 'a', pattern, pattern.size[0], 'number of rows')
        _check_operand(b, 'b', pattern, pattern.size[1], 'number of columns')
        _check_same_width(b, 'b', a, 'a')
        _check_same_dtype(b, 'b', a, 'a')
    return _SDDMM.apply(pattern, a, b)


def edge_cosine(pattern: SparsePattern, a: Tensor,
                b: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r"""Cosine similarity :math:`\cos(\mathbf{a}_i, \mathbf{b}_j)` for
    every entry :math:`(i, j)` of the pattern, equal to
    :obj:`sddmm(pattern, F.normalize(a), F.normalize(b))` (norms bounded
    below by :data:`NORM_EPS`),
    with a fused backward (see the module docstring). A zero row has cosine
    :math:`0` with every row.

    Args:
        pattern (SparsePattern): the pattern, of size :math:`(M, N)`.
        a (torch.Tensor): :obj:`[M, F]`.
        b (torch.Tensor, optional): :obj:`[N, F]`, of the dtype of
            :obj:`a`; :obj:`None` for
            :obj:`b = a` (a square pattern), which saves an SpMM in the
            backward pass of a symmetric pattern. (default: :obj:`None`)

    :rtype: (:class:`torch.Tensor` :obj:`[nnz]`, :class:`torch.Tensor`
        :obj:`[M]`): the cosines in pattern order, and the cosine of every
        row of :obj:`a` with itself (the logit of a self-loop: :math:`1`,
        or :math:`0` for a row of norm at most :data:`NORM_EPS`; constant),
        both in :obj:`a`'s dtype (computed in float32 for float16 and
        bfloat16: pass :obj:`a.float()` to keep the float32 cosines, as
        :class:`~apnet_pyg.nn.APNetConv` does)
    """
    if b is a:  # The same nodes (and one tensor given twice to autograd).
        b = None
    if not is_compiling():
        _check_pattern(pattern)
        _check_operand(a, 'a', pattern, pattern.size[0], 'number of rows')
        if b is None and pattern.size[0] != pattern.size[1]:
            raise ValueError(f"b=None (b = a) needs a square pattern (got "
                             f"size {pattern.size}); pass 'b'")
        if b is not None:
            _check_operand(b, 'b', pattern, pattern.size[1],
                           'number of columns')
            _check_same_width(b, 'b', a, 'a')
            _check_same_dtype(b, 'b', a, 'a')
    cos, inv_a = _EdgeCosine.apply(pattern, a, b)
    # inv_a = 1 / max(|a_i|, eps) is below 1 / eps exactly when |a_i| > eps.
    return cos, (inv_a < 1.0 / NORM_EPS).to(cos.dtype)


def softmax_spmm(
    pattern: SparsePattern,
    logits: Tensor,
    x: Tensor,
    loop_logits: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    r"""Attention aggregation: the softmax of :obj:`logits` over the
    entries of every row, :math:`\alpha_{ij} = \exp(z_{ij}) / \sum_k
    \exp(z_{ik})`, and the sparse-dense product :math:`\mathbf{o}_i =
    \sum_j \alpha_{ij} \mathbf{x}_j`, differentiable in :obj:`logits`,
    :obj:`x` and :obj:`loop_logits`, with a fused backward (see the module
    docstring). A row without entries gets :math:`\mathbf{o}_i =
    \mathbf{0}`.

    :obj:`x` may have another floating dtype than the logits, e.g.
    float16 features with float32 logits: everything is computed in
    :func:`compute_dtype` of both (float32 at least), the aggregation is
    returned in :obj:`x`'s dtype and the attention in the logits'.

    Args:
        pattern (SparsePattern): the pattern, of size :math:`(M, N)`.
        logits (torch.Tensor): one logit per entry, :obj:`[nnz]`.
        x (torch.Tensor): dense features, :obj:`[N, F]`.
        loop_logits (torch.Tensor, optional): the logit :math:`z_{ii}` of a
            self-loop on every row, :obj:`[M]` (:math:`M \leq N`), of the
            logits' dtype, which
            joins the softmax of its row and aggregates :math:`\mathbf{x}_i`
            (:math:`-\infty` for none). (default: :obj:`None`)

    :rtype: (:class:`torch.Tensor` :obj:`[M, F]`, :class:`torch.Tensor`
        :obj:`[nnz]`, :class:`torch.Tensor` :obj:`[M]` or :obj:`None`): the
        aggregation and the attention :math:`\alpha` (in pattern order) of
        the entries and of the self-loops
    """
    if not is_compiling():
        _check_entry_values_and_x(pattern, logits, 'logits', x,
                                  same_dtype=False)
        if loop_logits is not None:
            _check_operand(loop_logits, 'loop_logits', pattern,
                           pattern.size[0], 'number of rows', dim=1)
            _check_same_dtype(loop_logits, 'loop_logits', logits, 'logits')
            if pattern.size[0] > pattern.size[1]:
                raise ValueError(f"'loop_logits' needs a pattern with no "
                                 f"more rows than columns (got size "
                                 f"{pattern.size}): row i's self-loop "
                                 f"aggregates x[i]")
    out, alpha, alpha_loop = _SoftmaxSpMM.apply(pattern, logits, x,
                                                loop_logits)
    return out, alpha, None if loop_logits is None else alpha_loop
