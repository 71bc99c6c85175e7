r"""The sparse pattern the kernels read: :class:`CSRArrays`, read from a
:class:`~torch_geometric.EdgeIndex` (:func:`csr_arrays`) or built from a
plain :obj:`edge_index` tensor (:func:`edge_index_arrays`)."""

import functools
from typing import Callable, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor
from torch_geometric import EdgeIndex, is_compiling
from torch_geometric.utils.sparse import index2ptr

from apnet_pyg.checks import (
    check_features,
    check_int,
    check_same_device,
    check_same_dtype,
    describe,
)


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
        return CSRArrays(
            self.rowptr_t,
            self.row_t,
            self.col_t,
            self.rowptr,
            self.row,
            self.col,
            self.perm_t,
            not self.transposed,
        )

    def transpose_values(self, values: Tensor) -> Tensor:
        r"""The per-entry :obj:`values` reordered for :meth:`t`."""
        return transpose_entry_values(values, self.perm_t, self.transposed)

    def __repr__(self) -> str:
        return f'CSRArrays(size={self.size}, nnz={self.nnz})'


#: What the public functions take as the sparse matrix.
Adjacency = Union[EdgeIndex, CSRArrays]


def transpose_entry_values(
    values: Tensor, perm_t: Tensor, transposed: bool
) -> Tensor:
    if transposed:  # perm_t maps the other way: scatter, not gather
        # (index_add of a permutation: index_copy takes no int32 index).
        return torch.zeros_like(values).index_add(0, perm_t, values)
    return values.index_select(0, perm_t)


# ---------------------------------------------------------------------------
# Reading the arrays from an EdgeIndex
# ---------------------------------------------------------------------------
def csr_arrays(
    edge_index: EdgeIndex, dim: int = 0
) -> Tuple[CSRArrays, Optional[Tensor]]:
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
        raise ValueError(
            f"'edge_index' must be a sorted EdgeIndex (got "
            f'{describe(edge_index)}): pass '
            f"edge_index.sort_by('row')[0]"
        )
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
    return (
        *[edge_index.new_empty(n, dtype=dtype) for n in sizes],
        edge_index.new_empty(nnz, dtype=torch.long),
    )


def _edge_index_arrays(
    edge_index: Tensor, num_rows: int, num_cols: int, dim: int
) -> Tuple[Tensor, ...]:
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
    if (
        on_cpu
        and not _is_sorted(key)
        and _is_sorted(index[1 - dim] * size[dim] + index[dim])
    ):
        # Sorted as the transpose (a coalesced edge_index, targets as
        # rows): the transpose is in input order.
        graph_t = EdgeIndex(data, sparse_size=size, sort_order=order_t)
        graph, perm = EdgeIndex(data, sparse_size=size).sort_by(
            order, stable=True
        )
        perm_t = _inverse(perm)
    else:
        perm = None
        if not (on_cpu and _is_sorted(key)):
            perm = _argsort(key).to(edge_index.device)
            data = data.index_select(1, perm)
        graph = EdgeIndex(data, sparse_size=size, sort_order=order)
        graph_t, perm_t = EdgeIndex(data, sparse_size=size).sort_by(
            order_t, stable=True
        )
    if perm is None:
        perm = torch.arange(edge_index.size(1), device=edge_index.device)
    data, data_t = graph.as_tensor(), graph_t.as_tensor()
    return (
        graph.get_indptr(),
        data[dim],
        data[1 - dim],
        graph_t.get_indptr(),
        data_t[1 - dim],
        data_t[dim],
        perm_t.to(dtype),
        perm,
    )


def _inverse(perm: Tensor) -> Tensor:
    return torch.empty_like(perm).index_copy_(
        0,
        perm.long(),
        torch.arange(perm.numel(), device=perm.device, dtype=perm.dtype),
    )


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
            outputs.append(
                tensor.clone()
                if pointer in seen or tensor.storage_offset() != 0
                else tensor
            )
            seen.add(pointer)
        return tuple(outputs)

    return wrapper


# The same as an operator (see custom_kernel): under torch.compile the sort is
# one opaque node.
_edge_index_arrays_op = torch.library.custom_op(
    'apnet_pyg::edge_index_arrays',
    _unaliased(_edge_index_arrays),
    mutates_args=(),
    schema='(Tensor edge_index, SymInt num_rows, SymInt num_cols, int dim) '
    '-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)',
)
_edge_index_arrays_op.register_fake(_edge_index_arrays_fake)


