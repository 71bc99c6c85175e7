r"""Sparse kernels behind :class:`~apnet_pyg.nn.APNetConv`.

Attention propagation needs two sparse products over the same pattern
:math:`\mathcal{E}` (entry :math:`(i, j)` for an edge :math:`j \to i`):

* SDDMM (sampled dense-dense product), :math:`v_{ij} = \langle
  \mathbf{a}_i, \mathbf{b}_j \rangle` for :math:`(i, j) \in \mathcal{E}`,
  which gives the cosine of every edge from normalised projections;
* SpMM (sparse-dense product), :math:`\mathbf{o}_i = \sum_j v_{ij}
  \mathbf{x}_j`, which aggregates the neighbours.

Both run on a CSR tensor, which avoids materialising an
:math:`|\mathcal{E}| \times F` message tensor. Their backward passes are
written here: PyTorch's own backward of a sparse product with respect to
the sparse values builds a dense :math:`N \times N` matrix. Each backward is
again an SDDMM or an SpMM (on the transposed pattern), implemented with the
same autograd functions, so second derivatives work too. Under
:func:`torch.compile` they run eagerly (TorchDynamo cannot trace sparse CSR
tensors); the dense code around them is compiled.

:func:`edge_cosine` fuses the normalisation into the SDDMM: its backward is
one SpMM (on a symmetric pattern) plus one elementwise pass, where autograd
through :func:`torch.nn.functional.normalize` would allocate and traverse
several :math:`N \times F` temporaries. On CPU, where allocating and
first touching a large tensor costs as much as reading it, this matters.
"""
import warnings
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def _index_dtype(num_rows: int, num_cols: int, nnz: int) -> torch.dtype:
    # 32-bit CSR indices run ~20% faster in MKL and cuSPARSE; fall back to
    # 64-bit only when they do not fit.
    limit = torch.iinfo(torch.int32).max
    return torch.int32 if max(num_rows, num_cols, nnz) < limit else torch.long


def _csr_pointer(row: Tensor, num_rows: int) -> Tensor:
    counts = torch.bincount(row, minlength=num_rows)
    rowptr = row.new_zeros(num_rows + 1)
    torch.cumsum(counts, dim=0, out=rowptr[1:])
    return rowptr


