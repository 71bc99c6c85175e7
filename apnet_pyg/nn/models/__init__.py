from .apnet import APNet
from .centroid_encoder import CentroidEncoder, kmeans
from .relation_head import RelationHead

__all__ = ['CentroidEncoder', 'kmeans', 'RelationHead', 'APNet']
