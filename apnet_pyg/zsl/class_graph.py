r"""The WordNet prior graph over a dataset's classes, in the dense form
:class:`~apnet_pyg.nn.APNet` keeps as its :obj:`class_prior` buffer."""

from typing import Optional, Sequence

import torch
from torch import Tensor


def wordnet_class_prior(
    dataset: str, class_names: Sequence[str], max_hops: Optional[int] = None
) -> Tensor:
    r"""The WordNet graph (weights :math:`1/d`, hop distance :math:`d`) over
    the classes of :obj:`dataset`, as a dense :math:`(C, C)` matrix (row =
    target class, column = source class, :math:`0` = no edge; :math:`C \leq
    717` in xlsa17). Classes are mapped to synsets with the packaged mapping
    of the five xlsa17 datasets, by their names otherwise."""
    from apnet_pyg.data.wordnet_mappings import (
        WORDNET_MAPPING_DATASETS,
        dataset_wordnet_mapping,
    )
    from apnet_pyg.graph.wordnet import wordnet_graph

    mapping = (
        dataset_wordnet_mapping(dataset)
        if dataset in WORDNET_MAPPING_DATASETS
        else None
    )
    edge_index, edge_weight = wordnet_graph(
        list(class_names), max_hops=max_hops, mapping=mapping
    )
    weight = torch.zeros(len(class_names), len(class_names))
    weight[edge_index[1], edge_index[0]] = edge_weight.float()
    return weight
