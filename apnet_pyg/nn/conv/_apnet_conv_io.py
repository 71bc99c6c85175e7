r"""What :class:`~apnet_pyg.nn.APNetConv` does around its propagation:
its inputs checked and brought to one form (the source and target
features, the edges as a plain :obj:`[2, E]` tensor with their weights,
from edge indices, an :class:`~torch_geometric.EdgeIndex` or a sparse
adjacency) and the attention it returns, in the layout of its input."""

from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric import EdgeIndex
from torch_geometric.typing import (
    Adj,
    OptTensor,
    PairTensor,
    Size,
    SparseTensor,
)
from torch_geometric.utils import (
    is_torch_sparse_tensor,
    remove_self_loops,
    to_edge_index,
    to_torch_coo_tensor,
    to_torch_csc_tensor,
    to_torch_csr_tensor,
)

from apnet_pyg.checks import (
    check_edge_index,
    check_edge_weight,
    check_features,
    check_finite,
    check_positive_weights,
    check_same_device,
    value_checks_enabled,
)


class APNetConvIOMixin:
    r"""The input checks and the attention output of
    :class:`~apnet_pyg.nn.APNetConv`, mixed into it (they read its
    :obj:`flow`, :obj:`add_self_loops`, :obj:`explain` and projections)."""

    # Inputs ##################################################################

    def _node_inputs(
        self, x: Union[Tensor, PairTensor], size: Size, attention: bool
    ) -> Tuple[Tensor, Tensor, bool, Tuple[int, int]]:
        r"""The source and target features, whether the graph is
        bipartite, and the checked :obj:`size`."""
        x_src, x_dst, bipartite = self._node_features(x)
        if bipartite and self.flow != 'source_to_target':
            # PyG pairs x[k] with edge_index[k] (under this flow, x[0] are
            # the targets); this layer's pair is (sources, targets), the
            # two conventions would disagree.
            raise ValueError(
                "A bipartite 'x' needs flow='source_to_target'"
                ' (x = (x_src, x_dst), edge_index[0] the '
                'sources): flip edge_index instead of the flow'
            )
        if (
            x_src.device.type == 'meta'
            and self.add_self_loops
            and not bipartite
            and attention
        ):
            raise ValueError(
                'return_attention_weights on meta tensors: the '
                'number of added self-loops depends on the '
                'data; pass add_self_loops=False or real '
                'tensors'
            )
        return x_src, x_dst, bipartite, self._check_size(x_src, x_dst, size)

    def _edge_inputs(
        self,
        edge_index: Adj,
        edge_weight: OptTensor,
        x_src: Tensor,
        size: Tuple[int, int],
        bipartite: bool,
    ) -> Tuple[Tensor, Optional[EdgeIndex], OptTensor, Any]:
        r"""The edges as a plain :obj:`[2, E]` tensor, the caller's
        :class:`EdgeIndex` (:obj:`None` for another input), the checked
        weights, and the layout of a sparse adjacency input (:obj:`None`
        for edge indices)."""
        sparse_layout = graph = None
        if isinstance(edge_index, SparseTensor) or is_torch_sparse_tensor(
            edge_index
        ):
            sparse_layout = torch.sparse_coo
            if is_torch_sparse_tensor(edge_index):
                sparse_layout = edge_index.layout
            edge_index, edge_weight = self._from_adjacency(
                edge_index, edge_weight, size
            )
        elif isinstance(edge_index, EdgeIndex):
            self._check_edge_index_size(edge_index, size)
            graph, edge_index = edge_index, edge_index.as_tensor()

        check_edge_index(edge_index)
        check_same_device(edge_index, 'edge_index', x_src)
        if edge_weight is not None:
            check_edge_weight(edge_weight, edge_index.size(1))
            check_same_device(edge_weight, 'edge_weight', x_src)
            if value_checks_enabled():
                check_positive_weights(edge_weight)
        if self.explain and self.add_self_loops and not bipartite:
            edge_index, edge_weight = self._drop_loops_to_explain(
                edge_index, edge_weight
            )
            graph = None  # Other edges than the caller's.
        return edge_index, graph, edge_weight, sparse_layout

    def _node_features(
        self, x: Union[Tensor, PairTensor]
    ) -> Tuple[Tensor, Tensor, bool]:
        pair = isinstance(self.in_channels, tuple)
        if isinstance(x, Tensor):
            if pair:
                raise ValueError(
                    f'APNetConv({self.in_channels}) has one '
                    f'projection per side of a bipartite graph '
                    f'and needs x=(x_src, x_dst)'
                )
            check_features(
                x,
                'x',
                channels=self._input_channels(self.lin, self.in_channels),
            )
            self._check_dtype(x, 'x', self.lin)
            if value_checks_enabled():
                check_finite(x, 'x')
            return x, x, False

        if not isinstance(x, (tuple, list)) or len(x) != 2 or x[1] is None:
            raise ValueError(
                "'x' must be a tensor or a pair (x_src, x_dst) "
                'of tensors (the target features define the '
                'attention, so x_dst cannot be None)'
            )
        x_src, x_dst = x
        # The projection that reads each side, and its declared input size.
        lins = (self.lin_src, self.lin_dst) if pair else (self.lin,) * 2
        declared = self.in_channels if pair else (self.in_channels,) * 2
        names = ('x[0]', 'x[1]')
        for name, side, lin, channels in zip(names, x, lins, declared):
            check_features(
                side, name, channels=self._input_channels(lin, channels)
            )
        if (
            not pair
            and self.proj_channels is not None
            and x_src.size(-1) != x_dst.size(-1)
        ):
            # Only a lazy layer gets here: a declared size checks each side.
            raise ValueError(
                f'APNetConv({self.in_channels}, ...) projects '
                f'x[0] and x[1] with one shared projection, so '
                f'they need the same number of features (got '
                f'{x_src.size(-1)} and {x_dst.size(-1)}): pass '
                f'in_channels=(-1, -1) for one projection per '
                f'side'
            )
        check_same_device(x_dst, 'x[1]', x_src, 'x[0]')
        for name, side, lin in zip(names, x, lins):
            self._check_dtype(side, name, lin)
        if self.proj_channels is None and x_src.size(-1) != x_dst.size(-1):
            raise ValueError(
                f'Without a projection (proj_channels=None) the '
                f'cosine compares x[0] and x[1] directly, so '
                f'they need the same number of features (got '
                f'{x_src.size(-1)} and {x_dst.size(-1)})'
            )
        if value_checks_enabled():
            check_finite(x_src, 'x[0]')
            check_finite(x_dst, 'x[1]')
        return x_src, x_dst, True

    @staticmethod
    def _check_size(
        x_src: Tensor, x_dst: Tensor, size: Size
    ) -> Tuple[int, int]:
        expected = (x_src.size(0), x_dst.size(0))
        if size is not None and tuple(size) != expected:
            raise ValueError(
                f"'size' must be (num_source_nodes, "
                f'num_target_nodes) = {expected}, the node '
                f"counts of 'x' (got {tuple(size)})"
            )
        return expected

    def _from_adjacency(
        self, adj_t, edge_weight: OptTensor, size: Tuple[int, int]
    ) -> Tuple[Tensor, OptTensor]:
        if self.flow != 'source_to_target':
            raise ValueError(
                "'edge_index' is a sparse adjacency, read as "
                'adj_t (row = target node), which needs '
                "flow='source_to_target'"
            )
        if edge_weight is not None:
            raise ValueError(
                'Pass edge weights either as the values of the '
                "sparse adjacency or as 'edge_weight', not both"
            )
        if tuple(adj_t.size()[:2]) != (size[1], size[0]):
            raise ValueError(
                f"'edge_index', a sparse adjacency adj_t, must "
                f'have shape [{size[1]}, {size[0]}] (targets x '
                f'sources; got {tuple(adj_t.size())})'
            )
        if isinstance(adj_t, SparseTensor):
            # torch_sparse's SparseTensor (optional dependency).
            target, source, value = adj_t.coo()
            index_t = torch.stack([target, source], dim=0)
        elif adj_t.layout == torch.sparse_coo and adj_t.requires_grad:
            # _values() is not differentiable. Coalescing is exact here:
            # the weights of duplicate entries add up, as their terms in
            # the softmax.
            adj_t = adj_t.coalesce()
            index_t, value = adj_t.indices(), adj_t.values()
        elif adj_t.layout == torch.sparse_coo:
            # Not to_edge_index, which marks the caller's tensor coalesced
            # in place: an uncoalesced one would then read wrong elsewhere.
            index_t, value = adj_t._indices(), adj_t._values()
        else:
            index_t, value = to_edge_index(adj_t)
        if value is not None and value.dtype == torch.bool:
            value = None  # A pattern: unit weights.
        elif value is not None and not value.is_floating_point():
            # Not dropped for unit weights: they may be counts.
            raise ValueError(
                f"'edge_index', a sparse adjacency, holds "
                f'integer values ({value.dtype}): convert them '
                f'to float to use them as edge weights, or to '
                f'bool for unit weights'
            )
        return index_t.flip(0), value

    @staticmethod
    def _drop_loops_to_explain(
        edge_index: Tensor, edge_weight: OptTensor
    ) -> Tuple[Tensor, OptTensor]:
        r"""PyG's explainer masks the messages of the edges that are not
        self-loops and then one self-loop per node (as layers that remove
        and re-add them send): the existing self-loops are dropped, and the
        layer adds them back with weight 1, the same graph when their
        weight is 1."""
        loops = edge_index[0] == edge_index[1]
        if not bool(loops.any()):
            return edge_index, edge_weight
        if edge_weight is not None and not bool(
            (edge_weight[loops] == 1).all()
        ):
            raise ValueError(
                "PyG's explainer re-adds self-loops with "
                "weight 1, but 'edge_index' has self-loops of "
                'other weights: explain with '
                'add_self_loops=False, or give them weight 1'
            )
        looped = edge_index[0, loops]
        if looped.unique().numel() < looped.numel():
            raise ValueError(
                "PyG's explainer re-adds one self-loop per "
                "node, but 'edge_index' has a node with "
                "several (each counts in the layer's softmax): "
                'coalesce the graph, or explain with '
                'add_self_loops=False'
            )
        return remove_self_loops(edge_index, edge_weight)

    @staticmethod
    def _check_edge_index_size(
        edge_index: EdgeIndex, size: Tuple[int, int]
    ) -> None:
        # EdgeIndex also caches sizes it inferred (the largest index + 1,
        # when sorted), which trailing isolated nodes make smaller than
        # x's: only a size beyond x's is wrong.
        sparse_size = edge_index.sparse_size()
        if any(
            given is not None and given > expected
            for given, expected in zip(sparse_size, size)
        ):
            raise ValueError(
                f"'edge_index' (an EdgeIndex) has sparse size "
                f"{sparse_size}, more nodes than 'x' has "
                f'({size} source and target nodes)'
            )

    # Output ##################################################################

    def _attention_output(
        self,
        edge_index: Tensor,
        alpha: Tensor,
        alpha_loop: OptTensor,
        loop_kept: OptTensor,
        size: Tuple[int, int],
        sparse_layout: Any,
        dtype: torch.dtype,
    ) -> Tuple[Tensor, Tensor]:
        r"""What :obj:`return_attention_weights` returns beside the output:
        the edges with the added self-loops and their attention in
        :obj:`dtype`, or for a sparse adjacency input the attention as one,
        in its layout, with its values."""
        if loop_kept is not None:  # Append the added self-loops.
            loops = torch.arange(
                size[0], device=edge_index.device, dtype=edge_index.dtype
            )[loop_kept]
            edge_index = torch.cat([edge_index, loops.expand(2, -1)], dim=1)
            alpha = torch.cat([alpha, alpha_loop[loop_kept]], dim=0)
        alpha = alpha.to(dtype)
        if sparse_layout is None:
            return edge_index, alpha
        adj = self._attention_as_sparse(edge_index, alpha, size, sparse_layout)
        # The attention in the order of adj's stored values.
        return adj, adj.values()

    @staticmethod
    def _attention_as_sparse(
        edge_index: Tensor, alpha: Tensor, size: Tuple[int, int], layout
    ) -> Tensor:
        # The input was adj_t (row = target), so the answer is too.
        index_t = edge_index.flip(0)
        size_t = (size[1], size[0])
        if layout == torch.sparse_csr:
            return to_torch_csr_tensor(index_t, alpha, size_t)
        if layout == torch.sparse_csc:
            return to_torch_csc_tensor(index_t, alpha, size_t)
        return to_torch_coo_tensor(index_t, alpha, size_t)
