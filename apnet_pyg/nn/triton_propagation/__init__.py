r"""APNet's attention propagation as fused Triton kernels.

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
:data:`~apnet_pyg.nn.functional.NORM_EPS`, plus an optional
:math:`\log w_{ii}`; it aggregates :math:`\mathbf{x}_i`), exactly what
:class:`~apnet_pyg.nn.APNetConv`'s fused path computes with
:func:`~apnet_pyg.nn.functional.edge_cosine` and
:func:`~apnet_pyg.nn.functional.softmax_spmm`.

The backward pass, with :math:`g_{ij} = \langle \partial L / \partial
\mathbf{o}_i, \mathbf{x}_j \rangle` and :math:`D_i = \sum_j \alpha_{ij}
g_{ij} = \langle \partial L / \partial \mathbf{o}_i, \mathbf{o}_i
\rangle`:

.. math::
    \frac{\partial L}{\partial z_{ij}} = \alpha_{ij} (g_{ij} - D_i),
    \quad
    \frac{\partial L}{\partial \mathbf{x}_j} = \sum_i \alpha_{ij}
    \frac{\partial L}{\partial \mathbf{o}_i},
    \quad
    \frac{\partial L}{\partial \mathbf{h}^{dst}_i} = \frac{\gamma}
    {|\mathbf{h}^{dst}_i|} \sum_j \frac{\partial L}{\partial z_{ij}}
    (\mathbf{u}_j - \cos_{ij} \mathbf{u}_i),

(:math:`\mathbf{u} = \mathbf{h} / |\mathbf{h}|`; the source side
likewise, summed over :math:`i`; :math:`\partial L / \partial \gamma =
\sum \partial L / \partial z_{ij} \cos_{ij}`).

Why the kernels are shaped so: the propagation moves whole feature rows
and does little arithmetic on them, so its cost is the rows it gathers.

* The **forward** kernel runs one program per destination row and an
  online softmax over its entries (FlashAttention's running maximum and
  sum): it gathers :math:`\mathbf{h}^{src}_j` and :math:`\mathbf{x}_j` once
  and stores the output and one log-sum-exp a row, never a per-entry
  value.
* The **backward** pass recomputes :math:`\alpha_{ij}` from
  :math:`\mathbf{h}` and the log-sum-exp. :math:`D_i` comes from the
  output (no gather); then a **column** pass over the transpose's CSR (one
  program per source) gathers :math:`\mathbf{h}^{dst}_i` and
  :math:`\partial L / \partial \mathbf{o}_i` and gives every per-source
  gradient and :math:`\partial L / \partial z_{ij}` (stored, one float an
  entry), and a **row** pass gathers :math:`\mathbf{h}^{src}_j` alone for
  :math:`\partial L / \partial \mathbf{h}^{dst}`. On a symmetric pattern
  with :math:`\mathbf{h}^{src} = \mathbf{h}^{dst}` (an undirected graph)
  and :math:`F \leq H`, one **symmetric** pass does both: an entry and its
  mirror share one cosine and one gather.
* Every program owns the rows it writes: no atomics, deterministic.

Loads are converted to float32 (float64 for float64 inputs), so float16
and bfloat16 inputs accumulate in float32. Each program holds a whole
feature row in one tile (up to :data:`MAX_FEATURES` features); the entries
per block and the warps are autotuned on large inputs, keyed on the
widths and the mean degree (:func:`tuned_configs`).

The kernels run on CUDA tensors. On CPU tensors they run under Triton's
interpreter when :obj:`TRITON_INTERPRET=1` was set before Triton was
imported (slow: for tests), and raise otherwise.
:func:`triton_attention_propagate` is one
:func:`torch.library.custom_op` for the forward pass and one for the
backward pass, so :func:`torch.compile` (CUDA graphs included) sees each
as one opaque operator. A second derivative differentiates the composed
sparse kernels of :mod:`apnet_pyg.nn.functional` instead.
"""

from apnet_pyg.nn.triton_propagation.launch import (
    MAX_FEATURES,
    dropout_scales,
    interpreter_enabled,
    interpreting,
    is_triton_available,
    tuned_configs,
)
from apnet_pyg.nn.triton_propagation.propagate import (
    composed_attention_propagate,
    draw_dropout_seed,
    is_symmetric_pattern,
    propagation_floor_bytes,
    propagation_kernel_bytes,
    triton_attention_propagate,
)

__all__ = [
    'MAX_FEATURES',
    'is_triton_available',
    'interpreting',
    'interpreter_enabled',
    'triton_attention_propagate',
    'composed_attention_propagate',
    'draw_dropout_seed',
    'dropout_scales',
    'is_symmetric_pattern',
    'propagation_floor_bytes',
    'propagation_kernel_bytes',
    'tuned_configs',
]
