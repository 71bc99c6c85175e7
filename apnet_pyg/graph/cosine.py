r"""Graphs from cosine similarity, in chunks: never an :math:`N \times N`
matrix at large :math:`N`."""

import math
from typing import Iterator, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from apnet_pyg.checks import (
    check_bool,
    check_features,
    check_int,
    check_node_features,
    check_number,
)

#: The APNet paper's edge threshold :math:`\epsilon = \cos 40^{\circ}`.
COS_40_DEGREES = math.cos(math.radians(40.0))

#: How far (in units of the features' machine epsilon) a computed cosine may
#: fall below :obj:`threshold` and still count as reaching it: rounding
#: makes the cosine of two identical rows as low as :math:`1 - 5
#: \varepsilon` (0.99999994 in float32 for 3 features, lower for more).
THRESHOLD_TOLERANCE_EPS = 8

# Similarity entries computed at once (64 MB in float32): bounds the memory
# of the builders independently of the number of rows.
_BLOCK_ELEMENTS = 1 << 24


def _graph_ranges(
    batch: Optional[Tensor], num_nodes: int
) -> Tuple[List[Tuple[int, int]], Optional[Tensor]]:
    r"""Contiguous node ranges of the graphs in :obj:`batch`, and the
    permutation that makes :obj:`batch` sorted (:obj:`None` if it is)."""
    if batch is None:
        return [(0, num_nodes)], None
    if batch.dim() != 1 or batch.numel() != num_nodes:
        raise ValueError(
            f"'batch' must have shape [{num_nodes}] (one graph "
            f"index per row of 'x'; got {tuple(batch.shape)})"
        )
    if batch.is_floating_point() or batch.dtype == torch.bool:
        raise ValueError(
            f"'batch' must hold integer graph indices "
            f'(got dtype {batch.dtype})'
        )
    if num_nodes > 0 and int(batch.min()) < 0:
        raise ValueError("'batch' holds negative graph indices")
    perm = None
    if num_nodes > 1 and not bool((batch[1:] >= batch[:-1]).all()):
        batch, perm = torch.sort(batch, stable=True)
    counts = torch.unique_consecutive(batch, return_counts=True)[1].tolist()
    ends = torch.tensor(counts).cumsum(0).tolist() if counts else []
    starts = [0] + ends[:-1]
    return list(zip(starts, ends)), perm


def _normalized_graphs(
    x: Tensor, batch: Optional[Tensor]
) -> Tuple[Tensor, List[Tuple[int, int]], Optional[Tensor]]:
    r"""Unit-norm rows of :obj:`x`, ordered so that every graph of
    :obj:`batch` is a contiguous range, the ranges, and the permutation
    applied (:obj:`None` if none was needed)."""
    check_node_features(x, 'x')
    h = _unit_rows(x)
    ranges, perm = _graph_ranges(batch, h.size(0))
    return (h if perm is None else h[perm]), ranges, perm


def _unit_rows(x: Tensor) -> Tensor:
    h = x.detach()
    if h.dtype in (torch.float16, torch.bfloat16):
        # Their rounding (bfloat16: 2^-8) would move the threshold by
        # degrees: compare in float32.
        h = h.float()
    return F.normalize(h, p=2.0, dim=-1)


def _threshold_cut(threshold: float, dtype: torch.dtype) -> float:
    # Within THRESHOLD_TOLERANCE_EPS machine epsilons below the threshold.
    return threshold - THRESHOLD_TOLERANCE_EPS * torch.finfo(dtype).eps


def cosine_threshold_adjacency(x: Tensor, threshold: float) -> Tensor:
    r""":func:`cosine_threshold_graph` (:obj:`loop=False`, one graph) as a
    dense boolean :math:`(N, N)` matrix: the same rule (normalisation,
    tolerance, each pair decided from the upper triangle and mirrored),
    but no edge list, so no :obj:`nonzero` whose size the host must read
    (for CUDA graphs and :func:`torch.compile`). The values of :obj:`x`
    are not checked (that would read them on the host)."""
    threshold = check_threshold(threshold)
    check_features(x, 'x')
    h = _unit_rows(x)
    upper = (h @ h.t() >= _threshold_cut(threshold, h.dtype)).triu(diagonal=1)
    return upper | upper.t()