class SparsePattern:
    r"""The sparsity pattern of an :math:`M \times N` matrix in CSR form,
    together with the pattern of its transpose.

    Build it with :meth:`from_coo`, which sorts the entries by row, then by
    column. Stored entries may repeat (a repeated edge contributes one term
    per copy, as in message passing).

    Attributes:
        rowptr (torch.Tensor): CSR row pointer, :obj:`[M + 1]`, int64.
        row (torch.Tensor): row of each entry, :obj:`[nnz]`, int64.
        col (torch.Tensor): column of each entry, :obj:`[nnz]`, int64.
        size ((int, int)): :math:`(M, N)`.
        transpose_perm (torch.Tensor): entry :obj:`k` of the transpose holds
            the value of entry :obj:`transpose_perm[k]` of this pattern.
        is_symmetric (bool): whether the transpose has the same pattern
            (entry for entry), as for an undirected graph.
    """
    def __init__(self, rowptr: Tensor, row: Tensor, col: Tensor,
                 size: Tuple[int, int], transpose_perm: Tensor,
                 transpose: Optional['SparsePattern'] = None):
        self.rowptr = rowptr
        self.row = row
        self.col = col
        self.size = size
        self.transpose_perm = transpose_perm
        index_dtype = _index_dtype(size[0], size[1], row.numel())
        self._csr_rowptr = rowptr.to(index_dtype)
        self._csr_col = col.to(index_dtype)
        self._transpose = transpose
        self.is_symmetric = size[0] == size[1] and torch.equal(
            col[transpose_perm], row) and torch.equal(row[transpose_perm], col)

    @classmethod
    @torch.compiler.disable
    def from_coo(cls, row: Tensor, col: Tensor,
                 size: Tuple[int, int]) -> Tuple['SparsePattern', Tensor]:
        r"""Builds the pattern of the entries :obj:`(row[k], col[k])`.

        Returns:
            The pattern and :obj:`perm`, such that entry :obj:`k` of the
            pattern is input entry :obj:`perm[k]` (reorder per-entry values
            with :obj:`values[perm]`).
        """
        num_rows, num_cols = size
        perm = torch.argsort(row * num_cols + col, stable=True)
        row, col = row[perm], col[perm]
        transpose_perm = torch.argsort(col * num_rows + row, stable=True)
        return cls(_csr_pointer(row, num_rows), row, col, size,
                   transpose_perm), perm

    @property
    def nnz(self) -> int:
        return self.row.numel()

    def t(self) -> 'SparsePattern':
        r"""The pattern of the transposed matrix (computed once, cached)."""
        if self._transpose is None:
            perm = self.transpose_perm
            row_t, col_t = self.col[perm], self.row[perm]
            inverse = torch.empty_like(perm)
            inverse[perm] = torch.arange(perm.numel(), device=perm.device)
            self._transpose = SparsePattern(
                _csr_pointer(row_t, self.size[1]), row_t, col_t,
                (self.size[1], self.size[0]), inverse, transpose=self)
        return self._transpose

    def transpose_values(self, values: Tensor) -> Tensor:
        r"""The per-entry :obj:`values` reordered for the pattern
        :meth:`t`."""
        return values[self.transpose_perm]

    def to_sparse_csr(self, values: Tensor) -> Tensor:
        r"""The CSR tensor with this pattern and :obj:`values` (first
        dimension :obj:`nnz`)."""
        with warnings.catch_warnings():
            # "Sparse CSR tensor support is in beta state": we rely only on
            # the two products below, which are stable and tested here.
            warnings.simplefilter('ignore', UserWarning)
            return torch.sparse_csr_tensor(self._csr_rowptr, self._csr_col,
                                           values, self.size,
                                           check_invariants=False)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(size={self.size}, '
                f'nnz={self.nnz})')


def _csr_matmul(pattern: SparsePattern, values: Tensor, x: Tensor) -> Tensor:
    csr = pattern.to_sparse_csr(values)
    x = x.contiguous()  # A strided (e.g. expanded) operand costs a slow path.
    if x.device.type == 'cpu':
        # `csr @ x` zero-fills a buffer and copies it into the result;
        # addmm with beta=0 writes the result directly (and ignores the
        # uninitialised memory, NaNs included).
        out = x.new_empty(pattern.size[0], x.size(1))
        return torch.addmm(out, csr, x, beta=0.0, out=out)
    return csr @ x


def _sampled_dot(pattern: SparsePattern, a: Tensor, b: Tensor) -> Tensor:
    if pattern.nnz == 0:
        return a.new_zeros(0)
    zeros = a.new_zeros(pattern.nnz)
    # b.t() must stay a transposed view: a contiguous [F, N] copy runs the
    # kernel five times slower on CPU.
    out = torch.sparse.sampled_addmm(pattern.to_sparse_csr(zeros),
                                     a.contiguous(), b.contiguous().t(),
                                     beta=0.0)
    return out.values()


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: SparsePattern, values: Tensor,
                x: Tensor) -> Tensor:
        ctx.pattern = pattern
        ctx.save_for_backward(values, x)
        return _csr_matmul(pattern, values, x)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        values, x = ctx.saved_tensors
        pattern = ctx.pattern
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
        ctx.pattern = pattern
        ctx.save_for_backward(a, b)
        return _sampled_dot(pattern, a, b)

    @staticmethod
    def backward(ctx, grad_values: Tensor):
        a, b = ctx.saved_tensors
        pattern = ctx.pattern
        grad_a = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_a = spmm(pattern, grad_values, b)
        if ctx.needs_input_grad[2]:
            grad_b = spmm(pattern.t(), pattern.transpose_values(grad_values),
                          a)
        return None, grad_a, grad_b


