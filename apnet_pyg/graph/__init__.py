r"""Graph construction: cosine-similarity graphs and WordNet graphs."""
from .cosine import COS_40_DEGREES, cosine_knn_graph, cosine_threshold_graph
from .transforms import CosineKNNGraph, CosineThresholdGraph

__all__ = [
    'COS_40_DEGREES',
    'cosine_threshold_graph',
    'cosine_knn_graph',
    'CosineThresholdGraph',
    'CosineKNNGraph',
]
