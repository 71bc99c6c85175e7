r"""Sparse kernels behind :class:`~apnet_pyg.nn.APNetConv`.

Attention propagation needs two sparse products over the same pattern
:math:`\mathcal{E}` (entry :math:`(i, j)` for an edge :math:`j \to i`):

* SDDMM (sampled dense-dense product), :math:`v_{ij} = \langle
  \mathbf{a}_i, \mathbf{b}_j \rangle` for :math:`(i, j) \in \mathcal{E}`,
  which gives the cosine of every edge from normalised projections;
* SpMM (sparse-dense product), :math:`\mathbf{o}_i = \sum_j v_{ij}
  \mathbf{x}_j`, which aggregates the neighbours.

Both run on torch's CSR tensors, which avoids materialising an
:math:`|\mathcal{E}| \times F` message tensor. The pattern is a
:class:`torch_geometric.EdgeIndex`: its cached CSR and CSC forms and the
permutation between them (:func:`csr_arrays`, read into
:class:`CSRArrays`) are all the kernels need. What PyG lacks is written
here: the backward passes. PyTorch's own backward of a sparse product
with respect to the sparse values builds a dense :math:`M \times N`
matrix, and :meth:`torch_geometric.EdgeIndex.matmul` has no gradient for
the values. Each backward is again an SDDMM or an SpMM (on the transposed
pattern), so second derivatives work too.

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
from typing import Callable, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric import EdgeIndex, is_compiling
from torch_geometric.utils.sparse import index2ptr

from apnet_pyg.utils import check_features, check_int, check_same_device


class CSRArrays(NamedTuple):
    r"""The index arrays the kernels read, taken from a
    :class:`~torch_geometric.EdgeIndex` by :func:`csr_arrays`: the CSR
    form of an :math:`M \times N` matrix (:meth:`EdgeIndex.get_csr`), the
    CSR form of its transpose (:meth:`EdgeIndex.get_csc`) and the
    permutation between the two. A tuple of tensors rather than the
    :class:`EdgeIndex` itself because the kernels are
    :func:`torch.library.custom_op` operators, which take tensors only,
    and because :class:`EdgeIndex`'s cache methods do not trace under
    :func:`torch.compile`; read once, it is reused across steps and
    backward passes. Stored entries may repeat (a repeated edge
    contributes one term per copy, as in message passing).

    Attributes:
        rowptr (torch.Tensor): CSR row pointer, :obj:`[M + 1]`.
        row (torch.Tensor): row of each entry, :obj:`[nnz]`.
        col (torch.Tensor): column of each entry, :obj:`[nnz]`.
        rowptr_t (torch.Tensor): CSR row pointer of the transpose,
            :obj:`[N + 1]`.
        row_t (torch.Tensor): row of each entry of the transpose.
        col_t (torch.Tensor): column of each entry of the transpose.
        perm_t (torch.Tensor): entry :obj:`k` of the transpose holds the
            value of entry :obj:`perm_t[k]` (the other way round if
            :obj:`transposed`).
        transposed (bool): whether this is the :meth:`t` of a read one.
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

    def t(self) -> 'CSRArrays':
        r"""The arrays of the transposed matrix (no computation)."""
        return CSRArrays(self.rowptr_t, self.row_t, self.col_t, self.rowptr,
                         self.row, self.col, self.perm_t, not self.transposed)

    def transpose_values(self, values: Tensor) -> Tensor:
        r"""The per-entry :obj:`values` reordered for :meth:`t`."""
        return _transpose_values(values, self.perm_t, self.transposed)

    def __repr__(self) -> str:
        return f'CSRArrays(size={self.size}, nnz={self.nnz})'


#: What the public functions take as the sparse matrix.
Adjacency = Union[EdgeIndex, CSRArrays]


def _transpose_values(values: Tensor, perm_t: Tensor,
                      transposed: bool) -> Tensor:
    if transposed:  # perm_t maps the other way: scatter, not gather
        # (index_add of a permutation: index_copy takes no int32 index).
        return torch.zeros_like(values).index_add(0, perm_t, values)
    return values.index_select(0, perm_t)


