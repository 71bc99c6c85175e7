import math
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter
from torch_geometric import EdgeIndex, is_compiling
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear
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
    softmax,
    to_edge_index,
    to_torch_coo_tensor,
    to_torch_csc_tensor,
    to_torch_csr_tensor,
)

from apnet_pyg.checks import (
    assert_edge_index_in_range,
    assert_finite,
    assert_positive_weights,
    check_bool,
    check_edge_index,
    check_edge_weight,
    check_features,
    check_in_channels,
    check_int,
    check_number,
    check_same_device,
    check_temperature,
    value_checks_enabled,
)
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

#: The kernels of :obj:`APNetConv(kernel=...)`.
KERNELS = ('auto', 'sparse', 'triton', 'message_passing')

#: Initialisations of the projection :math:`f`.
PROJ_INITS = ('glorot', 'identity')

# What the sparse and Triton kernels honour of MessagePassing's arguments.
_KERNEL_KWARGS = {
    'aggr': ('add', 'sum'),
    'node_dim': (0, -2),
    'decomposed_layers': (1,),
    'flow': ('source_to_target', 'target_to_source'),
}


class Projection(Linear):
    r"""The bias-free projection :math:`f` of
    :class:`~apnet_pyg.nn.APNetConv` and
    :class:`~apnet_pyg.nn.DenseAPNetConv`: a
    :class:`~torch_geometric.nn.dense.Linear` (lazy with
    :obj:`in_channels=-1`) initialised with Glorot or as the identity
    (:func:`torch.nn.init.eye_`: :math:`W_{k,k} = 1`, zero elsewhere)."""

    def __init__(
        self, in_channels: int, out_channels: int, init: str = 'glorot'
    ):
        if init not in PROJ_INITS:
            raise ValueError(
                f"'proj_init' must be one of {PROJ_INITS} (got {init!r})"
            )
        self.init = init
        super().__init__(
            in_channels, out_channels, bias=False, weight_initializer='glorot'
        )

    def reset_parameters(self):
        # Linear's own reset does Glorot, and nothing while lazy.
        if self.init == 'identity' and self.in_channels > 0:
            with torch.no_grad():
                torch.nn.init.eye_(self.weight)
        else:
            super().reset_parameters()


def projections(
    in_channels: Union[int, Tuple[int, int]],
    proj_channels: Optional[int],
    init: str = 'glorot',
) -> Tuple[Optional[torch.nn.Module], ...]:
    r"""The projections :obj:`(lin, lin_src, lin_dst)` of a layer: one
    shared :class:`Projection` for an :obj:`int` input size (the others
    :obj:`None`), one per side for a pair; :class:`torch.nn.Identity` for
    :obj:`proj_channels=None`. The argument checks of both layers."""
    if isinstance(in_channels, tuple) and len(in_channels) == 2:
        check_in_channels(in_channels[0], 'in_channels[0]')
        check_in_channels(in_channels[1], 'in_channels[1]')
    else:
        check_in_channels(in_channels)
    check_int(proj_channels, 'proj_channels', minimum=1, optional=True)
    if init not in PROJ_INITS:
        raise ValueError(
            f"'proj_init' must be one of {PROJ_INITS} (got {init!r})"
        )

    def projection(channels: int) -> torch.nn.Module:
        if proj_channels is None:
            return torch.nn.Identity()
        return Projection(channels, proj_channels, init)

    if isinstance(in_channels, int):
        return projection(in_channels), None, None
    return None, projection(in_channels[0]), projection(in_channels[1])


def projection_input_size(lin: Optional[torch.nn.Module], declared) -> int:
    r"""The number of input features :obj:`lin` reads: the declared one,
    or for a lazy projection (:obj:`-1`) the size of its first input once
    it has seen one (until then :obj:`-1`: any)."""
    return lin.in_channels if isinstance(lin, Linear) else declared


def check_projection_dtype(
    x: Tensor, name: str, lin: Optional[torch.nn.Module]
) -> None:
    r"""Checks that :obj:`x` has the dtype of the projection that reads it
    (metadata only; not under autocast, which casts itself)."""
    weight = getattr(lin, 'weight', None)
    if (
        weight is None
        or x.dtype == weight.dtype
        or torch.is_autocast_enabled(x.device.type)
    ):
        return
    raise ValueError(
        f"'{name}' has dtype {x.dtype} but the layer's "
        f'parameters {weight.dtype}: convert one to the '
        f'other (layer.to({x.dtype}) or '
        f'{name}.to({weight.dtype}))'
    )


