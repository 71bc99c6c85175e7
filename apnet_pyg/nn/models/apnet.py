from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_geometric.utils import dense_to_sparse

from apnet_pyg.graph.cosine import (
    COS_40_DEGREES,
    check_threshold,
    cosine_threshold_graph,
)
from apnet_pyg.nn.conv.apnet_conv import APNetConv
from apnet_pyg.nn.models.centroid_encoder import CentroidEncoder
from apnet_pyg.nn.models.relation_head import RelationHead
from apnet_pyg.utils import check_number

#: The class graphs of APNet: learned from the class vectors, given by a
#: prior (WordNet), or none (no propagation).
GRAPHS = ('learned', 'wordnet', 'none')


class APNet(torch.nn.Module):
    r"""The zero-shot learning model of `"Attribute Propagation Network for
    Graph Zero-shot Learning" <https://arxiv.org/abs/2009.11816>`_ (APNet).

    For the classes of a task with attribute vectors :math:`\mathbf{s}_y`:

    1. :class:`CentroidEncoder`: :math:`\mathbf{x}^{(0)}_y = \sum_i
       \mathrm{ReLU}(\mathbf{\Theta}_i (\mathbf{s}_y - \mathbf{c}_i) +
       \mathbf{b}_i)` (the paper's equation has no bias
       :math:`\mathbf{b}_i`; the authors' :obj:`nn.Linear` has one);
    2. a graph over the task's classes (:meth:`class_graph`):
       :obj:`"learned"` connects classes with
       :math:`\cos(f(\mathbf{x}^{(0)}_y), f(\mathbf{x}^{(0)}_z)) \geq
       \epsilon` (:math:`f` = :obj:`conv.lin`, :math:`\epsilon = \cos
       40^{\circ}`), :obj:`"wordnet"` takes the task's classes' subgraph of
       :obj:`class_prior` (WordNet hops, weights :math:`1/d`),
       :obj:`"none"` skips propagation;
    3. :class:`~apnet_pyg.nn.APNetConv` propagates the class vectors
       (temperature :math:`\gamma_1`);
    4. :class:`RelationHead` scores every image against every class
       (:meth:`scores`); the logits are the scores times :math:`\gamma_2`
       (:obj:`logit_scale`), for a softmax over the task's classes.

    The model owns its class graph: a task's classes are given by their
    attribute rows and, for :obj:`"wordnet"`, their indices into
    :obj:`class_prior` (a buffer, saved with the model).

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
        score (str, optional): The head's score function, :obj:`"sigmoid"`
            or :obj:`"linear"` (see :class:`RelationHead`).
            (default: :obj:`"sigmoid"`)
        logit_scale (float, optional): :math:`\gamma_2`.
            (default: :obj:`30.0`)
        class_prior (torch.Tensor, optional): For :obj:`graph="wordnet"`,
            the prior graph over all :math:`C` classes of the dataset as a
            dense :math:`(C, C)` matrix of weights, row = target class,
            column = source class, :math:`0` = no edge.
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
        score: str = 'sigmoid',
        logit_scale: float = 30.0,
        class_prior: Optional[Tensor] = None,
    ):
        super().__init__()
        if graph not in GRAPHS:
            raise ValueError(f"'graph' must be one of {', '.join(GRAPHS)} "
                             f"(got '{graph}')")
        if graph == 'wordnet':
            if class_prior is None:
                raise ValueError("graph='wordnet' needs 'class_prior', the "
                                 "[C, C] prior graph over the dataset's "
                                 "classes (see apnet_pyg.zsl."
                                 "wordnet_class_prior)")
            self.register_buffer('class_prior',
                                 _checked_class_prior(class_prior))
        else:
            self.class_prior = None
        self.graph = graph
        self.threshold = check_threshold(threshold)
        check_number(propagation_temperature, 'propagation_temperature',
                     minimum=0.0)
        self.logit_scale = check_number(logit_scale, 'logit_scale')
        if not self.logit_scale > 0:
            raise ValueError(f"'logit_scale' must be positive (got "
                             f"{logit_scale:g}): the logits would not "
                             f"depend on the scores")

        self.encoder = CentroidEncoder(attribute_dim, class_channels,
                                       num_centroids)
        self.conv = None
        if graph != 'none':
            self.conv = APNetConv(class_channels, proj_channels,
                                  temperature=propagation_temperature,
                                  learn_temperature=False,
                                  num_steps=num_steps, proj_init='glorot')
        self.head = RelationHead(class_channels, image_channels,
                                 hidden_channels, score)

    def reset_parameters(self):
        self.encoder.reset_parameters()
        if self.conv is not None:
            self.conv.reset_parameters()
        self.head.reset_parameters()

    @torch.no_grad()
    def standardize_(self, seen_attributes: Tensor) -> None:
        r"""Data-dependent initialisation from the training classes'
        attributes :math:`(C_{seen}, A)`, after
        :meth:`CentroidEncoder.fit_centroids`: the encoder's experts are
        scaled to unit pre-activation spread over these classes
        (:meth:`CentroidEncoder.standardize_`) and the head's output layer
        is zeroed, so that every score starts at :math:`\sigma(0)`. With
        PyTorch's default initialisation and raw percentage attributes, the
        head's class term is about 25 times its image term and a sigmoid
        score starts saturated, where it has no gradient."""
        self.encoder.standardize_(seen_attributes)
        self.head.lin_out.weight.zero_()
        self.head.lin_out.bias.zero_()

    def class_graph(
        self,
        initial_vectors: Tensor,
        classes: Optional[Tensor] = None,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        r"""The graph over a task's classes, :obj:`(edge_index,
        edge_weight)`: from their initial class vectors :math:`(C_t, F_c)`
        (:obj:`"learned"`), or the subgraph of :obj:`class_prior` over
        :obj:`classes`, their indices in the dataset (:obj:`"wordnet"`)."""
        if self.graph == 'learned':
            with torch.no_grad():  # Thresholding has no gradient.
                edge_index = cosine_threshold_graph(
                    self.conv.lin(initial_vectors), self.threshold,
                    loop=False)
            return edge_index, None
        if self.graph == 'wordnet':
            if classes is None:
                raise ValueError("graph='wordnet' needs 'classes', the "
                                 "task's class indices into 'class_prior'")
            if classes.numel() != initial_vectors.size(0):
                raise ValueError(f"'classes' must hold one index per class "
                                 f"vector (got {classes.numel()} for "
                                 f"{initial_vectors.size(0)})")
            classes = classes.to(self.class_prior.device)
            # Rows are targets, columns sources.
            index, weight = dense_to_sparse(
                self.class_prior[classes][:, classes])
            return index.flip(0), weight.to(initial_vectors.dtype)
        raise ValueError("graph='none' builds no class graph")

    def class_vectors(self, attributes: Tensor,
                      classes: Optional[Tensor] = None) -> Tensor:
        r"""The propagated class vectors :math:`(C_t, F_c)` of a task's
        classes with :obj:`attributes` :math:`(C_t, A)` (and, for
        :obj:`"wordnet"`, dataset indices :obj:`classes`), the class graph
        built over exactly these classes."""
        x = self.encoder(attributes)
        if self.conv is None:
            return x
        edge_index, edge_weight = self.class_graph(x, classes)
        return self.conv(x, edge_index, edge_weight)

    def scores(self, class_vectors: Tensor, images: Tensor) -> Tensor:
        r"""The head's scores :math:`h` :math:`(B, C_t)` of :obj:`images`
        :math:`(B, F_v)` against :obj:`class_vectors`; the logits are
        :obj:`logit_scale` times these."""
        return self.head(class_vectors, images)

    def forward(self, images: Tensor, attributes: Tensor,
                classes: Optional[Tensor] = None) -> Tensor:
        r"""Logits :math:`(B, C_t)` of the :obj:`images` :math:`(B, F_v)`
        over a task's classes with :obj:`attributes` :math:`(C_t, A)` and,
        for :obj:`"wordnet"`, dataset indices :obj:`classes`."""
        vectors = self.class_vectors(attributes, classes)
        return self.logit_scale * self.scores(vectors, images)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(attribute_dim='
                f'{self.encoder.attribute_dim}, graph={self.graph}, '
                f'num_centroids={self.encoder.num_centroids}, '
                f'score={self.head.score})')


def _checked_class_prior(class_prior: Tensor) -> Tensor:
    r"""A float copy of :obj:`class_prior`, checked to be a square matrix
    of finite, non-negative weights (read once, at construction)."""
    if not isinstance(class_prior, Tensor):
        raise ValueError(f"'class_prior' must be a torch.Tensor (got "
                         f"{type(class_prior).__name__})")
    if class_prior.dim() != 2 or class_prior.size(0) != class_prior.size(1):
        raise ValueError(f"'class_prior' must be a square [C, C] matrix "
                         f"(got {tuple(class_prior.shape)})")
    class_prior = class_prior.float().clone()
    if not bool(torch.isfinite(class_prior).all()) or \
            bool((class_prior < 0).any()):
        raise ValueError("'class_prior' must hold finite, non-negative "
                         "weights (0 = no edge)")
    return class_prior