def custom_kernel(name: str, schema: str, fake: Callable) -> Callable:
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
# Reading the arrays from an EdgeIndex
# ---------------------------------------------------------------------------
def csr_arrays(edge_index: EdgeIndex,
               dim: int = 0) -> Tuple[CSRArrays, Optional[Tensor]]:
    r"""The arrays of the matrix whose rows are :obj:`edge_index[dim]`
    (:obj:`dim=0`: :obj:`edge_index` read as PyG's :class:`EdgeIndex`
    reads it; :obj:`dim=1`: its transpose, rows the targets of
    :obj:`flow="source_to_target"`), read from (and filling) the cache of
    a sorted :class:`~torch_geometric.EdgeIndex` through
    :meth:`~torch_geometric.EdgeIndex.get_csr` and
    :meth:`~torch_geometric.EdgeIndex.get_csc`; the index dtype is the
    :class:`EdgeIndex`'s (int32 runs faster in MKL and cuSPARSE).

    Returns:
        The arrays and :obj:`perm`, such that entry :obj:`k` of the arrays
        is edge :obj:`perm[k]` (:obj:`None`: edge :obj:`k`, when
        :obj:`edge_index` is sorted by :obj:`edge_index[dim]`).
    """
    if not isinstance(edge_index, EdgeIndex) or not edge_index.is_sorted:
        raise ValueError(f"'edge_index' must be a sorted EdgeIndex (got "
                         f"{_describe(edge_index)}): pass "
                         f"edge_index.sort_by('row')[0]")
    data = edge_index.as_tensor()
    get_rows, get_cols = edge_index.get_csr, edge_index.get_csc
    if dim == 1:
        get_rows, get_cols = get_cols, get_rows
    (_, col), perm = get_rows()
    (_, col_t), perm_t = get_cols()
    size = edge_index.sparse_size()
    size = size if dim == 0 else size[::-1]
    if perm is None:  # Sorted by these rows: the entries are the edges.
        row, row_t = data[dim], data[1 - dim].index_select(0, perm_t)
    else:  # Sorted by the columns: the transpose's entries are the edges.
        row, row_t = data[dim].index_select(0, perm), data[1 - dim]
        # Entry k of the transpose is edge k, entry perm[k] here.
        perm_t = _inverse(perm)
    # The pointers from the sorted indices (O(E), no host read), not from
    # the cache: PyG 2.8's sort_by of a sorted EdgeIndex hands the new one
    # the other dimension's pointers, which a square graph cannot reveal.
    rowptr, rowptr_t = index2ptr(row, size[0]), index2ptr(row_t, size[1])
    return CSRArrays(rowptr, row, col, rowptr_t, row_t, col_t, perm_t), perm


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
        # is all the arrays need.
        return torch.from_numpy(np.argsort(key.numpy(), kind='quicksort'))
    return torch.argsort(key)


def _edge_index_arrays_fake(edge_index, num_rows, num_cols, dim):
    nnz = edge_index.size(1)
    dtype = _index_dtype(num_rows, num_cols, nnz)
    size = (num_rows, num_cols) if dim == 0 else (num_cols, num_rows)
    sizes = (size[0] + 1, nnz, nnz, size[1] + 1, nnz, nnz, nnz)
    return (*[edge_index.new_empty(n, dtype=dtype) for n in sizes],
            edge_index.new_empty(nnz, dtype=torch.long))


def _edge_index_arrays(edge_index: Tensor, num_rows: int, num_cols: int,
                       dim: int) -> Tuple[Tensor, ...]:
    r"""The tensors of :func:`edge_index_arrays`: two
    :class:`EdgeIndex` of the edges, one sorted by
    :obj:`(edge_index[dim], edge_index[1 - dim])` (the arrays' order) and
    one by the transpose's rows with a stable sort of it (so the columns
    within a row ascend in both, and a symmetric pattern and its transpose
    have the same arrays; :meth:`EdgeIndex.get_csc` sorts unstably). A
    sort is skipped where the input is already so sorted (checked on CPU
    only, where that costs no host synchronisation)."""
    size = (num_rows, num_cols)
    order, order_t = ('row', 'col') if dim == 0 else ('col', 'row')
    # int64 keys: row * num_cols overflows int32 from 46,341 nodes on.
    index = edge_index.long()
    key = index[dim] * size[1 - dim] + index[1 - dim]
    dtype = _index_dtype(num_rows, num_cols, edge_index.size(1))
    data = edge_index.to(dtype).contiguous()
    on_cpu = edge_index.device.type == 'cpu'
    if on_cpu and not _is_sorted(key) and \
            _is_sorted(index[1 - dim] * size[dim] + index[dim]):
        # Sorted as the transpose (a coalesced edge_index, targets as
        # rows): the transpose is in input order.
        graph_t = EdgeIndex(data, sparse_size=size, sort_order=order_t)
        graph, perm = EdgeIndex(data, sparse_size=size).sort_by(
            order, stable=True)
        perm_t = _inverse(perm)
    else:
        perm = None
        if not (on_cpu and _is_sorted(key)):
            perm = _argsort(key).to(edge_index.device)
            data = data.index_select(1, perm)
        graph = EdgeIndex(data, sparse_size=size, sort_order=order)
        graph_t, perm_t = EdgeIndex(data, sparse_size=size).sort_by(
            order_t, stable=True)
    if perm is None:
        perm = torch.arange(edge_index.size(1), device=edge_index.device)
    data, data_t = graph.as_tensor(), graph_t.as_tensor()
    return (graph.get_indptr(), data[dim], data[1 - dim],
            graph_t.get_indptr(), data_t[1 - dim], data_t[dim],
            perm_t.to(dtype), perm)