def cosine_knn_adjacency(x: Tensor, k: int) -> Tensor:
    r""":func:`cosine_knn_graph` (:obj:`loop=False`, one graph) as a dense
    boolean :math:`(N, N)` matrix, row = target: row :math:`i` marks the
    :obj:`k` rows nearest to row :math:`i` (all the others when
    :math:`k \geq N`), as :class:`~apnet_pyg.nn.DenseAPNetConv` reads an
    adjacency. The same rule (unit rows, the top :obj:`k` of each row
    with the diagonal excluded) without an edge list, so no size the host
    must read. The values of :obj:`x` are not checked (an all-zero row
    gets arbitrary neighbours here)."""
    k = check_k(k)
    check_features(x, 'x')
    h = _unit_rows(x)
    n = h.size(0)
    similarity = h @ h.t()
    similarity.fill_diagonal_(-math.inf)
    neighbours = similarity.topk(min(k, max(n - 1, 0)), dim=1).indices
    adjacency = torch.zeros(n, n, dtype=torch.bool, device=h.device)
    return adjacency.scatter_(1, neighbours, True)


def check_threshold(threshold) -> float:
    r"""The edge threshold as a float in :math:`[-1, 1]` (a one-element
    tensor is read), or a clear error."""
    if isinstance(threshold, Tensor) and threshold.numel() == 1:
        threshold = threshold.item()
    return check_number(threshold, 'threshold', minimum=-1.0, maximum=1.0)


def check_k(k) -> int:
    return check_int(k, 'k', minimum=1)


def check_flow(flow) -> str:
    if flow not in ('source_to_target', 'target_to_source'):
        raise ValueError(
            f"'flow' must be 'source_to_target' or "
            f"'target_to_source' (got {flow!r})"
        )
    return flow