def edge_index_arrays(
    edge_index: Tensor,
    size: Tuple[int, int],
    dim: int = 0,
    *,
    check: bool = True,
) -> Tuple[CSRArrays, Tensor]:
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
        check_entries(edge_index, size, dim)
    args = (edge_index, size[0], size[1], dim)
    if is_compiling() or edge_index.device.type == 'meta':
        tensors = _edge_index_arrays_op(*args)
    else:
        tensors = _edge_index_arrays(*args)
    return CSRArrays(*tensors[:7]), tensors[7]


def as_csr_arrays(edge_index: Adjacency) -> CSRArrays:
    r"""The arrays of :obj:`edge_index`: a :class:`CSRArrays` as it is,
    an :class:`EdgeIndex` sorted by row read through :func:`csr_arrays`
    (its entries are then its edges, in its order)."""
    if isinstance(edge_index, CSRArrays):
        return edge_index
    if (
        not isinstance(edge_index, EdgeIndex)
        or not edge_index.is_sorted_by_row
    ):
        raise ValueError(
            f"'edge_index' must be an EdgeIndex sorted by row "
            f'(values follow its order) or CSRArrays from '
            f'csr_arrays() (got {describe(edge_index)}): pass '
            f"EdgeIndex(..., sort_order='row')"
        )
    if None in edge_index.sparse_size():
        raise ValueError(
            "'edge_index' (an EdgeIndex) has no sparse size: "
            'pass EdgeIndex(..., sparse_size=(M, N))'
        )
    return csr_arrays(edge_index)[0]


# Checks of the arguments (metadata only: no host synchronisation)


def check_entries(edge_index: Tensor, size: Tuple[int, int], dim: int) -> None:
    if not isinstance(size, (tuple, list)) or len(size) != 2:
        raise ValueError(
            f"'size' must be a pair (num_rows, num_cols) (got {size!r})"
        )
    check_int(size[0], 'size[0]', minimum=0)
    check_int(size[1], 'size[1]', minimum=0)
    if dim not in (0, 1):
        raise ValueError(
            f"'dim' must be 0 or 1, the row of 'edge_index' "
            f'that indexes the matrix rows (got {dim!r})'
        )
    if (
        not isinstance(edge_index, Tensor)
        or edge_index.dim() != 2
        or edge_index.size(0) != 2
        or edge_index.is_floating_point()
        or edge_index.is_complex()
        or edge_index.dtype == torch.bool
    ):
        raise ValueError(
            f"'edge_index' must be a [2, nnz] tensor of "
            f'integer indices (got {describe(edge_index)})'
        )
    if edge_index.size(1) > 0:
        # An asynchronous assertion: no host synchronisation.
        low, high = edge_index.aminmax(dim=1)
        in_range = (low >= 0).all() & (high[0] < size[0]) & (high[1] < size[1])
        torch._assert_async(
            in_range,
            f"'edge_index' holds indices outside the size {tuple(size)}",
        )


def check_operand(
    tensor: Tensor,
    name: str,
    pattern: CSRArrays,
    rows: int,
    side: str,
    dim: int = 2,
) -> None:
    r"""Checks that :obj:`tensor` (:obj:`dim`-D, floating point) has
    :obj:`rows` rows and lives on the pattern's device (metadata only;
    the kernels would otherwise read out of bounds)."""
    check_features(tensor, name, dim=dim)
    if tensor.size(0) != rows:
        raise ValueError(
            f"'{name}' must have {rows} rows, the pattern's "
            f'{side} (got shape {tuple(tensor.shape)})'
        )
    check_same_device(tensor, name, pattern.rowptr, 'pattern')


def check_entry_values_and_x(
    pattern: CSRArrays,
    values: Tensor,
    name: str,
    x: Tensor,
    same_dtype: bool = True,
) -> None:
    r"""The operands of a sparse-dense product: one value per entry of
    :obj:`pattern` and a row of :obj:`x` per column (of one dtype if
    :obj:`same_dtype`)."""
    check_operand(
        values, name, pattern, pattern.nnz, 'number of entries', dim=1
    )
    check_operand(x, 'x', pattern, pattern.size[1], 'number of columns')
    if same_dtype:
        check_same_dtype(values, name, x, 'x')