@torch.compiler.assume_constant_result
def _triton_installed() -> bool:
    # A constant to TorchDynamo, which skips importlib's spec lookup: a
    # graph break in every compiled forward on CUDA otherwise.
    return is_triton_available()


def initial_step_weights(num_steps: int, teleport: Optional[float]) -> Tensor:
    r"""The step weights :math:`\theta_0, \ldots, \theta_T` (fixed ones,
    or where learned ones start): personalized PageRank's weights with
    teleport probability :math:`\alpha` (:obj:`teleport`), :math:`\theta_t
    = \alpha (1 - \alpha)^t` for :math:`t < T` and :math:`\theta_T = (1 -
    \alpha)^T` (they sum to :math:`1`; :math:`\alpha = 0` is the last
    step's output), or with :obj:`teleport=None` :math:`\theta_1 = 1` and
    the others :math:`0` (one step's output, so that learned weights of a
    layer of any :math:`T` start as a layer of one step)."""
    weights = torch.zeros(num_steps + 1)
    if teleport is None:
        weights[1] = 1.0
        return weights
    for t in range(num_steps):
        weights[t] = teleport * (1.0 - teleport) ** t
    weights[num_steps] = (1.0 - teleport) ** num_steps
    return weights


def register_step_weights(
    layer: torch.nn.Module,
    num_steps: int,
    learn_step_weights: bool,
    teleport: Optional[float],
) -> None:
    r"""Sets up a layer's step weights, the same way in every layer that
    has them: :obj:`layer.learn_step_weights`, :obj:`layer.teleport` and
    :obj:`layer.step_weights`, :math:`\theta_0, \ldots, \theta_T`
    (:func:`initial_step_weights`): a parameter where learned, a buffer
    outside the :obj:`state_dict` (the constructor's arguments define it)
    where fixed, or :obj:`None` for the last step's output (fixed weights
    and :obj:`teleport=None`)."""
    if teleport is not None:
        check_number(teleport, 'teleport', minimum=0.0, maximum=1.0)
    layer.learn_step_weights = check_bool(
        learn_step_weights, 'learn_step_weights'
    )
    layer.teleport = teleport
    if learn_step_weights:
        layer.register_parameter(
            'step_weights',
            Parameter(initial_step_weights(num_steps, teleport)),
        )
    elif teleport is not None:
        layer.register_buffer(
            'step_weights',
            initial_step_weights(num_steps, teleport),
            persistent=False,
        )
    else:
        layer.register_parameter('step_weights', None)


def reset_step_weights(layer: torch.nn.Module) -> None:
    r"""Puts :obj:`layer.step_weights` (if any) back at their start."""
    if layer.step_weights is not None:
        with torch.no_grad():
            layer.step_weights.copy_(
                initial_step_weights(
                    layer.step_weights.numel() - 1, layer.teleport
                )
            )


def step_weights_repr(
    learn_step_weights: bool, teleport: Optional[float]
) -> str:
    r"""What a layer's :obj:`__repr__` says of its step weights: where
    learned ones start, or fixed ones (nothing for the last step's
    output)."""
    if learn_step_weights:
        return f', teleport={teleport}'
    if teleport is None:
        return ''
    return f', teleport={teleport}, learn_step_weights=False'


def combine_steps(step_weights: OptTensor, steps: Sequence[Tensor]) -> Tensor:
    r"""A layer's output from its input and every step's output,
    :obj:`steps` :math:`= (\mathbf{x}^{(0)}, \ldots,
    \mathbf{x}^{(T)})`: the last, or with :obj:`step_weights`
    :math:`\sum_t \theta_t \mathbf{x}^{(t)}`."""
    if step_weights is None:
        return steps[-1]
    out = step_weights[0] * steps[0]
    for weight, step in zip(step_weights[1:], steps[1:]):
        out = out + weight * step
    return out