def _inverse(perm: Tensor) -> Tensor:
    return torch.empty_like(perm).index_copy_(
        0, perm.long(), torch.arange(perm.numel(), device=perm.device,
                                     dtype=perm.dtype))


def _unaliased(function: Callable) -> Callable:
    r""":obj:`function` with outputs that share memory with the input or
    an earlier output, or start within it, copied: an operator's outputs
    may alias neither, and its fake outputs start their storage (the
    arrays of a sorted edge_index are views of its two rows)."""
    @functools.wraps(function)
    def wrapper(edge_index: Tensor, *args) -> Tuple[Tensor, ...]:
        seen = {edge_index.untyped_storage().data_ptr()}
        outputs = []
        for tensor in function(edge_index, *args):
            pointer = tensor.untyped_storage().data_ptr()
            outputs.append(tensor.clone() if pointer in seen or
                           tensor.storage_offset() != 0 else tensor)
            seen.add(pointer)
        return tuple(outputs)

    return wrapper


# The same as an operator (see custom_kernel): under torch.compile the sort is
# one opaque node.
_edge_index_arrays_op = torch.library.custom_op(
    'apnet_pyg::edge_index_arrays', _unaliased(_edge_index_arrays),
    mutates_args=(),
    schema='(Tensor edge_index, SymInt num_rows, SymInt num_cols, int dim) '
    '-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)')
_edge_index_arrays_op.register_fake(_edge_index_arrays_fake)


def edge_index_arrays(edge_index: Tensor, size: Tuple[int, int],
                      dim: int = 0, *,
                      check: bool = True) -> Tuple[CSRArrays, Tensor]:
    r""":func:`csr_arrays` of a plain :obj:`edge_index` tensor of sparse
    size :obj:`size`: the :class:`~torch_geometric.EdgeIndex` is built
    here (in int32 where the sizes allow), sorted by
    :obj:`(edge_index[dim], edge_index[1 - dim])` unless already sorted
    by either row (skipped sorts on CPU), without a host synchronisation.
    Under :func:`torch.compile` and for meta tensors it runs as one
    custom operator. Indices out of range raise (an asynchronous
    assertion: a :class:`RuntimeError` on CPU, a device assertion on a
    GPU); :obj:`check=False` skips the checks, for a caller that made them
    (as :class:`~apnet_pyg.nn.APNetConv` does).

    Returns:
        The arrays and :obj:`perm` (int64), such that entry :obj:`k` of
        the arrays is edge :obj:`perm[k]` (reorder per-edge values with
        :obj:`values[perm]`).
    """
    if check and not is_compiling():
        _check_entries(edge_index, size, dim)
    args = (edge_index, size[0], size[1], dim)
    if is_compiling() or edge_index.device.type == 'meta':
        tensors = _edge_index_arrays_op(*args)
    else:
        tensors = _edge_index_arrays(*args)
    return CSRArrays(*tensors[:7]), tensors[7]


def _check_entries(edge_index: Tensor, size: Tuple[int, int],
                   dim: int) -> None:
    if not isinstance(size, (tuple, list)) or len(size) != 2:
        raise ValueError(f"'size' must be a pair (num_rows, num_cols) "
                         f"(got {size!r})")
    check_int(size[0], 'size[0]', minimum=0)
    check_int(size[1], 'size[1]', minimum=0)
    if dim not in (0, 1):
        raise ValueError(f"'dim' must be 0 or 1, the row of 'edge_index' "
                         f"that indexes the matrix rows (got {dim!r})")
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or \
            edge_index.size(0) != 2 or edge_index.is_floating_point() or \
            edge_index.is_complex() or edge_index.dtype == torch.bool:
        raise ValueError(f"'edge_index' must be a [2, nnz] tensor of "
                         f"integer indices (got {_describe(edge_index)})")
    if edge_index.size(1) > 0:
        # An asynchronous assertion: no host synchronisation.
        low, high = edge_index.aminmax(dim=1)
        in_range = ((low >= 0).all() & (high[0] < size[0]) &
                    (high[1] < size[1]))
        torch._assert_async(in_range, f"'edge_index' holds indices "
                            f"outside the size {tuple(size)}")
