from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from apnet_pyg.nn.conv.apnet_conv import PropagationParameters
from apnet_pyg.utils import check_node_features


class DenseAPNetConv(PropagationParameters, torch.nn.Module):
    r"""See :class:`apnet_pyg.nn.APNetConv`: the same layer on dense
    (padded, batched) graphs,

    .. math::
        \mathbf{X}^{\prime}_b = \mathbf{P}_b \mathbf{X}_b, \qquad
        P_{b,i,j} = \operatorname{softmax}_{j : A_{b,i,j} \neq 0} \left(
        \gamma \cdot \cos(f(\mathbf{x}_{b,i}), f(\mathbf{x}_{b,j}))
        + \log W_{b,i,j} \right).

    It has the same parameters (and :obj:`state_dict`) as
    :class:`~apnet_pyg.nn.APNetConv`, costs :math:`O(N^2)` per graph, and is
    the faster choice for small or dense graphs, *e.g.*, the class graph of
    a zero-shot learning task.

    Like :class:`~torch_geometric.nn.dense.DenseGATConv`, row :math:`i` of
    the adjacency lists the nodes that node :math:`i` aggregates from:
    :math:`A_{b,i,j} \neq 0` is an edge :math:`j \to i`. For a directed
    :obj:`edge_index`, use
    :obj:`to_dense_adj(edge_index, batch).transpose(1, 2)`.

    Args:
        in_channels (int): Size of each input sample.
        proj_channels (int, optional): Output size of the projection
            :math:`f`; :obj:`None` for the identity. (default: :obj:`256`)
        temperature (float, optional): The temperature :math:`\gamma`.
            (default: :obj:`10.0`)
        learn_temperature (bool, optional): If set to :obj:`True`,
            :math:`\gamma` is a trainable parameter. (default: :obj:`False`)
        add_self_loops (bool, optional): If set to :obj:`False`, will not add
            self-loops. Existing self-loops keep their weight; missing ones
            are added with weight :math:`1`. (default: :obj:`True`)
        num_steps (int, optional): Number of propagation steps.
            (default: :obj:`1`)

    Shapes:
        - **input:**
          node features :math:`(B, N, F)` or :math:`(N, F)`,
          adjacency or boolean mask :math:`(B, N, N)` or :math:`(N, N)`
          (broadcast over the batch),
          edge weights :math:`(B, N, N)` or :math:`(N, N)` *(optional,
          strictly positive on the edges, ignored elsewhere)*,
          node mask :math:`(B, N)` *(optional)*
        - **output:** node features :math:`(B, N, F)`, and the attention
          :math:`(B, N, N)` (:math:`(B, N, N, T)` for :obj:`num_steps=T > 1`)
          if :obj:`return_attention_weights=True`
    """
    def __init__(
        self,
        in_channels: int,
        proj_channels: Optional[int] = 256,
        temperature: float = 10.0,
        learn_temperature: bool = False,
        add_self_loops: bool = True,
        num_steps: int = 1,
    ):
        super().__init__()
        self._init_propagation(in_channels, proj_channels, temperature,
                               learn_temperature, add_self_loops, num_steps)
        self.reset_parameters()

    def reset_parameters(self):
        self._reset_propagation()

    def forward(
        self,
        x: Tensor,
        adj: Tensor,
        edge_weight: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
        return_attention_weights: bool = False,
    ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        r"""Forward pass.

        Args:
            x (torch.Tensor): Node features :math:`(B, N, F)`, with batch
                size :math:`B` and (maximum) number of nodes :math:`N`.
            adj (torch.Tensor): Adjacency :math:`(B, N, N)`; non-zero (or
                :obj:`True`) entries are edges.
            edge_weight (torch.Tensor, optional): Prior weights
                :math:`W_{b,i,j} > 0` on the edges. (default: :obj:`None`)
            mask (torch.Tensor, optional): Boolean node mask :math:`(B, N)`
                of the valid (non-padding) nodes. (default: :obj:`None`)
            return_attention_weights (bool, optional): Also return the
                attention matrix. (default: :obj:`False`)
        """
        x = x.unsqueeze(0) if x.dim() == 2 else x
        check_node_features(x, 'x', dim=3, channels=self.in_channels)
        B, N, _ = x.size()
        edges = self._edge_mask(adj, mask, B, N)

        log_weight = None
        if edge_weight is not None:
            edge_weight = edge_weight.unsqueeze(0) \
                if edge_weight.dim() == 2 else edge_weight
            if edge_weight.dim() != 3 or edge_weight.shape[1:] != (N, N) \
                    or edge_weight.size(0) not in (1, B):
                raise ValueError(f"'edge_weight' must have shape [{B}, {N}, "
                                 f"{N}] or [{N}, {N}] (got "
                                 f"{tuple(edge_weight.shape)})")
            on_edges = edge_weight.expand(B, N, N)[edges]
            if not bool(torch.isfinite(on_edges).all()):
                raise ValueError("'edge_weight' contains NaN or infinite "
                                 "values on edges")
            if not bool((on_edges > 0).all()):
                raise ValueError("'edge_weight' must be strictly positive on "
                                 "the edges of 'adj'")
            # Off-edge entries (possibly zero) never reach the log, so they
            # cannot produce NaN gradients.
            log_weight = torch.where(edges, edge_weight,
                                     torch.ones_like(edge_weight)).log()

        if self.add_self_loops:
            diagonal = torch.eye(N, dtype=torch.bool, device=x.device)
            valid = torch.ones(B, N, dtype=torch.bool, device=x.device) \
                if mask is None else mask.bool()
            new_loops = diagonal & valid.unsqueeze(-1) & ~edges
            edges = edges | new_loops
            if log_weight is not None:  # Added self-loops get weight 1.
                log_weight = log_weight.masked_fill(new_loops, 0.0)

        # A row without any edge (padding, or an isolated node without
        # self-loops) gets zero attention instead of a 0/0 softmax.
        has_edge = edges.any(dim=-1, keepdim=True)
        alphas = []
        for _ in range(self.num_steps):
            h = F.normalize(self.lin(x), p=2.0, dim=-1)
            logits = self.temperature * (h @ h.transpose(-1, -2))
            if log_weight is not None:
                logits = logits + log_weight
            logits = logits.masked_fill(~edges & has_edge, float('-inf'))
            alpha = logits.softmax(dim=-1).masked_fill(~edges, 0.0)
            x = alpha @ x
            alphas.append(alpha)

        if mask is not None:
            x = x * mask.view(B, N, 1).to(x.dtype)

        if return_attention_weights:
            alpha = alphas[0] if self.num_steps == 1 else torch.stack(
                alphas, dim=-1)
            return x, alpha
        return x

    @staticmethod
    def _edge_mask(adj: Tensor, mask: Optional[Tensor], B: int,
                   N: int) -> Tensor:
        adj = adj.unsqueeze(0) if adj.dim() == 2 else adj
        if adj.dim() != 3 or adj.shape[1:] != (N, N) or \
                adj.size(0) not in (1, B):
            raise ValueError(f"'adj' must have shape [{B}, {N}, {N}] or "
                             f"[{N}, {N}] (got {tuple(adj.shape)})")
        if adj.is_floating_point() and not bool(torch.isfinite(adj).all()):
            raise ValueError("'adj' contains NaN or infinite values")
        edges = (adj != 0).expand(B, N, N)
        if mask is not None:
            if mask.shape != (B, N):
                raise ValueError(f"'mask' must have shape [{B}, {N}] "
                                 f"(got {tuple(mask.shape)})")
            mask = mask.bool()
            edges = edges & mask.unsqueeze(1) & mask.unsqueeze(2)
        return edges