class APNetConv(MessagePassing):
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
    self-loops). The step is repeated :math:`T` (:obj:`num_steps`) times,
    :math:`\mathbf{x}^{(t)} = \mathbf{P}(\mathbf{x}^{(t-1)})
    \mathbf{x}^{(t-1)}` from :math:`\mathbf{x}^{(0)} = \mathbf{x}`, and
    the output is the last step's, :math:`\mathbf{x}^{(T)}`
    (:obj:`teleport=None`), or a combination of the input and every
    step,

    .. math::
        \mathbf{x}^{\prime} = \sum_{t=0}^{T} \theta_t \mathbf{x}^{(t)},

    with personalized PageRank's weights, :math:`\theta_t = \alpha (1 -
    \alpha)^t` for :math:`t < T` and :math:`\theta_T = (1 - \alpha)^T`
    (:math:`\alpha`: :obj:`teleport`), fixed (as APPNP's) or, with
    :obj:`learn_step_weights`, learned from there: free to smooth over
    several hops (a homophilic graph) or to keep the node's own features,
    :math:`\theta_0` (a heterophilic one).
    With :obj:`proj_channels=None`, :obj:`num_steps=1`,
    :obj:`teleport=None` and no weights it equals
    :class:`~torch_geometric.nn.conv.AGNNConv` (:math:`\beta = \gamma`).
    The defaults (no projection, :math:`\gamma` learned from :math:`3`,
    :math:`T = 4` steps combined with fixed weights at :math:`\alpha =
    0.2`) are the one configuration that lost to neither
    :class:`~torch_geometric.nn.conv.AGNNConv` nor
    :class:`~torch_geometric.nn.conv.GATConv` on the validation splits of a
    homophilic graph (Cora, public and random splits) and three
    heterophilic ones (Texas, Cornell, Actor); they cost four propagations
    a layer (AGNNConv's cost: :obj:`num_steps=1, teleport=None`).
    The paper uses :obj:`proj_channels=256, temperature=10.0,
    learn_temperature=False, num_steps=1, teleport=None`.
    Kernels, caching, precision, bipartite and heterogeneous graphs and
    the explainer: see :obj:`docs/operator.md`.

    Args:
        in_channels (int or tuple): Size of each input sample, or :obj:`-1`
            to derive it from the first input. A tuple gives the source
            and target sizes of a bipartite graph, one projection each.
        proj_channels (int, optional): Output size of :math:`f`;
            :obj:`None` for the identity. (default: :obj:`None`)
        temperature (float, optional): :math:`\gamma \geq 0`, the
            initial value of a learned one. (default: :obj:`3.0`)
        learn_temperature (bool, optional): If set to :obj:`False`,
            :math:`\gamma` is fixed. (default: :obj:`True`)
        add_self_loops (bool, optional): If set to :obj:`False`, will not add
            self-loops (a node that has one keeps its weight). On a
            bipartite graph, target :math:`i` gets source :math:`i` for
            :math:`i < \min(|\mathcal{V}_s|, |\mathcal{V}_t|)`, as in
            :class:`~torch_geometric.nn.conv.GATConv`. (default: :obj:`True`)
        num_steps (int, optional): Number of propagation steps :math:`T`.
            (default: :obj:`4`)
        learn_step_weights (bool, optional): If set to :obj:`True`, the
            step weights :math:`\theta` are learned, starting where
            :obj:`teleport` puts them. (default: :obj:`False`)
        teleport (float, optional): The step weights: personalized
            PageRank's with teleport probability :math:`\alpha \in [0, 1]`
            (:math:`0`: the last step's output, :math:`1`: the input).
            :obj:`None` for the last step's output alone (learned weights
            then start at one step's output, :math:`\theta_1 = 1`:
            AGNNConv's for :obj:`num_steps=1`). On a bipartite graph the
            input term is :obj:`x[1]`, which needs :obj:`x[0]`'s number of
            features. (default: :obj:`0.2`)
        proj_init (str, optional): :obj:`"glorot"` or :obj:`"identity"`.
            (default: :obj:`"glorot"`)
        kernel (str, optional): :obj:`"sparse"` (fused sparse kernels),
            :obj:`"triton"` (one fused Triton kernel a pass; CUDA),
            :obj:`"message_passing"` (PyG's message passing, which honours
            every :class:`MessagePassing` argument and the explainer's
            masks) or :obj:`"auto"` (Triton on CUDA where it applies, else
            the sparse kernels; message passing under the explainer).
            (default: :obj:`"auto"`)
        cached (bool, optional): If set to :obj:`True`, the layer keeps the
            graph structure (its sorted CSR arrays and self-loops) of the
            first call and reuses it on every later call, also under
            :func:`torch.compile` and CUDA graphs, as
            :class:`~torch_geometric.nn.conv.GCNConv` does: only for a
            graph that never changes (full-batch training, a class
            graph). Without it, eager calls reuse the structure while
            they see the same, unmodified :obj:`edge_index` tensor.
            (default: :obj:`False`)
        dropout (float, optional): Dropout probability of the attention
            coefficients :math:`\alpha_{i,j}` (self-loops included) in
            training, a new draw each step, as
            :class:`~torch_geometric.nn.conv.GATConv`'s :obj:`dropout`
            (drawn in the order of the edges on the sparse kernels and in
            message passing: on CPU a seed draws the same on both; the
            Triton kernel draws its own in the kernel, by entry, and
            stores none). :obj:`return_attention_weights` gives the
            coefficients before dropout. (default: :obj:`0.0`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing` (other than
            the defaults only with :obj:`kernel="message_passing"`).

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, F)` or
          :math:`((|\mathcal{V_s}|, F_{s}), (|\mathcal{V_t}|, F_{t}))`
          if bipartite, edge indices :math:`(2, |\mathcal{E}|)` (or an
          :class:`~torch_geometric.EdgeIndex`, or a sparse :obj:`adj_t`),
          edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F)` or
          :math:`(|\mathcal{V}_t|, F_{s})` if bipartite, and with
          :obj:`return_attention_weights=True` the edges (self-loops
          included) and their attention :math:`(|\mathcal{E}|)`, or
          :math:`(|\mathcal{E}|, T)` for :obj:`num_steps=T > 1` (a column
          per step, as :class:`~torch_geometric.nn.conv.GATConv` gives
          one per head)
    """

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        proj_channels: Optional[int] = None,
        temperature: float = 3.0,
        learn_temperature: bool = True,
        add_self_loops: bool = True,
        num_steps: int = 4,
        learn_step_weights: bool = False,
        teleport: Optional[float] = 0.2,
        proj_init: str = 'glorot',
        kernel: str = 'auto',
        cached: bool = False,
        dropout: float = 0.0,
        **kwargs,
    ):
        kwargs.setdefault('aggr', 'add')
        if kernel not in KERNELS:
            raise ValueError(
                f"'kernel' must be one of {', '.join(KERNELS)} "
                f'(got {kernel!r})'
            )
        dropout = check_number(dropout, 'dropout', minimum=0.0, maximum=1.0)
        if kernel != 'message_passing':
            for key, value in kwargs.items():
                if value not in _KERNEL_KWARGS.get(key, ()):
                    raise ValueError(
                        f'APNetConv(kernel={kernel!r}) cannot honour the '
                        f'MessagePassing argument {key}={value!r}; pass '
                        f"kernel='message_passing' to run PyG's message "
                        f'passing, which does'
                    )
        super().__init__(**kwargs)
        self.in_channels = in_channels
        self.proj_channels = proj_channels
        self.proj_init = proj_init
        self.lin, self.lin_src, self.lin_dst = projections(
            in_channels, proj_channels, proj_init
        )
        self.initial_temperature = check_temperature(temperature)
        self.learn_temperature = check_bool(
            learn_temperature, 'learn_temperature'
        )
        if learn_temperature:
            self.temperature = Parameter(torch.empty(()))
        else:
            self.register_buffer('temperature', torch.empty(()))
        self.add_self_loops = check_bool(add_self_loops, 'add_self_loops')
        self.num_steps = check_int(num_steps, 'num_steps', minimum=1)
        register_step_weights(
            self, self.num_steps, learn_step_weights, teleport
        )
        self.kernel = kernel
        self.dropout = dropout
        self.cached = check_bool(cached, 'cached')
        self._cached_structure = None
        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        for lin in (self.lin, self.lin_src, self.lin_dst):
            if hasattr(lin, 'reset_parameters'):
                lin.reset_parameters()
        with torch.no_grad():
            self.temperature.fill_(self.initial_temperature)
        reset_step_weights(self)

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
                (a :class:`torch.Tensor` of int64 or int32 indices, or a
                :class:`~torch_geometric.EdgeIndex`, whose cache the
                kernels read and fill), or a sparse adjacency :obj:`adj_t`
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
        x_src, x_dst, bipartite = self._node_features(x)
        size = _checked_size(x_src, x_dst, size)
        if bipartite and self.flow != 'source_to_target':
            # PyG pairs x[k] with edge_index[k] (under this flow, x[0] are
            # the targets); this layer's pair is (sources, targets), the
            # two conventions would disagree.
            raise ValueError(
                "A bipartite 'x' needs flow='source_to_target'"
                ' (x = (x_src, x_dst), edge_index[0] the '
                'sources): flip edge_index instead of the flow'
            )
        if x_src.device.type == 'meta' and self.add_self_loops and attention:
            raise ValueError(
                'return_attention_weights on meta tensors: the '
                'number of added self-loops depends on the '
                'data; pass add_self_loops=False or real '
                'tensors'
            )
        edge_index, graph, edge_weight, sparse_layout = self._edge_inputs(
            edge_index, edge_weight, x_src, size, bipartite
        )
        kernel = self._kernel_for(x_src, attention)
        # The attention's dtype: x's, float32 for half-precision x (and
        # also for a half-precision projection of float32 x under
        # autocast).
        dtype = compute_dtype(x_src.dtype, x_dst.dtype)
        log_weight = None
        if edge_weight is not None:
            # In the attention's dtype, as documented and as
            # DenseAPNetConv does.
            log_weight = edge_weight.to(dtype).log()

        structure = self._graph_structure(
            edge_index, graph, size, bipartite, kernel
        )
        loop_kept = structure.loop_kept
        if kernel == 'message_passing' or bipartite:
            # The self-loops as edges (for the kernels, entries of the
            # structure's arrays already), masked out where the node has a
            # self-loop of its own.
            log_weight = _with_loop_log_weights(
                log_weight, edge_index.size(1), loop_kept, dtype
            )
        if kernel == 'message_passing':
            steps, alpha = self._message_passing(
                x_src,
                x_dst,
                _with_self_loops(edge_index, loop_kept),
                log_weight,
                size,
                bipartite,
                dtype,
            )
        else:
            if log_weight is not None and structure.perm is not None:
                log_weight = log_weight.index_select(0, structure.perm)
            # On a bipartite graph the loops are entries of the pattern.
            diagonal = None if bipartite else loop_kept
            if kernel == 'triton':
                steps = self._triton_propagate(
                    x_src,
                    x_dst,
                    structure.arrays,
                    log_weight,
                    diagonal,
                    bipartite,
                )
                alpha = None
            else:
                steps, alpha = self._sparse_propagate(
                    x_src,
                    x_dst,
                    structure,
                    log_weight,
                    diagonal,
                    bipartite,
                    attention,
                    dtype,
                )
        out = combine_steps(self.step_weights, [x_dst, *steps])
        if not attention:
            return out
        return out, self._attention_output(
            edge_index,
            alpha,
            loop_kept,
            size,
            sparse_layout,
            out.dtype,
            bipartite,
        )

    # Inputs ##################################################################

    def _node_features(
        self, x: Union[Tensor, PairTensor]
    ) -> Tuple[Tensor, Tensor, bool]:
        r"""The source and target features, checked, and whether the graph
        is bipartite."""
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
                channels=projection_input_size(self.lin, self.in_channels),
            )
            check_projection_dtype(x, 'x', self.lin)
            assert_finite(x, 'x')
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
                side, name, channels=projection_input_size(lin, channels)
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
            check_projection_dtype(side, name, lin)
        if self.proj_channels is None and x_src.size(-1) != x_dst.size(-1):
            raise ValueError(
                f'Without a projection (proj_channels=None) the '
                f'cosine compares x[0] and x[1] directly, so '
                f'they need the same number of features (got '
                f'{x_src.size(-1)} and {x_dst.size(-1)})'
            )
        if self.step_weights is not None and x_src.size(-1) != x_dst.size(-1):
            raise ValueError(
                f'With step weights (teleport={self.teleport}) the output '
                f'mixes in the input x[1], so x[0] and x[1] need the same '
                f'number of features (got {x_src.size(-1)} and '
                f'{x_dst.size(-1)}): pass teleport=None, '
                f"learn_step_weights=False (the last step's output)"
            )
        assert_finite(x_src, 'x[0]')
        assert_finite(x_dst, 'x[1]')
        return x_src, x_dst, True

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
            if self.flow != 'source_to_target':
                raise ValueError(
                    "'edge_index' is a sparse adjacency, read as "
                    'adj_t (row = target node), which needs '
                    "flow='source_to_target'"
                )
            sparse_layout = torch.sparse_coo
            if is_torch_sparse_tensor(edge_index):
                sparse_layout = edge_index.layout
            edge_index, edge_weight = _from_adjacency(
                edge_index, edge_weight, size
            )
        elif isinstance(edge_index, EdgeIndex):
            _check_edge_index_size(edge_index, size)
            graph, edge_index = edge_index, edge_index.as_tensor()

        check_edge_index(edge_index)
        check_same_device(edge_index, 'edge_index', x_src)
        if edge_weight is not None:
            check_edge_weight(edge_weight, edge_index.size(1))
            check_same_device(edge_weight, 'edge_weight', x_src)
            assert_positive_weights(edge_weight)
        if self.explain and self.add_self_loops and not bipartite:
            edge_index, edge_weight = _drop_loops_to_explain(
                edge_index, edge_weight
            )
            graph = None  # Other edges than the caller's.
        return edge_index, graph, edge_weight, sparse_layout

    def _kernel_for(self, x: Tensor, attention: bool) -> str:
        r"""The kernel of this call: :obj:`kernel`, with :obj:`"auto"`
        resolved; message passing under PyG's explainer, which masks
        messages."""
        if self.explain:
            return 'message_passing'
        if self.kernel == 'triton' and attention:
            raise ValueError(
                "APNetConv(kernel='triton') does not return "
                'the attention (the kernel never stores '
                "it): pass kernel='sparse' or 'auto' for "
                'return_attention_weights'
            )
        if self.kernel != 'auto':
            return self.kernel
        channels = (
            x.size(-1)
            if self.proj_channels is None
            else max(x.size(-1), self.proj_channels)
        )
        if (
            not attention
            and x.device.type == 'cuda'
            and _triton_installed()
            and channels <= MAX_FEATURES
        ):
            return 'triton'
        return 'sparse'

    # Graph structure #########################################################

    def _graph_structure(
        self,
        edge_index: Tensor,
        graph: Optional[EdgeIndex],
        size: Tuple[int, int],
        bipartite: bool,
        kernel: str,
    ) -> '_Structure':
        r"""What depends on the graph alone: its range check, which nodes
        get a self-loop (:obj:`None` for none) and, for the kernels, the
        CSR arrays (rows the targets; on a bipartite graph with the
        self-loops appended as entries) with the edge of each entry
        (:obj:`None`: entry :obj:`k` is edge :obj:`k`).

        Kept with :obj:`cached=True` from the first call on; otherwise, in
        eager mode outside debug mode, while the layer sees the same,
        unmodified :obj:`edge_index` tensor (or :class:`EdgeIndex` data),
        as in full-batch training: the sorts are most of a small graph's
        cost."""
        with_arrays = kernel != 'message_passing'
        key = (size, bipartite, self.flow, self.add_self_loops)
        cached = self._cached_structure

        def serves() -> bool:
            # A structure with the kernels' arrays also serves message
            # passing (the explainer):
            # switching kernels does not build it again.
            return cached[2] == key and (
                cached[3].arrays is not None or not with_arrays
            )

        if self.cached and cached is not None and serves():
            return cached[3]
        # Inference tensors have no version counter, and what is built
        # under inference mode cannot be saved for a later backward pass:
        # neither is cached by identity.
        by_identity = (
            not self.cached
            and not is_compiling()
            and not edge_index.is_inference()
            and not torch.is_inference_mode_enabled()
            and not value_checks_enabled()
        )
        if (
            by_identity
            and cached is not None
            and cached[0] is edge_index
            and cached[1] == edge_index._version
            and serves()
        ):
            return cached[3]

        source_row = 0 if self.flow == 'source_to_target' else 1
        row_sizes = size if source_row == 0 else (size[1], size[0])
        assert_edge_index_in_range(edge_index, row_sizes)
        source, target = edge_index[source_row], edge_index[1 - source_row]
        # Self-loops for the nodes that have none; the others keep theirs.
        # On a bipartite graph, target i gets source i for i below both
        # node counts (NeighborLoader's targets are its first sources).
        loop_kept = None
        if self.add_self_loops:
            loop_kept = _lacks_self_loop(source, target, min(size))
        arrays = perm = None
        if with_arrays:
            if bipartite and loop_kept is not None:
                arrays, perm = edge_index_arrays(
                    _with_self_loops(edge_index, loop_kept),
                    row_sizes,
                    1 - source_row,
                    check=False,
                )
            else:
                arrays, perm = _target_arrays(
                    edge_index, graph, row_sizes, 1 - source_row
                )
        structure = _Structure(loop_kept, arrays, perm)
        if self.cached or by_identity:
            # A reference to edge_index itself: its memory cannot be reused
            # by another tensor that would pass for it.
            self._cached_structure = (
                edge_index,
                edge_index._version,
                key,
                structure,
            )
        return structure

    # Propagation #############################################################

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

    def _sparse_propagate(
        self,
        x_src: Tensor,
        x_dst: Tensor,
        structure: '_Structure',
        log_weight: OptTensor,
        loop_kept: OptTensor,
        bipartite: bool,
        attention: bool,
        dtype: torch.dtype,
    ) -> Tuple[List[Tensor], OptTensor]:
        r"""The sparse kernels: :func:`edge_cosine` and
        :func:`softmax_spmm` a step; the self-loops of a graph that is not
        bipartite as their diagonal term. Returns every step's output and, with
        :obj:`attention`, one attention per entry (a column a step for
        several), the self-loops' appended, in the order of the edges."""
        pattern = structure.arrays
        alphas, loop_alphas, steps = [], [], []
        for step in range(self.num_steps):
            h_dst, h_src = self._projections(
                x_src, x_dst, bipartite, step, dtype
            )
            scale, loop_scale = self._dropout_scales(
                structure, loop_kept, dtype, x_src.device
            )
            cos, self_cos = edge_cosine(pattern, h_dst, h_src)
            logits = self.temperature * cos
            if log_weight is not None:
                logits = logits + log_weight
            loop_logits = None
            if loop_kept is not None:
                # The self-loops join the softmax as a diagonal term (weight
                # 1, cosine 1), rather than as entries of the pattern; a node
                # with a self-loop of its own gets none (-inf).
                loop_logits = torch.where(
                    loop_kept, self.temperature * self_cos, -math.inf
                )
            # Logits in the attention's dtype, x_src in its own: the
            # output comes back in x_src's.
            out, alpha, alpha_loop = softmax_spmm(
                pattern, logits, x_src, loop_logits, scale, loop_scale
            )
            x_src, x_dst = (x_src if bipartite else out), out
            alphas.append(alpha)
            loop_alphas.append(alpha_loop)
            steps.append(out)

        if not attention:
            return steps, None
        # Back from (target, source)-sorted order to the order of the
        # edges (and, on a bipartite graph, the appended self-loops).
        alpha = torch.stack(alphas, dim=-1)
        if structure.perm is not None:
            alpha = alpha.new_empty(alpha.shape).index_copy(
                0, structure.perm, alpha
            )
        if loop_kept is not None:
            alpha = torch.cat([alpha, torch.stack(loop_alphas, dim=-1)])
        return steps, alpha

    def _dropout_scales(
        self,
        structure: '_Structure',
        loop_kept: OptTensor,
        dtype: torch.dtype,
        device: torch.device,
    ) -> Tuple[OptTensor, OptTensor]:
        r"""One step's attention dropout for the sparse kernels: what it
        multiplies each entry's and each self-loop's attention by
        (:obj:`None` without dropout). Drawn in the order of message
        passing's edges (the edges, then the added self-loops) and in its
        dtype, so that a seed draws the same on both paths (on CPU; CUDA's
        dropout may vectorise its draws by the tensor's alignment)."""
        if not (self.dropout > 0 and self.training):
            return None, None
        nnz = structure.arrays.nnz
        num_loops = 0 if loop_kept is None else loop_kept.numel()
        draws = F.dropout(
            torch.ones(nnz + num_loops, dtype=dtype, device=device),
            self.dropout,
            training=True,
        )
        scale = draws[:nnz]
        if structure.perm is not None:
            scale = scale.index_select(0, structure.perm)
        return scale, None if loop_kept is None else draws[nnz:]

    def _triton_propagate(
        self,
        x_src: Tensor,
        x_dst: Tensor,
        pattern: CSRArrays,
        log_weight: OptTensor,
        loop_kept: OptTensor,
        bipartite: bool,
    ) -> List[Tensor]:
        steps = []
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
                dropout=self.dropout if self.training else 0.0,
            )
            x_src, x_dst = (x_src if bipartite else out), out
            steps.append(out)
        return steps

    def _message_passing(
        self,
        x_src: Tensor,
        x_dst: Tensor,
        edge_index: Tensor,
        log_weight: OptTensor,
        size: Tuple[int, int],
        bipartite: bool,
        dtype: torch.dtype,
    ) -> Tuple[List[Tensor], Tensor]:
        r"""PyG's message passing over :obj:`edge_index` (self-loops
        included); returns every step's output and the attention of every
        edge, a column a step."""
        # PyG's scatter and softmax take int64 indices.
        edge_index = edge_index.long()
        alphas, steps = [], []
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
                edge_index,
                x=(x_src, x_dst),
                alpha=F.dropout(alpha, self.dropout, self.training),
                size=size,
            )
            # Messages in the attention's dtype (float32 sums for half
            # precision x), the output in x's, as on the kernels' path.
            out = out.to(out_dtype)
            x_src, x_dst = (x_src if bipartite else out), out
            alphas.append(alpha)
            steps.append(out)
        return steps, torch.stack(alphas, dim=-1)

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

    # Output ##################################################################

    def _attention_output(
        self,
        edge_index: Tensor,
        alpha: Tensor,
        loop_kept: OptTensor,
        size: Tuple[int, int],
        sparse_layout: Any,
        dtype: torch.dtype,
        bipartite: bool,
    ) -> Tuple[Tensor, Tensor]:
        r"""What :obj:`return_attention_weights` returns beside the output:
        the edges with the added self-loops and their attention in
        :obj:`dtype` (:obj:`alpha`: the edges', then one per node that may
        get a self-loop), or for a sparse adjacency input the attention as
        one, in its layout, with its values."""
        num_edges = edge_index.size(1)
        if loop_kept is not None:  # Append the added self-loops.
            loops = torch.arange(
                loop_kept.numel(),
                device=edge_index.device,
                dtype=edge_index.dtype,
            )[loop_kept]
            edge_index = torch.cat([edge_index, loops.expand(2, -1)], dim=1)
            alpha = torch.cat(
                [alpha[:num_edges], alpha[num_edges:][loop_kept]]
            )
        if self.num_steps == 1:
            alpha = alpha.squeeze(-1)
        alpha = alpha.to(dtype)
        if sparse_layout is None:
            return edge_index, alpha
        adj = _attention_as_sparse(edge_index, alpha, size, sparse_layout)
        # The attention in the order of adj's stored values.
        return adj, adj.values()

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


