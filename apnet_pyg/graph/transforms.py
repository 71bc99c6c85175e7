from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.data.datapipes import functional_transform
from torch_geometric.transforms import BaseTransform
from torch_geometric.utils import to_undirected

from apnet_pyg.checks import check_bool
from apnet_pyg.graph.cosine import (
    COS_40_DEGREES,
    check_flow,
    check_k,
    check_threshold,
    cosine_knn_graph,
    cosine_threshold_graph,
)


@functional_transform('cosine_threshold_graph')
class CosineThresholdGraph(BaseTransform):
    r"""Creates edges between nodes whose features have cosine similarity of
    at least :obj:`threshold` (functional name:
    :obj:`cosine_threshold_graph`; see
    :func:`~apnet_pyg.graph.cosine_threshold_graph`). The graph is
    undirected.

    Args:
        threshold (float, optional): The threshold. (default:
            :math:`\cos 40^{\circ}`)
        loop (bool, optional): If :obj:`True`, the graph will contain
            self-loops. (default: :obj:`False`)
        attr (str, optional): The node attribute compared. (default:
            :obj:`"x"`)
    """

    def __init__(
        self,
        threshold: float = COS_40_DEGREES,
        loop: bool = False,
        attr: str = 'x',
    ) -> None:
        # Checked here, not on the first graph of a dataset.
        self.threshold = check_threshold(threshold)
        self.loop = check_bool(loop, 'loop')
        self.attr = _check_attr(attr)

    def forward(self, data: Data) -> Data:
        data.edge_index = cosine_threshold_graph(
            _node_attribute(data, self.attr),
            self.threshold,
            data.batch if 'batch' in data else None,
            self.loop,
        )
        # The old graph's edge features and weights belong to other edges.
        data.edge_attr = data.edge_weight = None
        return data

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(threshold={self.threshold:.4f})'


@functional_transform('cosine_knn_graph')
class CosineKNNGraph(BaseTransform):
    r"""Creates a :math:`k`-NN graph in cosine similarity of the node
    features (functional name: :obj:`cosine_knn_graph`; see
    :func:`~apnet_pyg.graph.cosine_knn_graph`): PyG's
    :class:`~torch_geometric.transforms.KNNGraph` with :obj:`cosine=True`,
    on any node attribute, without :obj:`pyg-lib`.

    Args:
        k (int, optional): The number of neighbors. (default: :obj:`6`)
        loop (bool, optional): If :obj:`True`, the graph will contain
            self-loops. (default: :obj:`False`)
        force_undirected (bool, optional): If set to :obj:`True`, new edges
            will be undirected. (default: :obj:`False`)
        flow (str, optional): The flow direction when used in combination
            with message passing (:obj:`"source_to_target"` or
            :obj:`"target_to_source"`). If set to
            :obj:`"source_to_target"`, every target node will have exactly
            :math:`k` source nodes pointing to it.
            (default: :obj:`"source_to_target"`)
        attr (str, optional): The node attribute compared. (default:
            :obj:`"x"`)
    """

    def __init__(
        self,
        k: int = 6,
        loop: bool = False,
        force_undirected: bool = False,
        flow: str = 'source_to_target',
        attr: str = 'x',
    ) -> None:
        self.k = check_k(k)
        self.loop = check_bool(loop, 'loop')
        self.force_undirected = check_bool(
            force_undirected, 'force_undirected'
        )
        self.flow = check_flow(flow)
        self.attr = _check_attr(attr)

    def forward(self, data: Data) -> Data:
        edge_index = cosine_knn_graph(
            _node_attribute(data, self.attr),
            self.k,
            data.batch if 'batch' in data else None,
            self.loop,
            self.flow,
        )
        if self.force_undirected:
            edge_index = to_undirected(edge_index, num_nodes=data.num_nodes)
        data.edge_index = edge_index
        # The old graph's edge features and weights belong to other edges.
        data.edge_attr = data.edge_weight = None
        return data

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(k={self.k})'


def _check_attr(attr) -> str:
    if not isinstance(attr, str) or not attr:
        raise ValueError(
            f"'attr' must be the name of a node attribute (got {attr!r})"
        )
    return attr


def _node_attribute(data: Data, attr: str) -> Tensor:
    value = getattr(data, attr, None)
    if value is None:
        raise ValueError(
            f"The data object has no node attribute '{attr}' "
            f'to build the graph from'
        )
    return value
