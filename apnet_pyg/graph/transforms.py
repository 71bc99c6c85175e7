from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from apnet_pyg.graph.cosine import (
    COS_40_DEGREES,
    cosine_knn_graph,
    cosine_threshold_graph,
)


class CosineThresholdGraph(BaseTransform):
    r"""Creates edges between nodes whose features have cosine similarity of
    at least :obj:`threshold` (see :func:`~apnet_pyg.graph.
    cosine_threshold_graph`).

    Args:
        threshold (float, optional): The threshold. (default:
            :math:`\cos 40^{\circ}`)
        loop (bool, optional): If :obj:`True`, adds self-loops.
            (default: :obj:`True`)
        attr (str, optional): The node attribute compared. (default:
            :obj:`"x"`)
    """
    def __init__(self, threshold: float = COS_40_DEGREES, loop: bool = True,
                 attr: str = 'x') -> None:
        self.threshold = threshold
        self.loop = loop
        self.attr = attr

    def forward(self, data: Data) -> Data:
        data.edge_index = cosine_threshold_graph(
            _node_attribute(data, self.attr), self.threshold, self.loop,
            data.batch if 'batch' in data else None)
        data.edge_attr = None  # Edge features of the old graph are stale.
        return data

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(threshold={self.threshold:.4f})'


class CosineKNNGraph(BaseTransform):
    r"""Creates a :math:`k`-NN graph in cosine similarity of the node
    features (see :func:`~apnet_pyg.graph.cosine_knn_graph`).

    Args:
        k (int, optional): The number of neighbours. (default: :obj:`6`)
        loop (bool, optional): If :obj:`True`, a node may be its own
            neighbour. (default: :obj:`True`)
        symmetric (bool, optional): If :obj:`True`, the graph is made
            undirected. (default: :obj:`True`)
        attr (str, optional): The node attribute compared. (default:
            :obj:`"x"`)
    """
    def __init__(self, k: int = 6, loop: bool = True, symmetric: bool = True,
                 attr: str = 'x') -> None:
        self.k = k
        self.loop = loop
        self.symmetric = symmetric
        self.attr = attr

    def forward(self, data: Data) -> Data:
        data.edge_index = cosine_knn_graph(
            _node_attribute(data, self.attr), self.k, self.loop,
            data.batch if 'batch' in data else None, self.symmetric)
        data.edge_attr = None  # Edge features of the old graph are stale.
        return data

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(k={self.k})'


def _node_attribute(data: Data, attr: str):
    value = getattr(data, attr, None)
    if value is None:
        raise ValueError(f"The data object has no node attribute '{attr}' "
                         f"to build the graph from")
    return value
