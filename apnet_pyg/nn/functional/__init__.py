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

from apnet_pyg.nn.functional.csr import (
    Adjacency,
    CSRArrays,
    as_csr_arrays,
    csr_arrays,
    edge_index_arrays,
)
from apnet_pyg.nn.functional.kernels import (
    LOW_PRECISION_DTYPES,
    NORM_EPS,
    compute_dtype,
    custom_kernel,
)
from apnet_pyg.nn.functional.ops import (
    edge_cosine,
    sddmm,
    softmax_spmm,
    spmm,
)

__all__ = [
    'CSRArrays',
    'Adjacency',
    'csr_arrays',
    'as_csr_arrays',
    'edge_index_arrays',
    'custom_kernel',
    'LOW_PRECISION_DTYPES',
    'compute_dtype',
    'NORM_EPS',
    'spmm',
    'sddmm',
    'edge_cosine',
    'softmax_spmm',
]
