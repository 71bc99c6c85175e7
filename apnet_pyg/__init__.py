"""apnet_pyg: APNet's attribute propagation as PyTorch Geometric operators."""

__version__ = '0.1.0'
