r"""Prior class graphs (WordNet) over a dataset's classes, from which every
task takes the subgraph of its own classes."""
from typing import Optional, Tuple

import torch
from torch import Tensor


class ClassPrior:
    r"""A weighted graph over all :math:`C` classes of a dataset, stored as
    a dense :math:`C \times C` matrix (:math:`C \leq 717` in xlsa17), so the
    subgraph of a task's classes is one indexing operation.

    Args:
        edge_index (torch.Tensor): Edges :math:`(2, E)` between classes.
        edge_weight (torch.Tensor): Positive weights :math:`(E)`.
        num_classes (int): :math:`C`.
    """
    def __init__(self, edge_index: Tensor, edge_weight: Tensor,
                 num_classes: int):
        weight = torch.zeros(num_classes, num_classes)
        # Row = target class, column = source class.
        weight[edge_index[1], edge_index[0]] = edge_weight.float()
        self.weight = weight

    @classmethod
    def wordnet(cls, dataset: str, class_names, max_hops: Optional[int] = None
                ) -> 'ClassPrior':
        r"""The WordNet graph (weights :math:`1/d`, hop distance :math:`d`)
        over the classes of a dataset, through the packaged class-to-synset
        mapping for the five xlsa17 datasets (automatic mapping of the class
        names otherwise)."""
        from apnet_pyg.graph.wordnet import (
            WORDNET_MAPPING_DATASETS,
            dataset_wordnet_mapping,
            wordnet_graph,
        )
        mapping = dataset_wordnet_mapping(dataset) \
            if dataset in WORDNET_MAPPING_DATASETS else None
        edge_index, edge_weight = wordnet_graph(
            list(class_names), max_hops=max_hops, mapping=mapping)
        return cls(edge_index, edge_weight, len(class_names))

    @classmethod
    def for_graph(cls, graph: str, dataset: str,
                  class_names) -> Optional['ClassPrior']:
        r"""The prior a model with class graph :obj:`graph` needs: the
        WordNet graph for :obj:`"wordnet"`, :obj:`None` for the others."""
        return cls.wordnet(dataset, class_names) if graph == 'wordnet' \
            else None

    @property
    def num_classes(self) -> int:
        return self.weight.size(0)

    def subgraph(self, classes: Tensor) -> Tuple[Tensor, Tensor]:
        r"""The graph over :obj:`classes` (relabelled :obj:`0..len-1` in the
        given order) as :obj:`(edge_index, edge_weight)`."""
        weight = self.weight.to(classes.device)[classes][:, classes]
        target, source = weight.nonzero(as_tuple=True)
        return torch.stack([source, target]), weight[target, source]

    def to(self, device) -> 'ClassPrior':
        self.weight = self.weight.to(device)
        return self