def _row_blocks(
    start: int, end: int, columns: int, chunk_size: Optional[int]
) -> Iterator[Tuple[int, int]]:
    rows = chunk_size or max(1, _BLOCK_ELEMENTS // max(columns, 1))
    for block_start in range(start, end, rows):
        yield block_start, min(block_start + rows, end)


def _sorted_edge_index(
    source: List[Tensor],
    target: List[Tensor],
    perm: Optional[Tensor],
    num_nodes: int,
    device: torch.device,
) -> Tensor:
    r"""The :obj:`edge_index` of the edges found block by block, in the
    caller's node order (undoing :obj:`perm`), sorted by source, then
    target."""
    if source:
        source_t, target_t = torch.cat(source), torch.cat(target)
    else:
        source_t = target_t = torch.zeros(0, dtype=torch.long, device=device)
    if perm is not None:  # Back to the caller's node order.
        source_t, target_t = perm[source_t], perm[target_t]
    order = torch.argsort(source_t * num_nodes + target_t)
    return torch.stack([source_t[order], target_t[order]], dim=0)


@torch.no_grad()
def cosine_threshold_graph(
    x: Tensor,
    threshold: float = COS_40_DEGREES,
    batch: Optional[Tensor] = None,
    loop: bool = False,
    chunk_size: Optional[int] = None,
) -> Tensor:
    r"""Connects rows of :obj:`x` whose cosine similarity is at least
    :obj:`threshold` (the cosine counterpart of PyG's
    :func:`~torch_geometric.nn.pool.radius_graph`, same argument order),

    .. math::
        (i, j) \in \mathcal{E} \iff \cos(\mathbf{x}_i, \mathbf{x}_j) \geq
        \epsilon,

    the rule of the APNet paper (:math:`\epsilon = \cos 40^{\circ} \approx
    0.766`, applied there to the projected class vectors
    :math:`f(\mathbf{X}^{(0)})`). Each pair is decided once, so the graph is
    exactly undirected (both directions present). Similarities are computed
    in row blocks of at most :math:`2^{24}` entries (or :obj:`chunk_size`
    rows), so memory grows with the number of edges, not with :math:`N^2`.
    A zero row has cosine :math:`0` with every row. A computed cosine
    within :data:`THRESHOLD_TOLERANCE_EPS` machine epsilons below
    :obj:`threshold` counts as reaching it, so that rounding cannot drop
    an edge between identical rows at :obj:`threshold=1.0`; float16 and
    bfloat16 features are compared in float32.

    Args:
        x (torch.Tensor): Node features :math:`(N, F)`.
        threshold (float, optional): The threshold :math:`\epsilon \in
            [-1, 1]`. (default: :math:`\cos 40^{\circ}`)
        batch (torch.Tensor, optional): Graph index of every node
            :math:`(N)`; edges connect only nodes of the same graph.
            (default: :obj:`None`)
        loop (bool, optional): If :obj:`True`, every node gets a self-loop.
            (default: :obj:`False`)
        chunk_size (int, optional): Rows per block, a positive integer.
            (default: automatic)

    :rtype: :class:`torch.LongTensor` :math:`(2, |\mathcal{E}|)`, sorted by
        source, then target.
    """
    threshold = check_threshold(threshold)
    check_bool(loop, 'loop')
    check_int(chunk_size, 'chunk_size', minimum=1, optional=True)
    h, ranges, perm = _normalized_graphs(x, batch)
    num_nodes = h.size(0)
    cut = _threshold_cut(threshold, h.dtype)

    source, target = [], []
    for start, end in ranges:
        for row_start, row_end in _row_blocks(
            start, end, end - start, chunk_size
        ):
            # Upper triangle only: pair (i, j), i < j, is decided once.
            edges = h[row_start:row_end] @ h[row_start:end].t() >= cut
            edges.triu_(diagonal=1)
            i, j = torch.nonzero(edges, as_tuple=True)
            i, j = i + row_start, j + row_start
            source += [i, j]
            target += [j, i]

    if loop:
        nodes = torch.arange(num_nodes, device=h.device)
        source.append(nodes)
        target.append(nodes)
    return _sorted_edge_index(source, target, perm, num_nodes, h.device)


@torch.no_grad()
def cosine_knn_graph(
    x: Tensor,
    k: int,
    batch: Optional[Tensor] = None,
    loop: bool = False,
    flow: str = 'source_to_target',
    chunk_size: Optional[int] = None,
) -> Tensor:
    r"""Connects every row of :obj:`x` to the :obj:`k` rows of highest
    cosine similarity: PyG's :func:`~torch_geometric.nn.pool.knn_graph`
    with :obj:`cosine=True` (same arguments and edge direction), in plain
    PyTorch (PyG's needs the compiled extension :obj:`pyg-lib`).

    With :obj:`flow="source_to_target"`, edges point from the neighbours to
    the node, so that every node is the target of :obj:`k` edges; with
    :obj:`loop=True` a node counts itself among its :obj:`k` neighbours. A
    graph with fewer than :obj:`k` candidates connects all of them.
    Similarities are computed in row blocks as in
    :func:`cosine_threshold_graph`. For an undirected graph, apply
    :func:`torch_geometric.utils.to_undirected` (or use
    :class:`~apnet_pyg.graph.CosineKNNGraph` with
    :obj:`force_undirected=True`).

    An all-zero row has no direction, hence no nearest neighbours (its
    cosine with every row would be a tie at :math:`0`): it raises a
    :class:`ValueError` naming the row, rather than getting arbitrary ones.

    Args:
        x (torch.Tensor): Node features :math:`(N, F)`, no row all zero.
        k (int): The number of neighbours.
        batch (torch.Tensor, optional): Graph index of every node
            :math:`(N)`; neighbours are searched within the same graph.
            (default: :obj:`None`)
        loop (bool, optional): If :obj:`True`, a node may be its own
            neighbour. (default: :obj:`False`)
        flow (str, optional): The flow direction when used in combination
            with message passing (:obj:`"source_to_target"` or
            :obj:`"target_to_source"`). (default: :obj:`"source_to_target"`)
        chunk_size (int, optional): Rows per block, a positive integer.
            (default: automatic)

    :rtype: :class:`torch.LongTensor` :math:`(2, |\mathcal{E}|)`, sorted by
        row, then column, without repeated edges.
    """
    k = check_k(k)
    check_bool(loop, 'loop')
    check_flow(flow)
    check_int(chunk_size, 'chunk_size', minimum=1, optional=True)
    h, ranges, perm = _normalized_graphs(x, batch)
    zero_rows = (h == 0).all(dim=-1).nonzero().view(-1)
    if zero_rows.numel() > 0:
        if perm is not None:
            zero_rows = perm[zero_rows]
        raise ValueError(
            f"'x' has {zero_rows.numel()} all-zero rows (e.g. row "
            f'{int(zero_rows.min())}): a zero vector has no cosine nearest '
            f'neighbours; drop those nodes or give them non-zero features'
        )
    num_nodes = h.size(0)

    neighbour, node = [], []
    for start, end in ranges:
        num_candidates = end - start if loop else end - start - 1
        num_neighbours = min(k, num_candidates)
        if num_neighbours <= 0:
            continue
        for row_start, row_end in _row_blocks(
            start, end, end - start, chunk_size
        ):
            block = h[row_start:row_end] @ h[start:end].t()
            if not loop:
                rows = torch.arange(row_end - row_start, device=h.device)
                block[rows, rows + row_start - start] = -math.inf
            neighbours = block.topk(num_neighbours, dim=1).indices + start
            nodes = torch.arange(row_start, row_end, device=h.device)
            neighbour.append(neighbours.reshape(-1))
            node.append(nodes.repeat_interleave(num_neighbours))

    if flow == 'source_to_target':
        return _sorted_edge_index(neighbour, node, perm, num_nodes, h.device)
    return _sorted_edge_index(node, neighbour, perm, num_nodes, h.device)
