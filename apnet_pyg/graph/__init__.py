r"""Graph construction: cosine-similarity graphs and WordNet graphs."""

from .cosine import COS_40_DEGREES, cosine_knn_graph, cosine_threshold_graph
from .transforms import CosineKNNGraph, CosineThresholdGraph
from .wordnet import resolve_synsets, wordnet_graph, wordnet_noun_graph
from .wordnet_corpus import load_wordnet

__all__ = [
    'COS_40_DEGREES',
    'cosine_threshold_graph',
    'cosine_knn_graph',
    'CosineThresholdGraph',
    'CosineKNNGraph',
    'wordnet_graph',
    'wordnet_noun_graph',
    'resolve_synsets',
    'load_wordnet',
]