@torch.compiler.disable
def spmm(pattern: SparsePattern, values: Tensor, x: Tensor) -> Tensor:
    r"""Sparse-dense product :math:`\mathbf{o}_i = \sum_{(i, j)}
    v_{ij} \mathbf{x}_j`, differentiable in :obj:`values` and :obj:`x`
    without a dense :math:`M \times N` intermediate.

    Args:
        pattern (SparsePattern): the pattern, of size :math:`(M, N)`.
        values (torch.Tensor): one value per entry, :obj:`[nnz]`.
        x (torch.Tensor): dense features, :obj:`[N, F]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[M, F]`
    """
    return _SpMM.apply(pattern, values, x)


@torch.compiler.disable
def sddmm(pattern: SparsePattern, a: Tensor, b: Tensor) -> Tensor:
    r"""Sampled dense-dense product :math:`v_{ij} = \langle \mathbf{a}_i,
    \mathbf{b}_j \rangle` for every entry :math:`(i, j)` of the pattern,
    differentiable in :obj:`a` and :obj:`b`.

    Args:
        pattern (SparsePattern): the pattern, of size :math:`(M, N)`.
        a (torch.Tensor): :obj:`[M, F]`.
        b (torch.Tensor): :obj:`[N, F]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[nnz]`, in pattern order
    """
    return _SDDMM.apply(pattern, a, b)


class _EdgeCosine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pattern: SparsePattern, x: Tensor, eps: float) -> Tensor:
        inv_norm = x.norm(p=2, dim=-1).clamp_min(eps).reciprocal()
        h = x * inv_norm.unsqueeze(-1)
        cos = _sampled_dot(pattern, h, h)
        ctx.pattern, ctx.eps = pattern, eps
        ctx.save_for_backward(x, h, inv_norm, cos)
        return cos

    @staticmethod
    def backward(ctx, grad_cos: Tensor):
        x, h, inv_norm, cos = ctx.saved_tensors
        pattern = ctx.pattern
        if torch.is_grad_enabled():
            # A second derivative is asked for: differentiate the composable
            # version (normalize + differentiable SDDMM) instead.
            h = F.normalize(x, p=2.0, dim=-1, eps=ctx.eps)
            grad_x, = torch.autograd.grad(sddmm(pattern, h, h), x, grad_cos,
                                          create_graph=True)
            return None, grad_x, None

        # With h = x / |x| and c_ij = <h_i, h_j>, for every node k:
        #   dL/dx_k = (sum_j g_kj h_j + sum_i g_ik h_i - s_k h_k) / |x_k|,
        #   s_k = sum_j g_kj c_kj + sum_i g_ik c_ik.
        grad_transposed = pattern.transpose_values(grad_cos)
        if pattern.is_symmetric:  # One SpMM instead of two.
            grad_x = _csr_matmul(pattern, grad_cos + grad_transposed, h)
        else:
            grad_x = _csr_matmul(pattern, grad_cos, h)
            grad_x += _csr_matmul(pattern.t(), grad_transposed, h)
        weighted = grad_cos * cos
        incident = inv_norm.new_zeros(pattern.size[0])
        incident.index_add_(0, pattern.row, weighted)
        incident.index_add_(0, pattern.col, weighted)
        grad_x.addcmul_(h, incident.unsqueeze(-1), value=-1.0)
        grad_x.mul_(inv_norm.unsqueeze(-1))
        return None, grad_x, None


@torch.compiler.disable
def edge_cosine(pattern: SparsePattern, x: Tensor,
                eps: float = 1e-12) -> Tensor:
    r"""Cosine similarity :math:`\cos(\mathbf{x}_i, \mathbf{x}_j)` for
    every entry :math:`(i, j)` of a square pattern, equal to
    :obj:`sddmm(pattern, h, h)` with :obj:`h = F.normalize(x, eps=eps)`, with
    a fused backward (see the module docstring). A zero row has cosine
    :math:`0` with every other row.

    Args:
        pattern (SparsePattern): a square pattern :math:`(N, N)`.
        x (torch.Tensor): :obj:`[N, F]`.
        eps (float, optional): lower bound of the norms.
            (default: :obj:`1e-12`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[nnz]`, in pattern order
    """
    return _EdgeCosine.apply(pattern, x, eps)
