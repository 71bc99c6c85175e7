r"""Operators and model parts."""
from .conv import APNetConv
from .dense import DenseAPNetConv

__all__ = ['APNetConv', 'DenseAPNetConv']
