r"""Memory and time models of the propagation benchmark, to skip a pass
that will not fit before running it."""

from typing import Optional, Sequence, Tuple

import torch

from benchmarks.common import GB
from benchmarks.propagation.grid import (
    DENSE,
    METHODS,
    PROJ_CHANNELS,
    SPARSE,
    GraphSpec,
)

# Resident memory of a worker before it builds anything (torch + PyG).
IMPORT_BYTES = 0.5 * GB
# A pass is skipped ahead when predicted to take this many time caps.
PREDICTION_SLACK = 1.25


def estimate_peak_bytes(
    method: str, graph: GraphSpec, F: int, backward: bool
) -> float:
    r"""A conservative estimate of the memory one pass allocates on top of
    its inputs (float32, int64 indices), checked against the measured
    ``peak_mb`` (the CSV has both)."""
    N, P = graph.num_nodes, PROJ_CHANNELS
    E = graph.num_edges + N  # With the self-loops the layers add.
    # edge_index with loops, sort keys, permutations, CSR indices.
    indices = 100.0 * E
    if method == DENSE:
        # Several float N x N matrices (logits, softmax, masked attention and,
        # in backward, their gradients) and boolean masks.
        return (36.0 if backward else 20.0) * N * N + 4.0 * N * (P + F)
    if method == SPARSE:
        # Per-edge vectors and the CSR pattern (and its transpose in
        # backward), node features; no E x F tensor. 1.5: allocator slack
        # seen at N = 10k.
        per_node = (4 * P + 3 * F) if backward else (2 * P + F)
        return 1.5 * (
            (2 if backward else 1) * (indices + 24.0 * E) + 4.0 * N * per_node
        )
    # Message passing materialises E x F (and E x P) tensors.
    if method == 'apnet_mp':
        per_edge = (4 * P + 4 * F) if backward else (3 * P + 2 * F)
    elif method == 'apnet_default_dropout_mp':
        # Four steps of messages kept for the backward pass (no projection).
        per_edge = 16 * F if backward else 3 * F
    elif method == 'agnn':
        per_edge = 7 * F if backward else 4 * F
    else:  # GAT: messages x_j and alpha * x_j, and their gradients.
        per_edge = 4 * F if backward else 2 * F
    return 4.0 * E * per_edge + indices + 4.0 * N * F * 3


def setup_bytes(
    method: str, graph: GraphSpec, F: int, backward: bool
) -> float:
    r"""The inputs a worker holds before the timed pass."""
    N = graph.num_nodes
    features = 4.0 * N * F * (3 if backward else 1)  # x, output grad, x.grad
    if METHODS[method].dense:
        # The adjacency, plus the edge_index it was built from (freed).
        return features + N * N + 16.0 * graph.num_edges
    return features + 16.0 * graph.num_edges


def work(method: str, graph: GraphSpec, F: int) -> float:
    r"""A rough operation count, to extrapolate a measured time."""
    N = graph.num_nodes
    if METHODS[method].dense:
        return float(N) * N * (F + PROJ_CHANNELS)
    per_edge = 2 * F if method == 'agnn' else F + PROJ_CHANNELS
    # Per-node GEMMs run an order of magnitude faster than gathers.
    node_flops = N * F * METHODS[method].node_channels(F) / 16
    return float(graph.num_edges + N) * per_edge + node_flops


def predict_seconds(
    method: str,
    graph: GraphSpec,
    F: int,
    pass_: str,
    measured: Sequence[dict],
    dtype: str = 'float32',
) -> Optional[Tuple[float, dict]]:
    r"""Scales the time of the largest measured configuration of the same
    method, feature size, dtype and pass by :func:`work`."""
    same = [
        row
        for row in measured
        if row['method'] == method
        and row['F'] == F
        and row['pass'] == pass_
        and row.get('dtype', 'float32') == dtype
        and row['status'] == 'ok'
    ]
    if not same:
        return None
    reference = max(same, key=lambda row: row['_work'])
    # The min: least disturbed by other processes.
    seconds = (
        reference['min_ms'] / 1e3 * work(method, graph, F) / reference['_work']
    )
    return seconds, reference


def element_size(dtype: str) -> int:
    r"""Bytes an element of the dtype named :obj:`dtype` (e.g.
    :obj:`'bfloat16'`)."""
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def floor_bytes(
    graph: GraphSpec, F: int, pass_: str, element: int = 4
) -> float:
    r"""A lower bound on the memory traffic of one pass of any of the
    layers (features of :obj:`element` bytes, float32 by default): the
    forward pass reads the input features and writes the output
    (:math:`2 b N F` bytes) and reads the graph once (a 4-byte index and a
    4-byte weight per edge, self-loops included); the backward pass also
    reads the output gradient and the input and writes the input gradient
    (:math:`3 b N F`), and reads the graph again. Neighbour gathers, which
    dominate a real pass, are not counted: this is a floor, not a
    model."""
    N = graph.num_nodes
    E = graph.num_edges + N
    if pass_ == 'forward':
        return 2.0 * element * N * F + 8.0 * E
    return 5.0 * element * N * F + 16.0 * E


def gather_floor_bytes(
    graph: GraphSpec,
    F: int,
    pass_: str,
    proj_channels: int,
    element: int = 4,
) -> float:
    r""":func:`floor_bytes` plus each edge's source rows gathered once a
    pass (forward; forward and backward): :math:`\mathbf{x}_j` (:math:`F`)
    and the projection :math:`\mathbf{h}_j` (:obj:`proj_channels`, 0
    without one), of :obj:`element` bytes (float32 by default): the floor
    of a kernel that reads every neighbour's rows from memory, not from a
    cache."""
    E = graph.num_edges + graph.num_nodes
    gathers = 1 if pass_ == 'forward' else 2
    return floor_bytes(graph, F, pass_, element) + element * gathers * E * (
        F + proj_channels
    )
