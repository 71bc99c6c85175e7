"""Input checks shared by the operators and graph builders.

Every check raises a :class:`ValueError` that names the argument and the
problem, so that bad input never turns into a silent wrong answer (an
out-of-range index would otherwise read garbage in a sparse kernel, a NaN
would spread through every softmax it touches).
"""
from typing import Optional

import torch
from torch import Tensor


def check_node_features(x: Tensor, name: str = 'x', dim: int = 2,
                        channels: Optional[int] = None) -> None:
    r"""Checks that :obj:`x` is a finite floating-point tensor with
    :obj:`dim` dimensions and, if given, :obj:`channels` features in its last
    dimension."""
    if not isinstance(x, Tensor):
        raise ValueError(f"'{name}' must be a torch.Tensor "
                         f"(got {type(x).__name__})")
    if x.dim() != dim:
        raise ValueError(f"'{name}' must have {dim} dimensions "
                         f"(got shape {tuple(x.shape)})")
    if not x.is_floating_point():
        raise ValueError(f"'{name}' must be a floating-point tensor "
                         f"(got dtype {x.dtype})")
    if channels is not None and channels > 0 and x.size(-1) != channels:
        raise ValueError(f"'{name}' must have {channels} features in its "
                         f"last dimension (got shape {tuple(x.shape)})")
    # A NaN or inf anywhere makes the sum non-finite; the sum is ~40x cheaper
    # than an elementwise check, which then runs only to rule out overflow.
    if not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):
        raise ValueError(f"'{name}' contains NaN or infinite values")


def check_edge_index(edge_index: Tensor, num_nodes: int) -> None:
    r"""Checks that :obj:`edge_index` is an integer tensor of shape
    :obj:`[2, num_edges]` whose entries lie in :obj:`[0, num_nodes)`."""
    if not isinstance(edge_index, Tensor):
        raise ValueError(f"'edge_index' must be a torch.Tensor "
                         f"(got {type(edge_index).__name__})")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"'edge_index' must have shape [2, num_edges] "
                         f"(got {tuple(edge_index.shape)})")
    if edge_index.is_floating_point() or edge_index.is_complex() or \
            edge_index.dtype == torch.bool:
        raise ValueError(f"'edge_index' must hold integer indices "
                         f"(got dtype {edge_index.dtype})")
    if edge_index.numel() > 0:
        low, high = int(edge_index.min()), int(edge_index.max())
        if low < 0 or high >= num_nodes:
            raise ValueError(f"'edge_index' holds node indices in "
                             f"[{low}, {high}], outside [0, {num_nodes - 1}] "
                             f"for {num_nodes} nodes")


def check_edge_weight(edge_weight: Tensor, num_edges: int) -> None:
    r"""Checks that :obj:`edge_weight` is a finite, strictly positive
    floating-point tensor of shape :obj:`[num_edges]` (it enters the
    attention as :math:`\log w_{ij}`, so zero or negative weights have no
    meaning)."""
    if not isinstance(edge_weight, Tensor):
        raise ValueError(f"'edge_weight' must be a torch.Tensor "
                         f"(got {type(edge_weight).__name__})")
    if edge_weight.dim() != 1 or edge_weight.numel() != num_edges:
        raise ValueError(f"'edge_weight' must have shape [{num_edges}] "
                         f"(one weight per edge; got "
                         f"{tuple(edge_weight.shape)})")
    if not edge_weight.is_floating_point():
        raise ValueError(f"'edge_weight' must be a floating-point tensor "
                         f"(got dtype {edge_weight.dtype})")
    if not bool(torch.isfinite(edge_weight).all()):
        raise ValueError("'edge_weight' contains NaN or infinite values")
    if edge_weight.numel() > 0 and not bool((edge_weight > 0).all()):
        raise ValueError(f"'edge_weight' must be strictly positive (got a "
                         f"minimum of {float(edge_weight.min())}); drop an "
                         f"edge instead of giving it weight zero")
