r"""APNet's attention propagation as one fused Triton kernel per pass.

For a destination node :math:`i` with incoming entries :math:`j` (the row
:math:`i` of a row-sorted :class:`~torch_geometric.EdgeIndex`, read as
:class:`~apnet_pyg.nn.functional.CSRArrays`),

.. math::
    z_{ij} = \gamma \cos(\mathbf{h}^{dst}_i, \mathbf{h}^{src}_j)
    + \log w_{ij}, \qquad
    \alpha_{ij} = \frac{\exp(z_{ij})}{\sum_k \exp(z_{ik})}, \qquad
    \mathbf{o}_i = \sum_j \alpha_{ij} \mathbf{x}_j,

with an optional self-loop as a diagonal term (logit :math:`\gamma` times
the self-cosine, :math:`1`, or :math:`0` for a row of norm at most
:data:`~apnet_pyg.nn.functional.NORM_EPS`; it aggregates
:math:`\mathbf{x}_i`), exactly what :class:`~apnet_pyg.nn.APNetConv`'s
fused path computes with :func:`~apnet_pyg.nn.functional.edge_cosine` and
:func:`~apnet_pyg.nn.functional.softmax_spmm`.

* The **forward** kernel runs one program per destination row: it reads
  the row's entries from the CSR arrays in blocks of :obj:`BLOCK_E`,
  gathers :math:`\mathbf{h}^{src}_j` and :math:`\mathbf{x}_j`, and keeps a
  running maximum, sum and weighted sum (the online softmax of
  FlashAttention). It stores the output and one log-sum-exp per row,
  never a per-entry value nor an :math:`|\mathcal{E}| \times F` tensor.
* The **backward** pass recomputes the logits from :math:`\mathbf{h}`
  and the stored log-sum-exp (FlashAttention's backward). With
  :math:`g_{ij} = \langle \partial L / \partial \mathbf{o}_i,
  \mathbf{x}_j \rangle` and :math:`D_i = \sum_j \alpha_{ij} g_{ij}`,
  :math:`\partial L / \partial z_{ij} = \alpha_{ij} (g_{ij} - D_i)`. A
  row kernel (CSR order, one program per destination) gives :math:`D_i`
  and the gradients of :math:`\mathbf{h}^{dst}` and :math:`\gamma` (one
  partial sum per row, summed afterwards: deterministic, no atomics); a
  column kernel (the transpose's CSR order, one program per source,
  reaching per-entry values through :obj:`perm_t`) gives those of
  :math:`\mathbf{x}`, :math:`\mathbf{h}^{src}` and the log weights, again
  without atomics. :math:`D_i` is summed from the recomputed
  :math:`\alpha_{ij} g_{ij}` in the accumulation dtype, not read as
  :math:`\langle \partial L / \partial \mathbf{o}_i, \mathbf{o}_i
  \rangle` from an output rounded to half precision: :math:`g_{ij} - D_i`
  cancels, and the rounding cost the gradient of :math:`\gamma` ~8% in
  bfloat16.

Loads are converted to float32 (float64 for float64 inputs), so float16
and bfloat16 inputs accumulate in float32; outputs and gradients come back
in the dtypes of their inputs. Each kernel pass holds a whole feature row
in one tile (up to :data:`MAX_FEATURES` features); the number of entries
per block and of warps follow the mean degree and the width.

The kernels run on CUDA tensors. On CPU tensors they run under Triton's
interpreter when the environment variable :obj:`TRITON_INTERPRET=1` is set
(slow: for tests), and raise otherwise. :func:`triton_attention_propagate`
is one :func:`torch.library.custom_op` for the forward pass and one for
the backward pass, so :func:`torch.compile` sees each as one opaque
operator. A second derivative differentiates the composed sparse kernels
of :mod:`apnet_pyg.nn.functional` instead.
"""

# _kernels and _Config are private, re-exported for the tests.
from apnet_pyg.nn.triton_propagation.kernels import (  # noqa: F401
    _kernels,
    interpreter_enabled,
    interpreting,
    is_triton_available,
)
from apnet_pyg.nn.triton_propagation.launch import (  # noqa: F401
    MAX_FEATURES,
    _Config,
)
from apnet_pyg.nn.triton_propagation.propagate import (
    composed_attention_propagate,
    propagation_floor_bytes,
    triton_attention_propagate,
)

__all__ = [
    'MAX_FEATURES',
    'is_triton_available',
    'interpreting',
    'interpreter_enabled',
    'triton_attention_propagate',
    'composed_attention_propagate',
    'propagation_floor_bytes',
]
