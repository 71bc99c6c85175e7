r"""Operators and model parts."""

from .conv import APNetConv
from .dense import DenseAPNetConv
from .models import APNet, CentroidEncoder, RelationHead, kmeans

__all__ = [
    'APNetConv',
    'DenseAPNetConv',
    'CentroidEncoder',
    'RelationHead',
    'APNet',
    'kmeans',
]