def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f'shape {tuple(value.shape)}, dtype {value.dtype}'
    return type(value).__name__


def _check_operand(tensor: Tensor, name: str, pattern: CSRArrays,
                   rows: int, side: str, dim: int = 2) -> None:
    r"""Checks that :obj:`tensor` (:obj:`dim`-D, floating point) has
    :obj:`rows` rows and lives on the pattern's device (metadata only;
    the kernels would otherwise read out of bounds)."""
    check_features(tensor, name, dim=dim)
    if tensor.size(0) != rows:
        raise ValueError(f"'{name}' must have {rows} rows, the pattern's "
                         f"{side} (got shape {tuple(tensor.shape)})")
    check_same_device(tensor, name, pattern.rowptr, 'pattern')


def _as_arrays(edge_index: Adjacency) -> CSRArrays:
    r"""The arrays of :obj:`edge_index`: a :class:`CSRArrays` as it is,
    an :class:`EdgeIndex` sorted by row read through :func:`csr_arrays`
    (its entries are then its edges, in its order)."""
    if isinstance(edge_index, CSRArrays):
        return edge_index
    if not isinstance(edge_index, EdgeIndex) or \
            not edge_index.is_sorted_by_row:
        raise ValueError(f"'edge_index' must be an EdgeIndex sorted by row "
                         f"(values follow its order) or CSRArrays from "
                         f"csr_arrays() (got {_describe(edge_index)}): pass "
                         f"EdgeIndex(..., sort_order='row')")
    if None in edge_index.sparse_size():
        raise ValueError("'edge_index' (an EdgeIndex) has no sparse size: "
                         "pass EdgeIndex(..., sparse_size=(M, N))")
    return csr_arrays(edge_index)[0]


def _check_entry_values_and_x(pattern: CSRArrays, values: Tensor,
                              name: str, x: Tensor,
                              same_dtype: bool = True) -> None:
    r"""The operands of a sparse-dense product: one value per entry of
    :obj:`pattern` and a row of :obj:`x` per column (of one dtype if
    :obj:`same_dtype`)."""
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
def _entry_cells(rowptr: Tensor, col: Tensor, num_cols: int) -> Tensor:
    # The flat index row * num_cols + col of every entry.
    row = torch.repeat_interleave(
        torch.arange(rowptr.numel() - 1, device=col.device, dtype=col.dtype),
        rowptr.diff(), output_size=col.numel())
    return row.long() * num_cols + col.long()


def _csr_matmul(rowptr: Tensor, col: Tensor, values: Tensor,
                x: Tensor) -> Tensor:
    num_rows = rowptr.numel() - 1
    if col.numel() == 0:
        return x.new_zeros(num_rows, x.size(1))
    if col.numel() > num_rows * x.size(0):
        # More entries than the matrix has cells (repeated entries):
        # cuSPARSE refuses such a matrix ('invalid value'). Their sums as a
        # dense matrix are smaller than the entries.
        dense = values.new_zeros(num_rows * x.size(0)).index_add_(
            0, _entry_cells(rowptr, col, x.size(0)), values)
        return dense.view(num_rows, x.size(0)) @ x
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
        cell = _entry_cells(rowptr, col, num_cols)
        return (a @ b.t()).view(-1).index_select(0, cell)
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


@custom_kernel('spmm', '(Tensor rowptr, Tensor col, Tensor values, '
               'Tensor x) -> Tensor', lambda rowptr, col, values, x:
               x.new_empty(rowptr.size(0) - 1, x.size(1)))
def _spmm_kernel(rowptr: Tensor, col: Tensor, values: Tensor,
                 x: Tensor) -> Tensor:
    dtype = compute_dtype(x.dtype)
    return _csr_matmul(rowptr, col, values.to(dtype),
                       x.to(dtype)).to(x.dtype)


@custom_kernel('sddmm', '(Tensor rowptr, Tensor col, Tensor a, Tensor b) '
               '-> Tensor', lambda rowptr, col, a, b: a.new_empty(col.size(0)))
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


