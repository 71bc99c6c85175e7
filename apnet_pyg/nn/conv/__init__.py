from .apnet_conv import APNetConv

__all__ = ['APNetConv']
