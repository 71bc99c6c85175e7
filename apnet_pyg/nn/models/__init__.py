from .centroid_encoder import CentroidEncoder, kmeans
from .relation_head import RelationHead
from .apnet import APNet

__all__ = ['CentroidEncoder', 'kmeans', 'RelationHead', 'APNet']
