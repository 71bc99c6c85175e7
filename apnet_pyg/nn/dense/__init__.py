from .dense_apnet_conv import DenseAPNetConv

__all__ = ['DenseAPNetConv']
