import contextlib
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from apnet_pyg.checks import (
    check_bool,
    check_features,
    check_finite,
    check_int,
    check_number,
    check_positive_weights,
    check_same_device,
    check_temperature,
    check_zeros_and_ones,
    value_checks_enabled,
)
from apnet_pyg.nn.conv.apnet_conv import (
    check_projection_dtype,
    combine_steps,
    projection_input_size,
    projections,
    register_step_weights,
    reset_step_weights,
    step_weights_repr,
)
from apnet_pyg.nn.functional import compute_dtype


class DenseAPNetConv(torch.nn.Module):
    r"""See :class:`apnet_pyg.nn.APNetConv`: the same layer on dense
    (padded, batched) graphs,

    .. math::
        \mathbf{X}^{\prime}_b = \mathbf{P}_b \mathbf{X}_b, \qquad
        P_{b,i,j} = \operatorname{softmax}_{j : A_{b,i,j} \neq 0} \left(
        \gamma \cdot \cos(f(\mathbf{x}_{b,i}), f(\mathbf{x}_{b,j}))
        + \log A_{b,i,j} \right),

    where the values of the adjacency are the prior edge weights
    :math:`w_{i,j} = A_{b,i,j} > 0` (a boolean adjacency means unit
    weights). The step is repeated :obj:`num_steps` times, and the output
    is the last step's or the combination of the input and every step
    (fixed or learned weights), as in
    :class:`~apnet_pyg.nn.APNetConv`. It has the same parameters (and
    :obj:`state_dict`) as :class:`~apnet_pyg.nn.APNetConv`, costs
    :math:`O(N^2)` per graph, and is the faster choice for small or dense
    graphs, *e.g.*, the class graph of a zero-shot learning task.

    Like :class:`~torch_geometric.nn.dense.DenseGATConv`, row :math:`i` of
    the adjacency lists the nodes that node :math:`i` aggregates from:
    :math:`A_{b,i,j} \neq 0` is an edge :math:`j \to i` (for an
    :obj:`edge_index`, use :obj:`to_dense_adj(edge_index, batch,
    edge_weight).transpose(1, 2)`; repeated edges add their weights, as in
    :class:`~apnet_pyg.nn.APNetConv`). Unlike
    :class:`~torch_geometric.nn.dense.DenseGATConv`, :obj:`add_loop` keeps
    the weight of an existing self-loop and adds the missing ones with
    weight :math:`1`, as the sparse layer does.

    **Precision.** It runs in float64, float32, float16 and bfloat16, and
    under :func:`torch.autocast`. For float16 or bfloat16 features (or a
    half-precision projection under autocast) the attention (cosines,
    softmax) is computed in float32, as in
    :class:`~apnet_pyg.nn.APNetConv`; the aggregation
    :math:`\mathbf{P}_b \mathbf{X}_b` is a matrix product in the dtype of
    :obj:`x`, so under :func:`torch.autocast` it runs (and the output
    comes back) in the autocast dtype, as in
    :class:`~torch_geometric.nn.dense.DenseGATConv`. Outside autocast, the
    output and the attention have the dtype of :obj:`x`.

    Input checks: shapes, dtypes (:obj:`x` in the parameters' dtype, but
    under :func:`torch.autocast`) and devices always; values (finite
    features, finite and non-negative adjacency, an integer mask of zeros
    and ones)
    under
    :obj:`with torch_geometric.debug():`, in eager mode. It compiles with
    :obj:`torch.compile(conv, fullgraph=True)`.

    Args:
        in_channels (int): Size of each input sample, or :obj:`-1` to derive
            it from the first input.
        proj_channels (int, optional): Output size of the projection
            :math:`f`; :obj:`None` for the identity. (default: :obj:`None`)
        temperature (float, optional): The temperature :math:`\gamma \geq 0`,
            the initial value of a learned one. (default: :obj:`3.0`)
        learn_temperature (bool, optional): If set to :obj:`False`,
            :math:`\gamma` is fixed. (default: :obj:`True`)
        num_steps (int, optional): Number of propagation steps :math:`T`.
            (default: :obj:`4`)
        learn_step_weights (bool, optional): If set to :obj:`True`, the
            step weights of :math:`\sum_{t=0}^{T} \theta_t
            \mathbf{X}^{(t)}` are learned, starting where :obj:`teleport`
            puts them, as in :class:`~apnet_pyg.nn.APNetConv`.
            (default: :obj:`False`)
        teleport (float, optional): The step weights: personalized
            PageRank's with this teleport probability, or with :obj:`None`
            the last step's output alone, as in
            :class:`~apnet_pyg.nn.APNetConv`. (default: :obj:`0.2`)
        proj_init (str, optional): Initialisation of :math:`f`:
            :obj:`"glorot"` or :obj:`"identity"`. (default:
            :obj:`"glorot"`)
        dropout (float, optional): Dropout probability of the attention
            coefficients in training, a new draw each step, as in
            :class:`~apnet_pyg.nn.APNetConv` and
            :class:`~torch_geometric.nn.dense.DenseGATConv`;
            :obj:`return_attention_weights` gives them before dropout.
            (default: :obj:`0.0`)

    Shapes:
        - **input:**
          node features :math:`(B, N, F)` or :math:`(N, F)`,
          adjacency :math:`(B, N, N)` or :math:`(N, N)` (broadcast over the
          batch; boolean, or non-negative weights),
          node mask :math:`(B, N)` *(optional)*
        - **output:** node features :math:`(B, N, F)` (:math:`B = 1` for
          an :math:`(N, F)` input, as in
          :class:`~torch_geometric.nn.dense.DenseGATConv`), and the attention
          :math:`(B, N, N)` (:math:`(B, N, N, T)` for :obj:`num_steps=T > 1`)
          if :obj:`return_attention_weights=True`
    """

    def __init__(
        self,
        in_channels: int,
        proj_channels: Optional[int] = None,
        temperature: float = 3.0,
        learn_temperature: bool = True,
        num_steps: int = 4,
        learn_step_weights: bool = False,
        teleport: Optional[float] = 0.2,
        proj_init: str = 'glorot',
        dropout: float = 0.0,
    ):
        super().__init__()
        if isinstance(in_channels, (tuple, list)):
            raise ValueError(
                f'DenseAPNetConv takes one node set, so '
                f"'in_channels' must be an int (got "
                f'{in_channels})'
            )
        # The parameters of APNetConv, under the same names: the two
        # layers' state_dicts are interchangeable.
        self.in_channels = in_channels
        self.proj_channels = proj_channels
        self.proj_init = proj_init
        self.lin, _, _ = projections(in_channels, proj_channels, proj_init)
        self.initial_temperature = check_temperature(temperature)
        self.learn_temperature = check_bool(
            learn_temperature, 'learn_temperature'
        )
        if learn_temperature:
            self.temperature = Parameter(torch.empty(()))
        else:
            self.register_buffer('temperature', torch.empty(()))
        self.num_steps = check_int(num_steps, 'num_steps', minimum=1)
        register_step_weights(
            self, self.num_steps, learn_step_weights, teleport
        )
        self.dropout = check_number(
            dropout, 'dropout', minimum=0.0, maximum=1.0
        )
        self.reset_parameters()

    def reset_parameters(self):
        r"""Resets all learnable parameters of the module."""
        if hasattr(self.lin, 'reset_parameters'):
            self.lin.reset_parameters()
        with torch.no_grad():
            self.temperature.fill_(self.initial_temperature)
        reset_step_weights(self)

    def forward(
        self,
        x: Tensor,
        adj: Tensor,
        mask: Optional[Tensor] = None,
        add_loop: bool = True,
        return_attention_weights: bool = False,
    ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        r"""Forward pass.

        Args:
            x (torch.Tensor): Node feature tensor
                :math:`\mathbf{X} \in \mathbb{R}^{B \times N \times F}`, with
                batch-size :math:`B`, (maximum) number of nodes :math:`N` for
                each graph, and feature dimension :math:`F`.
            adj (torch.Tensor): Adjacency tensor
                :math:`\mathbf{A} \in \mathbb{R}^{B \times N \times N}`; its
                non-zero entries are the edges and their (strictly positive)
                weights.
            mask (torch.Tensor, optional): Mask matrix
                :math:`\mathbf{M} \in {\{ 0, 1 \}}^{B \times N}` indicating
                the valid nodes for each graph (boolean, or zeros and ones
                of an integer dtype, read as valid where non-zero, other
                values refused under :obj:`torch_geometric.debug()`; a
                floating-point mask is refused: the output of a valid node
                is never scaled by a mask value, unlike
                :class:`~torch_geometric.nn.dense.DenseGATConv`).
                (default: :obj:`None`)
            add_loop (bool, optional): If set to :obj:`False`, the layer will
                not automatically add self-loops to the adjacency matrices.
                (default: :obj:`True`)
            return_attention_weights (bool, optional): Also return the
                attention matrix. (default: :obj:`False`)
        """
        if isinstance(x, Tensor) and x.dim() == 2:
            x = x.unsqueeze(0)
        check_features(
            x,
            'x',
            dim=3,
            channels=projection_input_size(self.lin, self.in_channels),
        )
        check_projection_dtype(x, 'x', self.lin)
        if not isinstance(adj, Tensor):
            raise ValueError(
                f"'adj' must be a torch.Tensor (got {type(adj).__name__})"
            )
        if adj.layout != torch.strided:
            raise ValueError(
                f"'adj' must be a dense tensor (got layout "
                f'{adj.layout}): pass adj.to_dense(), or the '
                f'sparse adjacency to APNetConv'
            )
        adj = adj.unsqueeze(0) if adj.dim() == 2 else adj
        B, N, _ = x.size()
        if (
            adj.dim() != 3
            or adj.shape[1:] != (N, N)
            or adj.size(0) not in (1, B)
        ):
            raise ValueError(
                f"'adj' must have shape [{B}, {N}, {N}] or "
                f'[{N}, {N}] (got {tuple(adj.shape)})'
            )
        check_same_device(adj, 'adj', x)
        if adj.is_complex():
            raise ValueError(
                f"'adj' must hold real weights or booleans "
                f'(got dtype {adj.dtype})'
            )
        if mask is not None:
            if not isinstance(mask, Tensor):
                raise ValueError(
                    f"'mask' must be a torch.Tensor "
                    f'(got {type(mask).__name__})'
                )
            if mask.shape != (B, N):
                raise ValueError(
                    f"'mask' must have shape [{B}, {N}] "
                    f'(got {tuple(mask.shape)})'
                )
            check_same_device(mask, 'mask', x)
            if mask.is_floating_point() or mask.is_complex():
                # Metadata only: a mask of 0.5 would read as valid nodes.
                raise ValueError(
                    f"'mask' must be a boolean (or 0/1 integer) "
                    f'tensor of the valid nodes (got dtype '
                    f'{mask.dtype}): pass mask.bool() or '
                    f'mask > 0.5, as wanted'
                )
            if mask.dtype != torch.bool and value_checks_enabled():
                check_zeros_and_ones(mask, 'mask')
            mask = mask.bool()  # One meaning for the edges and the output.

        edges = adj != 0
        if mask is not None:
            edges = edges & mask.unsqueeze(1) & mask.unsqueeze(2)
        if value_checks_enabled():
            check_finite(x, 'x')
        # The attention's dtype: x's, float32 for half precision.
        dtype = compute_dtype(x.dtype)
        log_weight = None
        if adj.dtype != torch.bool:
            weight = adj.to(dtype)
            if value_checks_enabled():
                check_positive_weights(
                    weight.expand(B, N, N)[edges.expand(B, N, N)], 'adj'
                )
            # Off-edge entries (zero) never reach the log, so they cannot
            # produce NaN gradients.
            log_weight = torch.where(edges, weight, 1.0).log()

        if add_loop:
            valid = (
                x.new_ones(B, N, dtype=torch.bool) if mask is None else mask
            )
            new_loops = (
                torch.eye(N, dtype=torch.bool, device=x.device)
                & valid.unsqueeze(-1)
                & ~edges
            )
            edges = edges | new_loops
            if log_weight is not None:  # Added self-loops get weight 1.
                log_weight = torch.where(new_loops, 0.0, log_weight)

        # A row without any edge (padding, or an isolated node without
        # self-loops) gets zero attention instead of a 0/0 softmax.
        has_edge = edges.any(dim=-1, keepdim=True)
        alphas, steps = [], [x]
        for _ in range(self.num_steps):
            # (No copy where the projection is in the attention's dtype.)
            h = F.normalize(self.lin(x).to(dtype), p=2.0, dim=-1)
            with _autocast_disabled(h.device.type):
                # Autocast would round the cosines to half precision.
                cos = h @ h.transpose(-1, -2)
            logits = self.temperature * cos
            if log_weight is not None:
                logits = logits + log_weight
            logits = logits.masked_fill(~edges & has_edge, float('-inf'))
            alpha = logits.softmax(dim=-1).masked_fill(~edges, 0.0)
            alpha = alpha.to(x.dtype)
            x = F.dropout(alpha, self.dropout, self.training) @ x
            alphas.append(alpha)
            steps.append(x)

        x = combine_steps(self.step_weights, steps)
        if mask is not None:
            x = x.masked_fill(~mask.view(B, N, 1), 0.0)

        if return_attention_weights:
            alpha = (
                alphas[0]
                if self.num_steps == 1
                else torch.stack(alphas, dim=-1)
            )
            return x, alpha
        return x

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.in_channels}, '
            f'proj_channels={self.proj_channels}, '
            f'temperature={self.initial_temperature}, '
            f'num_steps={self.num_steps}'
            + step_weights_repr(self.learn_step_weights, self.teleport)
            + (f', dropout={self.dropout:g}' if self.dropout > 0 else '')
            + ')'
        )


def _autocast_disabled(device_type: str):
    r"""A context without :func:`torch.autocast` where it is enabled (no
    context otherwise, e.g. on meta tensors, which have no autocast)."""
    # Not torch.amp.is_autocast_available: TorchDynamo (torch 2.11) cannot
    # trace it, and the meta device is the one case it rules out.
    if device_type != 'meta' and torch.is_autocast_enabled(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()