@custom_kernel('edge_cosine',
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


@custom_kernel('edge_cosine_backward',
               f'({_PATTERN_SCHEMA}, Tensor grad_cos, Tensor cos, '
               f'Tensor h_a, Tensor inv_a, Tensor? h_b, Tensor? inv_b, '
               f'bool needs_grad_b) -> (Tensor, Tensor)',
               _edge_cosine_backward_fake)
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


@custom_kernel('softmax_spmm',
               '(Tensor rowptr, Tensor row, Tensor col, Tensor logits, '
               'Tensor x, Tensor? loop_logits) -> (Tensor, Tensor, Tensor)',
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


@custom_kernel('softmax_spmm_backward',
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
    return (pattern.rowptr, pattern.row, pattern.col, pattern.rowptr_t,
            pattern.col_t, pattern.perm_t, pattern.transposed)


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: CSRArrays, values: Tensor,
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
    def forward(ctx, pattern: CSRArrays, a: Tensor, b: Tensor) -> Tensor:
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
    def forward(ctx, pattern: CSRArrays, a: Tensor,
                b: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        # Saved in the compute dtype; the cosines returned in a's.
        cos, h_a, inv_a, h_b, inv_b = _edge_cosine_kernel(
            pattern.rowptr, pattern.col, a, b)
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
            h_a = F.normalize(_in_dtype(a, cos.dtype), p=2.0, dim=-1,
                              eps=NORM_EPS)
            h_b = h_a if b is None else F.normalize(
                _in_dtype(b, cos.dtype), p=2.0, dim=-1, eps=NORM_EPS)
            grad_a, grad_b = _grad_of(
                [sddmm(pattern, h_a, h_b).to(a.dtype)], [grad_cos], [a, b],
                needs_grad)
            return None, grad_a, grad_b, None

        grad_a, grad_b = _edge_cosine_backward_kernel(
            *_backward_args(pattern), grad_cos, cos, h_a, inv_a, h_b, inv_b,
            needs_grad[1])
        return (None, _in_dtype(grad_a, a.dtype) if needs_grad[0] else None,
                _in_dtype(grad_b, b.dtype) if needs_grad[1] else None, None)


class _SoftmaxSpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: CSRArrays, logits: Tensor, x: Tensor,
                loop_logits: Optional[Tensor]) -> Tuple[Tensor, Tensor,
                                                        Tensor]:
        # Saved in the compute dtype; returned in the inputs' dtypes.
        out, alpha, alpha_loop = _softmax_spmm_kernel(
            pattern.rowptr, pattern.row, pattern.col, logits, x, loop_logits)
        _save(ctx, pattern, logits, x, loop_logits, out, alpha,
              None if loop_logits is None else alpha_loop)
        ctx.set_materialize_grads(False)  # Often only `out` is used.
        return (_in_dtype(out, x.dtype), _in_dtype(alpha, logits.dtype),
                _in_dtype(alpha_loop, logits.dtype))

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
        return (None,
                _in_dtype(grad_logits, logits.dtype) if needs_grad[0]
                else None,
                _in_dtype(grad_x, x.dtype) if needs_grad[1] else None,
                _in_dtype(grad_loop, logits.dtype) if needs_grad[2]
                else None)


def _composable_softmax_spmm(
        pattern: CSRArrays, logits: Tensor, x: Tensor,
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
    pattern = _as_arrays(edge_index)
    if not is_compiling():
        _check_entry_values_and_x(pattern, values, 'values', x)
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
    pattern = _as_arrays(edge_index)
    if not is_compiling():
        _check_operand(a, 'a', pattern, pattern.size[0], 'number of rows')
        _check_operand(b, 'b', pattern, pattern.size[1], 'number of columns')
        _check_same_width(b, 'b', a, 'a')
        _check_same_dtype(b, 'b', a, 'a')
    return _SDDMM.apply(pattern, a, b)


def edge_cosine(edge_index: Adjacency, a: Tensor,
                b: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
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
    pattern = _as_arrays(edge_index)
    if b is a:  # The same nodes (and one tensor given twice to autograd).
        b = None
    if not is_compiling():
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
    edge_index: Adjacency,
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

    :rtype: (:class:`torch.Tensor` :obj:`[M, F]`, :class:`torch.Tensor`
        :obj:`[nnz]`, :class:`torch.Tensor` :obj:`[M]` or :obj:`None`): the
        aggregation and the attention :math:`\alpha` (in entry order) of
        the entries and of the self-loops
    """
    pattern = _as_arrays(edge_index)
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