class _Structure(NamedTuple):
    r"""A graph's structure as the layer keeps it: the nodes that may get
    a self-loop (:obj:`None` for none), and for the kernels the CSR arrays
    and the edge of each entry (:obj:`None`: entry :obj:`k` is edge
    :obj:`k`)."""

    loop_kept: OptTensor
    arrays: Optional[CSRArrays]
    perm: OptTensor


def _checked_size(x_src: Tensor, x_dst: Tensor, size: Size) -> Tuple[int, int]:
    expected = (x_src.size(0), x_dst.size(0))
    if size is not None and tuple(size) != expected:
        raise ValueError(
            f"'size' must be (num_source_nodes, "
            f'num_target_nodes) = {expected}, the node '
            f"counts of 'x' (got {tuple(size)})"
        )
    return expected


def _target_arrays(
    edge_index: Tensor,
    graph: Optional[EdgeIndex],
    size: Tuple[int, int],
    dim: int,
) -> Tuple[CSRArrays, OptTensor]:
    r"""The CSR arrays whose rows are the targets (:obj:`edge_index[dim]`;
    :obj:`size` is :obj:`edge_index`'s sparse size). A caller's
    :class:`EdgeIndex` that is sorted and has this sparse size gives them
    from its cache, which it keeps (filled here, shared with other layers
    and calls); otherwise an :class:`EdgeIndex` is built from the tensor
    (in range: checked)."""
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


