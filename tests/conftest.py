from typing import Optional

import pytest
import torch
from torch import Tensor


def dense_apnet_reference(x: Tensor, edge_index: Tensor, weight: Tensor,
                          edge_weight: Optional[Tensor] = None,
                          temperature: float = 10.0, num_steps: int = 1,
                          add_self_loops: bool = True) -> Tensor:
    r"""APNet propagation written straight from its equation, with dense
    matrices: :math:`\alpha_{ij} \propto w_{ij} \exp(\gamma \cos(W x_i,
    W x_j))` over the edges :math:`j \to i` (a repeated edge adds its
    weight), then :math:`x'_i = \sum_j \alpha_{ij} x_j`. Independent of the
    package's kernels; the tests compare every implementation to it."""
    num_nodes = x.size(0)
    prior = x.new_zeros(num_nodes, num_nodes)
    if edge_weight is None:
        edge_weight = x.new_ones(edge_index.size(1))
    source, target = edge_index
    prior.index_put_((target, source), edge_weight.to(x.dtype),
                     accumulate=True)
    if add_self_loops:
        diagonal = prior.diagonal()
        missing = diagonal == 0
        prior = prior + torch.diag(missing.to(x.dtype))
    for _ in range(num_steps):
        h = x if weight is None else x @ weight.t()
        h = h / h.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        scores = torch.exp(temperature * (h @ h.t())) * prior
        denominator = scores.sum(dim=-1, keepdim=True)
        alpha = scores / torch.where(denominator > 0, denominator,
                                     torch.ones_like(denominator))
        x = alpha @ x
    return x


@pytest.fixture
def apnet_reference():
    return dense_apnet_reference


def random_graph(num_nodes: int, num_edges: int,
                 generator: Optional[torch.Generator] = None) -> Tensor:
    """A random directed edge_index without self-loops or repeated edges."""
    index = torch.randperm(num_nodes * num_nodes, generator=generator)
    source, target = index // num_nodes, index % num_nodes
    keep = source != target
    edge_index = torch.stack([source[keep], target[keep]])[:, :num_edges]
    return edge_index


@pytest.fixture
def make_random_graph():
    return random_graph
