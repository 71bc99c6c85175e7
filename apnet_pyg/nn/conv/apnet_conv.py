import math
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric import EdgeIndex, is_compiling
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.typing import Adj, OptTensor, PairTensor, Size
from torch_geometric.utils import softmax

from apnet_pyg.checks import (
    assert_edge_index_in_range,
    check_bool,
    value_checks_enabled,
)
from apnet_pyg.nn.conv._apnet_conv_io import APNetConvIOMixin

# The layer shared with DenseAPNetConv; imported here so that its names
# stay importable from apnet_pyg.nn.conv.apnet_conv.
from apnet_pyg.nn.conv._apnet_layer import APNetLayerMixin
from apnet_pyg.nn.functional import (
    CSRArrays,
    compute_dtype,
    csr_arrays,
    edge_cosine,
    edge_index_arrays,
    softmax_spmm,
)
from apnet_pyg.nn.triton_propagation import (
    MAX_FEATURES,
    is_triton_available,
    triton_attention_propagate,
)

#: The fused path's kernels (:obj:`APNetConv(kernel=...)`).
KERNELS = ('auto', 'sparse', 'triton')

# What the fused path honours of MessagePassing's arguments.
_FUSED_KWARGS = {
    'aggr': ('add', 'sum'),
    'node_dim': (0, -2),
    'decomposed_layers': (1,),
    'flow': ('source_to_target', 'target_to_source'),
}


@torch.compiler.assume_constant_result
def _triton_installed() -> bool:
    # A constant to TorchDynamo, which skips importlib's spec lookup: a
    # graph break in every compiled forward on CUDA otherwise.
    return is_triton_available()