def _lacks_self_loop(source: Tensor, target: Tensor, num_nodes: int) -> Tensor:
    r"""Which of the first :obj:`num_nodes` nodes have no self-loop in the
    graph (:obj:`[num_nodes]`, boolean), with static shapes: no graph
    break, no host synchronisation."""
    is_loop = ((source == target) & (target < num_nodes)).to(torch.float)
    target = target.clamp(max=max(num_nodes - 1, 0))
    num_loops = is_loop.new_zeros(num_nodes).index_add_(0, target, is_loop)
    return num_loops == 0


def _with_self_loops(edge_index: Tensor, loop_kept: OptTensor) -> Tensor:
    r""":obj:`edge_index` with a self-loop edge appended for every node
    that may get one (static shapes: no graph break; see
    :func:`_with_loop_log_weights` for their weights)."""
    if loop_kept is None:
        return edge_index
    loops = torch.arange(
        loop_kept.numel(), device=edge_index.device, dtype=edge_index.dtype
    )
    return torch.cat([edge_index, loops.expand(2, -1)], dim=1)


def _with_loop_log_weights(
    log_weight: OptTensor,
    num_edges: int,
    loop_kept: OptTensor,
    dtype: torch.dtype,
) -> OptTensor:
    r"""The log weights of the edges of :func:`_with_self_loops`: the
    edges' (:math:`0` for none), then the self-loops', :math:`0`, or
    :math:`-\infty` where the node has a self-loop of its own."""
    if loop_kept is None:
        return log_weight
    loop_log_weight = torch.where(loop_kept, 0.0, -math.inf).to(dtype)
    if log_weight is None:
        log_weight = loop_log_weight.new_zeros(num_edges)
    return torch.cat([log_weight, loop_log_weight])


def _from_adjacency(
    adj_t, edge_weight: OptTensor, size: Tuple[int, int]
) -> Tuple[Tensor, OptTensor]:
    r"""The edges and weights of a sparse adjacency :obj:`adj_t` (row =
    target node)."""
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
    if edge_weight is not None and not bool((edge_weight[loops] == 1).all()):
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
