from typing import Optional, Tuple

import torch
from torch import Tensor

from apnet_pyg.graph.cosine import COS_40_DEGREES, cosine_threshold_graph
from apnet_pyg.nn.conv.apnet_conv import APNetConv
from apnet_pyg.nn.models.centroid_encoder import CentroidEncoder
from apnet_pyg.nn.models.relation_head import RelationHead

GRAPHS = ('learned', 'wordnet', 'none')


class APNet(torch.nn.Module):
    r"""The zero-shot learning model of `"Attribute Propagation Network for
    Graph Zero-shot Learning" <https://arxiv.org/abs/2009.11816>`_ (APNet).

    For the classes of a task with attribute vectors :math:`\mathbf{s}_y`:

    1. :class:`CentroidEncoder`: :math:`\mathbf{x}^{(0)}_y = \sum_i
       \mathrm{ReLU}(\mathbf{\Theta}_i (\mathbf{s}_y - \mathbf{c}_i))`;
    2. a graph over the task's classes: :obj:`"learned"` connects classes
       with :math:`\cos(f(\mathbf{x}^{(0)}_y), f(\mathbf{x}^{(0)}_z)) \geq
       \epsilon` (:math:`f` = :obj:`conv.lin`, :math:`\epsilon = \cos
       40^{\circ}`), :obj:`"wordnet"` takes a given prior graph (WordNet
       hops, weights :math:`1/d`), :obj:`"none"` skips propagation;
    3. :class:`~apnet_pyg.nn.APNetConv` propagates the class vectors
       (temperature :math:`\gamma_1 = 10`);
    4. :class:`RelationHead` scores every image against every class; the
       logits are the scores times :math:`\gamma_2` (:obj:`logit_scale`),
       for a softmax over the task's classes.

    Args:
        attribute_dim (int): Size of the class attribute vectors.
        image_channels (int, optional): Size of the image features.
            (default: :obj:`2048`)
        class_channels (int, optional): Size of the class vectors.
            (default: :obj:`2048`)
        hidden_channels (int, optional): Hidden size of the relation head.
            (default: :obj:`2048`)
        num_centroids (int, optional): Experts of the encoder.
            (default: :obj:`3`)
        graph (str, optional): :obj:`"learned"`, :obj:`"wordnet"` or
            :obj:`"none"`. (default: :obj:`"learned"`)
        proj_channels (int, optional): Output size of :math:`f`.
            (default: :obj:`256`)
        threshold (float, optional): The edge threshold :math:`\epsilon` of
            the learned graph. (default: :math:`\cos 40^{\circ}`)
        propagation_temperature (float, optional): :math:`\gamma_1`.
            (default: :obj:`10.0`)
        num_steps (int, optional): Propagation steps. (default: :obj:`1`)
        activation (str, optional): Activation of the relation head.
            (default: :obj:`"relu"`)
        logit_scale (float, optional): :math:`\gamma_2`.
            (default: :obj:`30.0`)
    """
    def __init__(
        self,
        attribute_dim: int,
        image_channels: int = 2048,
        class_channels: int = 2048,
        hidden_channels: int = 2048,
        num_centroids: int = 3,
        graph: str = 'learned',
        proj_channels: int = 256,
        threshold: float = COS_40_DEGREES,
        propagation_temperature: float = 10.0,
        num_steps: int = 1,
        activation: str = 'relu',
        logit_scale: float = 30.0,
    ):
        super().__init__()
        if graph not in GRAPHS:
            raise ValueError(f"Unknown graph '{graph}' (expected one of "
                             f"{', '.join(GRAPHS)})")
        self.graph = graph
        self.threshold = threshold
        self.logit_scale = logit_scale

        self.encoder = CentroidEncoder(attribute_dim, class_channels,
                                       num_centroids)
        self.conv = None
        if graph != 'none':
            self.conv = APNetConv(class_channels, proj_channels,
                                  temperature=propagation_temperature,
                                  learn_temperature=False,
                                  num_steps=num_steps, proj_init='glorot')
        self.head = RelationHead(class_channels, image_channels,
                                 hidden_channels, activation)

    def reset_parameters(self):
        self.encoder.reset_parameters()
        if self.conv is not None:
            self.conv.reset_parameters()
        self.head.reset_parameters()

    def class_graph(
        self,
        initial_vectors: Tensor,
        prior: Optional[Tuple[Tensor, Tensor]] = None,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        r"""The graph over the classes, :obj:`(edge_index, edge_weight)`,
        from the initial class vectors (:obj:`"learned"`) or the prior
        (:obj:`"wordnet"`)."""
        if self.graph == 'learned':
            with torch.no_grad():  # Thresholding has no gradient.
                edge_index = cosine_threshold_graph(
                    self.conv.lin(initial_vectors), self.threshold,
                    loop=False)
            return edge_index, None
        if self.graph == 'wordnet':
            if prior is None:
                raise ValueError("graph='wordnet' needs the prior graph "
                                 "(edge_index, edge_weight) over the classes")
            return prior
        raise ValueError("graph='none' builds no class graph")

    def class_vectors(
        self,
        attributes: Tensor,
        prior: Optional[Tuple[Tensor, Tensor]] = None,
    ) -> Tensor:
        r"""The propagated class vectors :math:`(C, F_c)` of the classes
        with :obj:`attributes` :math:`(C, A)`."""
        x = self.encoder(attributes)
        if self.conv is None:
            return x
        edge_index, edge_weight = self.class_graph(x, prior)
        return self.conv(x, edge_index, edge_weight)

    def forward(
        self,
        images: Tensor,
        attributes: Tensor,
        prior: Optional[Tuple[Tensor, Tensor]] = None,
    ) -> Tensor:
        r"""Logits :math:`(B, C)` of the :obj:`images` :math:`(B, F_v)`
        over the classes with :obj:`attributes` :math:`(C, A)`; for
        :obj:`graph="wordnet"`, :obj:`prior` is the WordNet graph over
        those classes."""
        class_vectors = self.class_vectors(attributes, prior)
        return self.logit_scale * self.head(class_vectors, images)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(attribute_dim='
                f'{self.encoder.attribute_dim}, graph={self.graph}, '
                f'num_centroids={self.encoder.num_centroids})')
