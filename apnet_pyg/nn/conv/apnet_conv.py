import math
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.typing import Adj, OptTensor, SparseTensor
from torch_geometric.utils import (
    add_remaining_self_loops,
    is_torch_sparse_tensor,
    softmax,
    to_torch_coo_tensor,
    to_torch_csc_tensor,
    to_torch_csr_tensor,
)

from apnet_pyg.nn.functional import SparsePattern, edge_cosine, spmm
from apnet_pyg.utils import (
    check_edge_index,
    check_edge_weight,
    check_node_features,
)


class PropagationParameters:
    r"""The parameters shared by :class:`APNetConv` and
    :class:`~apnet_pyg.nn.DenseAPNetConv` (same names, so their
    :obj:`state_dict` is interchangeable): the bias-free projection
    :math:`f` (:obj:`lin`, identity for :obj:`proj_channels=None`) and the
    temperature :math:`\gamma` (a parameter if learned, else a buffer)."""
    def _init_propagation(self, in_channels: int,
                          proj_channels: Optional[int], temperature: float,
                          learn_temperature: bool, add_self_loops: bool,
                          num_steps: int) -> None:
        if not math.isfinite(temperature):
            raise ValueError(f"'temperature' must be finite "
                             f"(got {temperature})")
        if not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(f"'num_steps' must be a positive integer "
                             f"(got {num_steps})")
        self.in_channels = in_channels
        self.proj_channels = proj_channels
        self.initial_temperature = float(temperature)
        self.learn_temperature = learn_temperature
        self.add_self_loops = add_self_loops
        self.num_steps = num_steps

        if proj_channels is None:
            self.lin = torch.nn.Identity()
        elif proj_channels <= 0:
            raise ValueError(f"'proj_channels' must be positive or None "
                             f"(got {proj_channels})")
        else:
            self.lin = Linear(in_channels, proj_channels, bias=False,
                              weight_initializer='glorot')
        if learn_temperature:
            self.temperature = Parameter(torch.empty(()))
        else:
            self.register_buffer('temperature', torch.empty(()))

    def _reset_propagation(self) -> None:
        if hasattr(self.lin, 'reset_parameters'):
            self.lin.reset_parameters()
        with torch.no_grad():
            self.temperature.fill_(self.initial_temperature)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'proj_channels={self.proj_channels}, '
                f'temperature={self.initial_temperature}, '
                f'num_steps={self.num_steps})')