class APNetConv(APNetConvIOMixin, APNetLayerMixin, MessagePassing):
    r"""The attribute propagation layer from the `"Attribute Propagation
    Network for Graph Zero-shot Learning" <https://arxiv.org/abs/2009.11816>`_
    paper (APNet).

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha_{i,j} \mathbf{x}_j,

    where the attention coefficients :math:`\alpha_{i,j}` are computed as

    .. math::
        \alpha_{i,j} = \frac{w_{i,j} \exp\left( \gamma \cdot
        \cos\left(f(\mathbf{x}_i), f(\mathbf{x}_j)\right) \right)}
        {\sum_{k \in \mathcal{N}(i) \cup \{ i \}} w_{i,k} \exp\left(
        \gamma \cdot \cos\left(f(\mathbf{x}_i), f(\mathbf{x}_k)\right)
        \right)},

    with :math:`f(\mathbf{x}) = \mathbf{W} \mathbf{x}` a bias-free
    projection, :math:`\gamma` the temperature and :math:`w_{i,j} > 0` an
    optional edge weight (:math:`1` if not given, and for added
    self-loops), repeated for :obj:`num_steps` steps. The defaults are
    tuned on Cora's validation split; the paper uses
    :obj:`proj_channels=256, temperature=10.0, num_steps=1`. With
    :obj:`proj_channels=None`, :obj:`num_steps=1` and no weights it equals
    :class:`~torch_geometric.nn.conv.AGNNConv` (:math:`\beta = \gamma`).
    Caching, precision, kernels, bipartite and heterogeneous graphs and
    the explainer: see :obj:`docs/operator.md`.

    Args:
        in_channels (int or tuple): Size of each input sample, or :obj:`-1`
            to derive it from the first input. A tuple gives the source
            and target sizes of a bipartite graph, one projection each.
        proj_channels (int, optional): Output size of :math:`f`;
            :obj:`None` for the identity. (default: :obj:`16`)
        temperature (float, optional): :math:`\gamma \geq 0`.
            (default: :obj:`0.5`)
        learn_temperature (bool, optional): If set to :obj:`True`,
            :math:`\gamma` is trained. (default: :obj:`False`)
        add_self_loops (bool, optional): If set to :obj:`False`, will not add
            self-loops (a node that has one keeps its weight).
            (default: :obj:`True`)
        num_steps (int, optional): Number of propagation steps.
            (default: :obj:`2`)
        proj_init (str, optional): :obj:`"glorot"` or :obj:`"identity"`.
            (default: :obj:`"glorot"`)
        fused (bool, optional): Fused sparse kernels, or PyG's message
            passing (:obj:`False`). (default: :obj:`True`)
        kernel (str, optional): The fused kernels: :obj:`"sparse"`,
            :obj:`"triton"` (CUDA) or :obj:`"auto"`. (default: :obj:`"auto"`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, F)` or
          :math:`((|\mathcal{V_s}|, F_{s}), (|\mathcal{V_t}|, F_{t}))`
          if bipartite, edge indices :math:`(2, |\mathcal{E}|)` (or an
          :class:`~torch_geometric.EdgeIndex`, or a sparse :obj:`adj_t`),
          edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F)` or
          :math:`(|\mathcal{V}_t|, F_{s})` if bipartite
    """

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        proj_channels: Optional[int] = 16,
        temperature: float = 0.5,
        learn_temperature: bool = False,
        add_self_loops: bool = True,
        num_steps: int = 2,
        proj_init: str = 'glorot',
        fused: bool = True,
        kernel: str = 'auto',
        **kwargs,
    ):
        kwargs.setdefault('aggr', 'add')
        if fused:
            for key, value in kwargs.items():
                if value not in _FUSED_KWARGS.get(key, ()):
                    raise ValueError(
                        f'APNetConv(fused=True) cannot honour the '
                        f'MessagePassing argument {key}={value!r}; pass '
                        f"fused=False to run PyG's message passing, which "
                        f'does'
                    )
        super().__init__(**kwargs)
        self._init_apnet_layer(
            in_channels,
            proj_channels,
            temperature,
            learn_temperature,
            num_steps,
            proj_init,
        )
        self.add_self_loops = check_bool(add_self_loops, 'add_self_loops')
        self.fused = check_bool(fused, 'fused')
        if kernel not in KERNELS:
            raise ValueError(
                f"'kernel' must be one of {', '.join(KERNELS)} "
                f'(got {kernel!r})'
            )
        if kernel == 'triton' and not fused:
            raise ValueError(
                "kernel='triton' is a fused kernel, which "
                'fused=False does not run: drop one of the two'
            )
        self.kernel = kernel
        self._cached_structure = None
        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        self._reset_apnet_layer()

    def forward(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_weight: OptTensor = None,
        size: Size = None,
        return_attention_weights: Optional[bool] = None,
    ) -> Union[
        Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]], Tuple[Tensor, Tensor]
    ]:
        r"""Runs the forward pass of the module.

        Args:
            x (torch.Tensor or (torch.Tensor, torch.Tensor)): The input node
                features, or the source and target node features of a
                bipartite graph.
            edge_index (torch.Tensor or SparseTensor): The edge indices
                (a :class:`torch.Tensor` or
                :class:`~torch_geometric.EdgeIndex`, whose cache the fused
                path reads and fills), or a sparse adjacency :obj:`adj_t`
                (row = target node; a :obj:`torch.sparse` tensor, or
                :obj:`torch_sparse`'s :obj:`SparseTensor` when that is
                installed).
            edge_weight (torch.Tensor, optional): Strictly positive prior
                weights :math:`w_{i,j}`, one per edge, of any floating
                dtype (used in the dtype of :obj:`x`, float32 for float16
                or bfloat16 :obj:`x`). (default: :obj:`None`)
            size ((int, int), optional): The number of source and target
                nodes; must match :obj:`x` when given. (default: :obj:`None`)
            return_attention_weights (bool, optional): If set to
                :obj:`True`, will additionally return the tuple
                :obj:`(edge_index, attention_weights)` (the edges including
                the added self-loops), or, for a sparse adjacency,
                :obj:`(adj, attention_weights)`: :obj:`adj` holds the
                attention as its values, in the input's layout (a COO
                tensor for a :obj:`SparseTensor`), and
                :obj:`attention_weights` is :obj:`adj.values()`, as
                :class:`~torch_geometric.nn.conv.GATConv` does.
                (default: :obj:`None`)
        """
        attention = bool(return_attention_weights)
        x_src, x_dst, bipartite, size = self._node_inputs(x, size, attention)
        edge_index, graph, edge_weight, sparse_layout = self._edge_inputs(
            edge_index, edge_weight, x_src, size, bipartite
        )
        # PyG's explainer masks messages: only message passing has them.
        fused = self.fused and not self.explain
        # The attention's dtype: x's, float32 for half-precision x (and
        # also for a half-precision projection of float32 x under
        # autocast).
        dtype = compute_dtype(x_src.dtype, x_dst.dtype)
        log_weight = None
        if edge_weight is not None:
            # In the attention's dtype, as documented and as
            # DenseAPNetConv does.
            log_weight = edge_weight.to(dtype).log()

        loop_kept, arrays, perm = self._graph_structure(
            edge_index, graph, size, bipartite, fused
        )
        if fused:
            if log_weight is not None and perm is not None:
                log_weight = log_weight.index_select(0, perm)
            out, alpha, alpha_loop = self._fused_propagate(
                x_src,
                x_dst,
                arrays,
                perm,
                log_weight,
                loop_kept,
                bipartite,
                attention,
                dtype,
            )
        else:
            out, alpha, alpha_loop = self._message_passing(
                x_src,
                x_dst,
                edge_index,
                log_weight,
                loop_kept,
                size,
                bipartite,
                dtype,
            )

        if not attention:
            return out
        return out, self._attention_output(
            edge_index,
            alpha,
            alpha_loop,
            loop_kept,
            size,
            sparse_layout,
            out.dtype,
        )

    # Propagation #############################################################

    def _graph_structure(
        self,
        edge_index: Tensor,
        graph: Optional[EdgeIndex],
        size: Tuple[int, int],
        bipartite: bool,
        fused: bool,
    ) -> Tuple[OptTensor, Optional[CSRArrays], OptTensor]:
        r"""What depends on the graph alone: its range check, which nodes
        get a self-loop (:obj:`None` for none) and, for the fused path, the
        CSR arrays (rows the targets) with the edge of each entry
        (:obj:`None`: entry :obj:`k` is edge :obj:`k`). In eager mode, kept
        while the layer sees the same, unmodified :obj:`edge_index` tensor
        (or :class:`EdgeIndex` data), as in full-batch training: the sorts
        are most of a small graph's cost. Outside debug mode only (which
        checks every call)."""
        key = (size, bipartite, self.flow, fused, self.add_self_loops)
        # Inference tensors have no version counter, and what is built
        # under inference mode cannot be saved for a later backward pass:
        # neither is cached.
        cacheable = (
            not is_compiling()
            and not edge_index.is_inference()
            and not torch.is_inference_mode_enabled()
        )
        cached = (
            self._cached_structure
            if cacheable and not value_checks_enabled()
            else None
        )
        if (
            cached is not None
            and cached[0] is edge_index
            and cached[1] == edge_index._version
            and cached[2] == key
        ):
            return cached[3]

        source_row = 0 if self.flow == 'source_to_target' else 1
        row_sizes = size if source_row == 0 else (size[1], size[0])
        assert_edge_index_in_range(edge_index, row_sizes)
        source, target = edge_index[source_row], edge_index[1 - source_row]
        # Self-loops for the nodes that have none; the others keep theirs.
        loop_kept = None
        if self.add_self_loops and not bipartite:
            loop_kept = _lacks_self_loop(source, target, size[0])
        arrays = perm = None
        if fused:
            arrays, perm = self._target_arrays(
                edge_index, graph, row_sizes, 1 - source_row
            )
        structure = (loop_kept, arrays, perm)
        if cacheable:
            # A reference to edge_index itself: its memory cannot be reused
            # by another tensor that would pass for it.
            self._cached_structure = (
                edge_index,
                edge_index._version,
                key,
                structure,
            )
        return structure

    @staticmethod
    def _target_arrays(
        edge_index: Tensor,
        graph: Optional[EdgeIndex],
        size: Tuple[int, int],
        dim: int,
    ) -> Tuple[CSRArrays, OptTensor]:
        r"""The CSR arrays whose rows are the targets
        (:obj:`edge_index[dim]`; :obj:`size` is :obj:`edge_index`'s sparse
        size). A caller's :class:`EdgeIndex` that is sorted and has this
        sparse size gives them from its cache, which it keeps (filled
        here, shared with other layers and calls); otherwise an
        :class:`EdgeIndex` is built from the tensor (in range: checked)."""
        if (
            graph is not None
            and not is_compiling()
            and graph.is_sorted
            and graph.sparse_size() == tuple(size)
        ):
            arrays, perm = csr_arrays(graph, dim)
            # (index_copy, for the attention, takes int64 indices only.)
            return arrays, None if perm is None else perm.long()
        return edge_index_arrays(edge_index, size, dim, check=False)

    def _projections(
        self,
        x_src: Tensor,
        x_dst: Tensor,
        bipartite: bool,
        step: int,
        dtype: torch.dtype,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        r""":math:`f(\mathbf{x}_{dst})` and :math:`f(\mathbf{x}_{src})`
        (:obj:`None` when both sides are the same nodes), in the
        attention's :obj:`dtype` (float32 for a half-precision projection:
        the temperature scales the cosines' rounding errors)."""
        if self.lin is None:
            # After the first step the targets hold aggregated source
            # features: the source side's projection applies.
            lin_dst = self.lin_dst if step == 0 else self.lin_src
            h_dst, h_src = lin_dst(x_dst), self.lin_src(x_src)
        elif not bipartite:
            h_dst, h_src = self.lin(x_dst), None
        else:
            h_dst, h_src = self.lin(x_dst), self.lin(x_src)
        # (No copy where the dtype is already the attention's.)
        return h_dst.to(dtype), None if h_src is None else h_src.to(dtype)

    @staticmethod
    def _next_step(
        out: Tensor, x_src: Tensor, bipartite: bool
    ) -> Tuple[Tensor, Tensor]:
        r"""The features of the next step's sources and targets: the
        targets take the output; the sources of a bipartite graph stay."""
        return (x_src if bipartite else out), out

    def _fused_propagate(
        self,
        x_src: Tensor,
        x_dst: Tensor,
        pattern: CSRArrays,
        perm: OptTensor,
        log_weight: OptTensor,
        loop_kept: OptTensor,
        bipartite: bool,
        attention: bool,
        dtype: torch.dtype,
    ) -> Tuple[Tensor, OptTensor, OptTensor]:
        alphas, loop_alphas = [], []
        if self._uses_triton(x_src, attention):
            for step in range(self.num_steps):
                # The kernel accumulates in float32 whatever h's dtype.
                h_dst, h_src = self._projections(
                    x_src, x_dst, bipartite, step, x_src.dtype
                )
                out = triton_attention_propagate(
                    pattern,
                    x_src,
                    h_dst,
                    h_src,
                    self.temperature,
                    log_weight,
                    loop_kept,
                )
                x_src, x_dst = self._next_step(out, x_src, bipartite)
            return out, None, None
        for step in range(self.num_steps):
            h_dst, h_src = self._projections(
                x_src, x_dst, bipartite, step, dtype
            )
            cos, self_cos = edge_cosine(pattern, h_dst, h_src)
            logits = self.temperature * cos
            if log_weight is not None:
                logits = logits + log_weight
            loop_logits = None
            if loop_kept is not None:
                # The self-loops join the softmax as a diagonal term (weight
                # 1, cosine 1), rather than as edges of the pattern; a node
                # with a self-loop of its own gets none (-inf).
                loop_logits = torch.where(
                    loop_kept, self.temperature * self_cos, -math.inf
                )
            # Logits in the attention's dtype, x_src in its own: the
            # output comes back in x_src's.
            out, alpha, alpha_loop = softmax_spmm(
                pattern, logits, x_src, loop_logits
            )
            x_src, x_dst = self._next_step(out, x_src, bipartite)
            alphas.append(alpha)
            loop_alphas.append(alpha_loop)

        if not attention:
            return out, None, None
        # Back from (target, source)-sorted order to the order of edge_index.
        alpha = torch.stack(alphas, dim=-1)
        if perm is not None:
            alpha = alpha.new_empty(alpha.shape).index_copy(0, perm, alpha)
        alpha_loop = None
        if loop_kept is not None:
            alpha_loop = torch.stack(loop_alphas, dim=-1)
        return out, *self._squeeze_steps(alpha, alpha_loop)

    def _uses_triton(self, x: Tensor, attention: bool) -> bool:
        if self.kernel == 'triton':
            if attention:
                raise ValueError(
                    "APNetConv(kernel='triton') does not return "
                    'the attention (the kernel never stores '
                    "it): pass kernel='sparse' or 'auto' for "
                    'return_attention_weights'
                )
            return True
        return (
            self.kernel == 'auto'
            and not attention
            and x.device.type == 'cuda'
            and _triton_installed()
            and max(x.size(-1), self._attention_channels(x)) <= MAX_FEATURES
        )

    def _attention_channels(self, x: Tensor) -> int:
        return x.size(-1) if self.proj_channels is None else self.proj_channels

    def _message_passing(
        self,
        x_src: Tensor,
        x_dst: Tensor,
        edge_index: Tensor,
        log_weight: OptTensor,
        loop_kept: OptTensor,
        size: Tuple[int, int],
        bipartite: bool,
        dtype: torch.dtype,
    ) -> Tuple[Tensor, Tensor, OptTensor]:
        num_edges = edge_index.size(1)
        if loop_kept is not None:
            # Every node gets a self-loop edge (static shapes, no graph
            # break), masked out (-inf) where the node has its own.
            loops = torch.arange(
                size[0], device=edge_index.device, dtype=edge_index.dtype
            )
            edge_index = torch.cat([edge_index, loops.expand(2, -1)], dim=1)
            loop_log_weight = torch.where(loop_kept, 0.0, -math.inf).to(dtype)
            if log_weight is None:
                log_weight = loop_log_weight.new_zeros(num_edges)
            log_weight = torch.cat([log_weight, loop_log_weight])

        alphas = []
        out_dtype = x_src.dtype
        for step in range(self.num_steps):
            h_dst, h_src = self._projections(
                x_src, x_dst, bipartite, step, dtype
            )
            h_dst = F.normalize(h_dst, p=2.0, dim=-1)
            h_src = (
                h_dst if h_src is None else F.normalize(h_src, p=2.0, dim=-1)
            )
            # edge_updater_type: (h: PairTensor, log_weight: OptTensor)
            alpha = self.edge_updater(
                edge_index, h=(h_src, h_dst), log_weight=log_weight, size=size
            )
            # propagate_type: (x: PairTensor, alpha: Tensor)
            out = self.propagate(
                edge_index, x=(x_src, x_dst), alpha=alpha, size=size
            )
            # Messages in the attention's dtype (float32 sums for half
            # precision x), the output in x's, as on the fused path.
            out = out.to(out_dtype)
            x_src, x_dst = self._next_step(out, x_src, bipartite)
            alphas.append(alpha)
        alpha = torch.stack(alphas, dim=-1)
        alpha_loop = None
        if loop_kept is not None:
            alpha, alpha_loop = alpha[:num_edges], alpha[num_edges:]
        return out, *self._squeeze_steps(alpha, alpha_loop)

    def _squeeze_steps(
        self, alpha: Tensor, alpha_loop: OptTensor
    ) -> Tuple[Tensor, OptTensor]:
        if self.num_steps > 1:  # One column per step.
            return alpha, alpha_loop
        return alpha.squeeze(-1), (
            None if alpha_loop is None else alpha_loop.squeeze(-1)
        )

    def edge_update(
        self,
        h_i: Tensor,
        h_j: Tensor,
        log_weight: OptTensor,
        index: Tensor,
        ptr: OptTensor,
        dim_size: Optional[int],
    ) -> Tensor:
        logits = self.temperature * (h_i * h_j).sum(dim=-1)
        if log_weight is not None:
            logits = logits + log_weight
        return softmax(logits, index, ptr, dim_size)

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        return alpha.view(-1, 1) * x_j


def _lacks_self_loop(source: Tensor, target: Tensor, num_nodes: int) -> Tensor:
    r"""Which nodes have no self-loop in the graph (:obj:`[num_nodes]`,
    boolean), with static shapes: no graph break, no host
    synchronisation."""
    is_loop = (source == target).to(torch.float)
    num_loops = is_loop.new_zeros(num_nodes).index_add_(0, target, is_loop)
    return num_loops == 0