class APNetConv(PropagationParameters, MessagePassing):
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

    *i.e.*, a softmax over the neighbours of
    :math:`\gamma \cos(f(\mathbf{x}_i), f(\mathbf{x}_j)) + \log w_{i,j}`,
    with :math:`f(\mathbf{x}) = \mathbf{W} \mathbf{x}` a bias-free linear
    projection (:obj:`conv.lin`), :math:`\gamma` the temperature
    (:math:`\gamma_1 = 10` in the paper) and :math:`w_{i,j} > 0` an optional
    prior edge weight (*e.g.*, WordNet's :math:`1/d_{i,j}`; :math:`1` if not
    given, and for the added self-loops).

    Special cases: with :obj:`proj_channels=None` (:math:`f` the identity)
    and no edge weights, the layer equals
    :class:`~torch_geometric.nn.conv.AGNNConv` with :math:`\beta = \gamma`.
    With :obj:`temperature=0`, :math:`\alpha_{i,j} = w_{i,j} / \sum_k
    w_{i,k}`: plain propagation with the row-normalised prior.
    With :obj:`num_steps > 1`, the propagation is repeated with the same
    :math:`f`, the attention recomputed from the current features each step.
    A node whose only neighbour is itself is returned unchanged; without
    self-loops, a node with no incoming edge is mapped to zero.

    The default (:obj:`fused=True`) path computes all cosines at once with a
    sampled dense-dense product (SDDMM) from precomputed normalised
    projections and aggregates with a sparse-dense product (SpMM), with
    hand-written backward passes (see :mod:`apnet_pyg.nn.functional`): no
    :math:`|\mathcal{E}| \times F` message tensor is materialised.
    :obj:`fused=False` runs PyG's generic gather/scatter message passing
    (same result; supports PyG's explain and message hooks).

    Args:
        in_channels (int): Size of each input sample, or :obj:`-1` to
            derive it from the first input (lazy initialisation).
        proj_channels (int, optional): Output size of the projection
            :math:`f` in which cosines are measured. :obj:`None` makes
            :math:`f` the identity. (default: :obj:`256`)
        temperature (float, optional): The temperature :math:`\gamma`.
            (default: :obj:`10.0`)
        learn_temperature (bool, optional): If set to :obj:`True`,
            :math:`\gamma` is a trainable parameter. (default: :obj:`False`)
        add_self_loops (bool, optional): If set to :obj:`False`, will not add
            self-loops to the input graph. Existing self-loops keep their
            weight; missing ones are added with weight :math:`1`.
            (default: :obj:`True`)
        num_steps (int, optional): Number of propagation steps.
            (default: :obj:`1`)
        fused (bool, optional): Use the SDDMM/SpMM kernels (:obj:`True`) or
            generic message passing (:obj:`False`). (default: :obj:`True`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, F)`,
          edge indices :math:`(2, |\mathcal{E}|)` or a sparse adjacency
          :math:`(|\mathcal{V}|, |\mathcal{V}|)` (transposed, as
          :obj:`adj_t` in PyG; its values are used as edge weights),
          edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F)` or
          :math:`((|\mathcal{V}|, F), ((2, |\mathcal{E}|),
          (|\mathcal{E}|)))` if :obj:`return_attention_weights=True`
          (attention of shape :math:`(|\mathcal{E}|, T)` for
          :obj:`num_steps=T > 1`, one column per step)
    """
    def __init__(
        self,
        in_channels: int,
        proj_channels: Optional[int] = 256,
        temperature: float = 10.0,
        learn_temperature: bool = False,
        add_self_loops: bool = True,
        num_steps: int = 1,
        fused: bool = True,
        **kwargs,
    ):
        kwargs.setdefault('aggr', 'add')
        super().__init__(**kwargs)
        self._init_propagation(in_channels, proj_channels, temperature,
                               learn_temperature, add_self_loops, num_steps)
        self.fused = fused
        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        self._reset_propagation()

    def forward(
        self,
        x: Tensor,
        edge_index: Adj,
        edge_weight: OptTensor = None,
        return_attention_weights: Optional[bool] = None,
    ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]],
               Tuple[Tensor, Tensor]]:
        r"""Runs the forward pass of the module.

        Args:
            x (torch.Tensor): The input node features.
            edge_index (torch.Tensor or SparseTensor): The edge indices, or a
                sparse adjacency :obj:`adj_t` (row = target node; a
                :obj:`torch.sparse` tensor, or :obj:`torch_sparse`'s
                :obj:`SparseTensor` when that is installed).
            edge_weight (torch.Tensor, optional): Strictly positive prior
                weights :math:`w_{i,j}`, one per edge. (default: :obj:`None`)
            return_attention_weights (bool, optional): Will additionally
                return :obj:`(edge_index, attention_weights)` (the edges
                including the added self-loops), or, for a sparse adjacency,
                the adjacency with the attention as its values (in the
                input's layout; a COO tensor for a :obj:`SparseTensor`),
                whenever it is set to a value, regardless of its actual
                value.
                (default: :obj:`None`)
        """
        check_node_features(x, 'x', channels=self.in_channels)
        num_nodes = x.size(0)

        sparse_layout = None
        if (isinstance(edge_index, SparseTensor)
                or is_torch_sparse_tensor(edge_index)) and \
                self.flow != 'source_to_target':
            raise ValueError("A sparse adjacency is read as 'adj_t' (row = "
                             "target node) and needs "
                             "flow='source_to_target'")
        if isinstance(edge_index, SparseTensor):
            # torch_sparse's SparseTensor (optional dependency): adj_t.
            target, source, value = edge_index.coo()
            edge_weight = self._sparse_values(value, edge_weight)
            edge_index = torch.stack([source, target], dim=0)
            sparse_layout = torch.sparse_coo
        elif is_torch_sparse_tensor(edge_index):
            sparse_layout = edge_index.layout
            if tuple(edge_index.shape[:2]) != (num_nodes, num_nodes):
                raise ValueError(f"The sparse adjacency must have shape "
                                 f"[{num_nodes}, {num_nodes}] "
                                 f"(got {tuple(edge_index.shape)})")
            adj_t = edge_index.to_sparse_coo().coalesce()
            target, source = adj_t.indices()
            edge_weight = self._sparse_values(adj_t.values(), edge_weight)
            edge_index = torch.stack([source, target], dim=0)

        check_edge_index(edge_index, num_nodes)
        if edge_weight is not None:
            check_edge_weight(edge_weight, edge_index.size(1))

        if self.add_self_loops:
            edge_index, edge_weight = add_remaining_self_loops(
                edge_index, edge_weight, fill_value=1.0, num_nodes=num_nodes)

        log_weight = None if edge_weight is None else edge_weight.log()

        if self.fused:
            out, alpha = self._fused_propagate(x, edge_index, log_weight)
        else:
            out, alpha = self._message_passing(x, edge_index, log_weight)

        if return_attention_weights is not None:
            if sparse_layout is None:
                return out, (edge_index, alpha)
            return out, self._attention_as_sparse(edge_index, alpha,
                                                  num_nodes, sparse_layout)
        return out

    def _sparse_values(self, value: OptTensor,
                       edge_weight: OptTensor) -> OptTensor:
        if edge_weight is not None:
            raise ValueError("Pass edge weights either as the values of the "
                             "sparse adjacency or as 'edge_weight', not both")
        if value is None or not value.is_floating_point():
            return None
        return value

    def _fused_propagate(self, x: Tensor, edge_index: Tensor,
                         log_weight: OptTensor) -> Tuple[Tensor, Tensor]:
        source, target = edge_index[self._source_row], edge_index[
            1 - self._source_row]
        num_nodes = x.size(0)
        pattern, perm = SparsePattern.from_coo(target, source,
                                               (num_nodes, num_nodes))
        if log_weight is not None:
            log_weight = log_weight[perm]

        alphas = []
        for _ in range(self.num_steps):
            logits = self.temperature * edge_cosine(pattern, self.lin(x))
            if log_weight is not None:
                logits = logits + log_weight
            alpha = softmax(logits, pattern.row, pattern.rowptr,
                            num_nodes=num_nodes)
            x = spmm(pattern, alpha, x)
            alphas.append(alpha)

        # Back from (target, source)-sorted order to the order of edge_index.
        alpha = torch.stack(alphas, dim=-1)
        alpha = alpha.new_empty(alpha.shape).index_copy_(0, perm, alpha)
        return x, alpha.squeeze(-1) if self.num_steps == 1 else alpha

    def _message_passing(self, x: Tensor, edge_index: Tensor,
                         log_weight: OptTensor) -> Tuple[Tensor, Tensor]:
        alphas = []
        for _ in range(self.num_steps):
            h = F.normalize(self.lin(x), p=2.0, dim=-1)
            # edge_updater_type: (h: Tensor, log_weight: OptTensor)
            alpha = self.edge_updater(edge_index, h=h, log_weight=log_weight)
            # propagate_type: (x: Tensor, alpha: Tensor)
            x = self.propagate(edge_index, x=x, alpha=alpha)
            alphas.append(alpha)
        alpha = torch.stack(alphas, dim=-1)
        return x, alpha.squeeze(-1) if self.num_steps == 1 else alpha

    @property
    def _source_row(self) -> int:
        return 0 if self.flow == 'source_to_target' else 1

    def edge_update(self, h_i: Tensor, h_j: Tensor, log_weight: OptTensor,
                    index: Tensor, ptr: OptTensor,
                    dim_size: Optional[int]) -> Tensor:
        logits = self.temperature * (h_i * h_j).sum(dim=-1)
        if log_weight is not None:
            logits = logits + log_weight
        return softmax(logits, index, ptr, dim_size)

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        return alpha.view(-1, 1) * x_j

    def _attention_as_sparse(self, edge_index: Tensor, alpha: Tensor,
                             num_nodes: int, layout) -> Tensor:
        # The input was adj_t (row = target), so the answer is too.
        index_t = edge_index.flip(0)
        size = (num_nodes, num_nodes)
        if layout == torch.sparse_csr:
            return to_torch_csr_tensor(index_t, alpha, size)
        if layout == torch.sparse_csc:
            return to_torch_csc_tensor(index_t, alpha, size)
        return to_torch_coo_tensor(index_t, alpha, size)
