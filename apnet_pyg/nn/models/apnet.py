from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric import is_compiling
from torch_geometric.utils import dense_to_sparse

from apnet_pyg.checks import (
    check_bool,
    check_int,
    check_number,
    check_temperature,
)
from apnet_pyg.graph.cosine import (
    COS_40_DEGREES,
    check_threshold,
    cosine_knn_adjacency,
    cosine_knn_graph,
    cosine_threshold_adjacency,
    cosine_threshold_graph,
)
from apnet_pyg.nn.conv.apnet_conv import APNetConv
from apnet_pyg.nn.dense.dense_apnet_conv import DenseAPNetConv
from apnet_pyg.nn.models.centroid_encoder import CentroidEncoder
from apnet_pyg.nn.models.relation_head import RelationHead

#: The class graphs of APNet: learned from the class vectors, given by a
#: prior (WordNet), the k nearest neighbours of each class (DBiGCN's), or
#: none (no propagation).
GRAPHS = ('learned', 'wordnet', 'knn', 'none')

#: Where the k-NN class graph measures its cosines: between the class
#: descriptions as given (:obj:`"descriptions"`, fixed) or between the
#: encoded class vectors :math:`\mathbf{x}^{(0)}` (:obj:`"encoded"`,
#: trained with the encoder).
KNN_SPACES = ('descriptions', 'encoded')

#: Over which classes the k-NN class graph is built: the task's own
#: (:obj:`"task"`, as every other class graph), or every class of the
#: dataset (:obj:`"all"`, DBiGCN's), the task's vectors then read from the
#: propagation over all of them, so that an unseen class is composed from
#: the seen classes it resembles. :obj:`"all"` reads every class's
#: description (never a label) in training.
KNN_CLASSES = ('task', 'all')

#: The most classes a task may have for APNet to propagate over the dense
#: form of its class graph (:func:`use_dense_class_graph`): a
#: :math:`(C, C)` adjacency and :class:`~apnet_pyg.nn.DenseAPNetConv`,
#: static shapes without a host synchronisation, so that a training step
#: compiles and captures whole. Larger tasks use the sparse form (an edge
#: list and :class:`~apnet_pyg.nn.APNetConv`), whose memory grows with the
#: edges rather than with :math:`C^2`. 1024 covers every class set of the
#: xlsa17 benchmark (SUN: 717 classes); a :math:`1024 \times 1024` float32
#: matrix is 4 MB.
DENSE_CLASS_GRAPH_MAX_CLASSES = 1024


def use_dense_class_graph(
    num_classes: int, device: Union[str, torch.device], sync_free: bool = False
) -> bool:
    r"""Whether :class:`APNet` propagates a task of :obj:`num_classes`
    classes on :obj:`device` over the dense form of its class graph (the
    one place of this rule): for at most
    :data:`DENSE_CLASS_GRAPH_MAX_CLASSES` classes, where a host
    synchronisation costs, i.e. off the CPU, under :func:`torch.compile`,
    or when :obj:`sync_free` asks for it. On the CPU otherwise, the sparse
    form: both compute the same propagation, but to rounding only (the
    order of the sums differs), which training amplifies, and the sparse
    form keeps the results of the versions before the dense one bit for
    bit."""
    return num_classes <= DENSE_CLASS_GRAPH_MAX_CLASSES and (
        sync_free or torch.device(device).type != 'cpu' or is_compiling()
    )


def check_logit_scale(value: Any) -> float:
    r"""The scale of the logits as a positive float: the one check of it,
    for :class:`APNet` and the ZSL application's configuration."""
    value = check_number(value, 'logit_scale')
    if not value > 0:
        raise ValueError(
            f"'logit_scale' must be positive (got {value:g}): "
            f'the logits would not depend on the scores'
        )
    return value


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
       :obj:`"knn"` joins every class to its :obj:`knn_k` nearest classes
       by cosine (DBiGCN's class graph, Yue et al., KDD 2022: binary, no
       self-loop unless :obj:`knn_loop`), between the descriptions or the
       encoded vectors (:obj:`knn_space`), over the task's classes or
       every class of the dataset (:obj:`knn_classes`; see
       :data:`KNN_CLASSES`), :obj:`"none"` skips propagation;
    3. :class:`~apnet_pyg.nn.APNetConv` propagates the class vectors
       (temperature :math:`\gamma_1`), or
       :class:`~apnet_pyg.nn.DenseAPNetConv`, the same layer with the same
       parameters, over the dense form of the graph
       (:meth:`dense_class_graph`; which one: :func:`use_dense_class_graph`);
    4. :class:`RelationHead` scores every image against every class
       (:meth:`scores`); the logits are the scores times :math:`\gamma_2`
       (:obj:`logit_scale`), for a softmax over the task's classes.

    The model owns its class graph: a task's classes are given by their
    attribute rows and, for :obj:`"wordnet"` and :obj:`"knn"`, their
    indices into :obj:`class_prior` or :obj:`class_attributes` (buffers,
    saved with the model).

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
        graph (str, optional): :obj:`"learned"`, :obj:`"wordnet"`,
            :obj:`"knn"` or :obj:`"none"`. (default: :obj:`"learned"`)
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
        interaction (str, optional): How the head joins a class vector and
            an image, :obj:`"additive"` (the paper) or
            :obj:`"multiplicative"` (see :class:`RelationHead`).
            (default: :obj:`"additive"`)
        logit_scale (float, optional): :math:`\gamma_2`.
            (default: :obj:`30.0`)
        class_prior (torch.Tensor, optional): For :obj:`graph="wordnet"`,
            the prior graph over all :math:`C` classes of the dataset as a
            dense :math:`(C, C)` matrix of weights, row = target class,
            column = source class, :math:`0` = no edge.
        knn_k (int, optional): For :obj:`graph="knn"`, the neighbours of
            each class (DBiGCN: 2). (default: :obj:`2`)
        knn_loop (bool, optional): For :obj:`graph="knn"`, keep each
            class's own vector in its propagation (a self-loop).
            (default: :obj:`False`)
        knn_space (str, optional): For :obj:`graph="knn"`, one of
            :data:`KNN_SPACES`. (default: :obj:`"descriptions"`)
        knn_classes (str, optional): For :obj:`graph="knn"`, one of
            :data:`KNN_CLASSES`. (default: :obj:`"task"`)
        learn_propagation_temperature (bool, optional): Train
            :math:`\gamma_1` (from :obj:`propagation_temperature`).
            (default: :obj:`False`)
        class_attributes (torch.Tensor, optional): For :obj:`graph="knn"`,
            the attribute rows :math:`(C, A)` of all the dataset's classes,
            by class id (a task's classes are given by their ids). Without
            it the model holds an empty placeholder, which loading a saved
            model fills.
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
        interaction: str = 'additive',
        logit_scale: float = 30.0,
        class_prior: Optional[Tensor] = None,
        knn_k: int = 2,
        knn_loop: bool = False,
        knn_space: str = 'descriptions',
        knn_classes: str = 'task',
        learn_propagation_temperature: bool = False,
        class_attributes: Optional[Tensor] = None,
    ):
        super().__init__()
        if graph not in GRAPHS:
            raise ValueError(
                f"'graph' must be one of {', '.join(GRAPHS)} (got '{graph}')"
            )
        if graph == 'wordnet':
            if class_prior is None:
                raise ValueError(
                    "graph='wordnet' needs 'class_prior', the "
                    "[C, C] prior graph over the dataset's "
                    'classes (see apnet_pyg.zsl.'
                    'wordnet_class_prior)'
                )
            self.register_buffer(
                'class_prior', _checked_class_prior(class_prior)
            )
        else:
            self.class_prior = None
        self.knn_k = check_int(knn_k, 'knn_k', minimum=1)
        self.knn_loop = check_bool(knn_loop, 'knn_loop')
        for name, value, choices in (
            ('knn_space', knn_space, KNN_SPACES),
            ('knn_classes', knn_classes, KNN_CLASSES),
        ):
            if value not in choices:
                raise ValueError(
                    f"'{name}' must be one of {', '.join(choices)} "
                    f'(got {value!r})'
                )
        self.knn_space, self.knn_classes = knn_space, knn_classes
        check_bool(
            learn_propagation_temperature, 'learn_propagation_temperature'
        )
        if graph == 'knn':
            self.register_buffer(
                'class_attributes',
                _checked_class_attributes(class_attributes, attribute_dim),
            )
        else:
            self.class_attributes = None
        self.graph = graph
        self.threshold = check_threshold(threshold)
        check_temperature(propagation_temperature, 'propagation_temperature')
        self.logit_scale = check_logit_scale(logit_scale)

        self.encoder = CentroidEncoder(
            attribute_dim, class_channels, num_centroids
        )
        self.conv = None
        dense_conv = None
        if graph != 'none':
            self.conv = APNetConv(
                class_channels,
                proj_channels,
                temperature=propagation_temperature,
                learn_temperature=learn_propagation_temperature,
                # The k-NN graph's classes are composed from their
                # neighbours alone unless knn_loop (DBiGCN).
                add_self_loops=graph != 'knn' or knn_loop,
                num_steps=num_steps,
                learn_step_weights=False,
                teleport=None,
                proj_init='glorot',
            )
            # Its initialisation must not draw from the global RNG, which
            # initialises the model: the head would start elsewhere.
            with torch.random.fork_rng(devices=[]):
                dense_conv = DenseAPNetConv(
                    class_channels,
                    proj_channels,
                    temperature=propagation_temperature,
                    learn_temperature=learn_propagation_temperature,
                    num_steps=num_steps,
                    learn_step_weights=False,
                    teleport=None,
                    proj_init='glorot',
                )
        # The dense form of conv, sharing its projection and temperature:
        # not a submodule, so that the state_dict holds them once.
        object.__setattr__(self, '_dense_conv', dense_conv)
        self._tie_dense_conv()
        self.register_load_state_dict_post_hook(_tie_after_loading)
        self.head = RelationHead(
            class_channels, image_channels, hidden_channels, score, interaction
        )

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # The k-NN graph's class table has the saved dataset's size, which
        # a placeholder built without it (0 rows) takes before loading.
        key = prefix + 'class_attributes'
        if self.graph == 'knn' and key in state_dict:
            saved = state_dict[key]
            if saved.dim() == 2 and saved.size(1) == (
                self.class_attributes.size(1)
            ):
                self.class_attributes = self.class_attributes.new_empty(
                    saved.shape
                )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _tie_dense_conv(self) -> None:
        r"""Points the dense layer at :obj:`conv`'s projection and
        temperature again, after a conversion (:meth:`to`, :meth:`half`)
        or a load with :obj:`assign=True` replaced a tensor."""
        dense = self._dense_conv
        if dense is None:
            return
        if dense.lin is not self.conv.lin:
            dense.lin = self.conv.lin
        if dense.temperature is not self.conv.temperature:
            dense.temperature = self.conv.temperature

    def _apply(self, fn: Any, recurse: bool = True) -> 'APNet':
        module = super()._apply(fn, recurse)
        self._tie_dense_conv()
        return module

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
        (:obj:`"learned"`), the subgraph of :obj:`class_prior` over
        :obj:`classes`, their indices in the dataset (:obj:`"wordnet"`), or
        every class's :obj:`knn_k` nearest among them, edges from the
        neighbours to the class (:obj:`"knn"`: cosines between
        :obj:`class_attributes` over :obj:`classes`, or between the initial
        vectors, by :obj:`knn_space`; self-loops, if :obj:`knn_loop`, are
        the layer's)."""
        if self.graph == 'learned':
            with torch.no_grad():  # Thresholding has no gradient.
                edge_index = cosine_threshold_graph(
                    self.conv.lin(initial_vectors), self.threshold, loop=False
                )
            return edge_index, None
        if self.graph == 'wordnet':
            classes = self._prior_classes(initial_vectors, classes)
            # Rows are targets, columns sources.
            index, weight = dense_to_sparse(
                self.class_prior[classes][:, classes]
            )
            return index.flip(0), weight.to(initial_vectors.dtype)
        if self.graph == 'knn':
            with torch.no_grad():  # Choosing neighbours has no gradient.
                edge_index = cosine_knn_graph(
                    self._knn_space(initial_vectors, classes),
                    self.knn_k,
                    loop=False,
                )
            return edge_index, None
        raise ValueError("graph='none' builds no class graph")

    def dense_class_graph(
        self,
        initial_vectors: Tensor,
        classes: Optional[Tensor] = None,
    ) -> Tensor:
        r"""The graph of :meth:`class_graph` as a dense adjacency
        :math:`(C_t, C_t)`, row = target class (as
        :class:`~apnet_pyg.nn.DenseAPNetConv` reads it): for
        :obj:`"learned"` the boolean mask of the same edges (the cosine
        rule and tolerance of
        :func:`~apnet_pyg.graph.cosine_threshold_graph`, each pair decided
        once, no self-loops), for :obj:`"wordnet"` the prior's weights over
        :obj:`classes`, for :obj:`"knn"` the boolean mask of each class's
        nearest (:func:`~apnet_pyg.graph.cosine.cosine_knn_adjacency`).
        Static shapes, no host synchronisation."""
        if self.graph == 'learned':
            with torch.no_grad():  # Thresholding has no gradient.
                return cosine_threshold_adjacency(
                    self.conv.lin(initial_vectors), self.threshold
                )
        if self.graph == 'wordnet':
            classes = self._prior_classes(initial_vectors, classes)
            prior = self.class_prior.index_select(0, classes)
            return prior.index_select(1, classes).to(initial_vectors.dtype)
        if self.graph == 'knn':
            with torch.no_grad():  # Choosing neighbours has no gradient.
                return cosine_knn_adjacency(
                    self._knn_space(initial_vectors, classes), self.knn_k
                )
        raise ValueError("graph='none' builds no class graph")

    def _prior_classes(
        self, initial_vectors: Tensor, classes: Optional[Tensor]
    ) -> Tensor:
        table = (
            'class_prior' if self.graph == 'wordnet' else 'class_attributes'
        )
        if classes is None:
            raise ValueError(
                f"graph='{self.graph}' needs 'classes', the "
                f"task's class indices into '{table}'"
            )
        if classes.numel() != initial_vectors.size(0):
            raise ValueError(
                f"'classes' must hold one index per class "
                f'vector (got {classes.numel()} for '
                f'{initial_vectors.size(0)})'
            )
        return classes.to(getattr(self, table).device)

    def _knn_space(
        self, initial_vectors: Tensor, classes: Optional[Tensor]
    ) -> Tensor:
        # The rows whose cosines choose the k-NN graph's neighbours.
        if self.knn_space == 'encoded':
            return initial_vectors
        classes = self._prior_classes(initial_vectors, classes)
        return self._every_class_attributes().index_select(0, classes)

    def _every_class_attributes(self) -> Tensor:
        if self.class_attributes.size(0) == 0:
            raise ValueError(
                "graph='knn' needs 'class_attributes', the attribute "
                "rows of all the dataset's classes (apnet_pyg.zsl."
                'build_model gives them)'
            )
        return self.class_attributes

    def class_vectors(
        self,
        attributes: Tensor,
        classes: Optional[Tensor] = None,
        *,
        dense: Optional[bool] = None,
        check_values: bool = True,
    ) -> Tensor:
        r"""The propagated class vectors :math:`(C_t, F_c)` of a task's
        classes with :obj:`attributes` :math:`(C_t, A)` (and, for
        :obj:`"wordnet"`, dataset indices :obj:`classes`), the class graph
        built over exactly these classes, in its dense form if
        :obj:`dense` (default: :func:`use_dense_class_graph`).
        :obj:`check_values=False` skips the check that the attributes are
        finite, which reads them on the host (a synchronisation on a GPU,
        a graph break under :func:`torch.compile`), for a caller that
        checked them once."""
        task = None
        if self.graph == 'knn' and self.knn_classes == 'all':
            # Propagated over every class, then the task's rows read.
            task = self._prior_classes(attributes, classes)
            attributes = self._every_class_attributes()
            classes = torch.arange(attributes.size(0), device=task.device)
        x = self.encoder(attributes, check_values=check_values)
        if self.conv is None:
            return x
        if dense is None:
            dense = use_dense_class_graph(x.size(0), x.device)
        if dense:
            adjacency = self.dense_class_graph(x, classes)
            x = self._dense_conv(
                x, adjacency, add_loop=self.conv.add_self_loops
            ).squeeze(0)
        else:
            edge_index, edge_weight = self.class_graph(x, classes)
            x = self.conv(x, edge_index, edge_weight)
        return x if task is None else x.index_select(0, task.to(x.device))

    def scores(
        self, class_vectors: Tensor, images: Tensor, check_values: bool = True
    ) -> Tensor:
        r"""The head's scores :math:`h` :math:`(B, C_t)` of :obj:`images`
        :math:`(B, F_v)` against :obj:`class_vectors`; the logits are
        :obj:`logit_scale` times these. :obj:`check_values`: see
        :meth:`class_vectors`."""
        return self.head(class_vectors, images, check_values=check_values)

    def logits(self, scores: Tensor) -> Tensor:
        r"""The logits of the head's :meth:`scores`: :obj:`logit_scale`
        times them (the one place the scale is applied; evaluation, which
        projects each image once, calls it too)."""
        return self.logit_scale * scores

    def forward(
        self,
        images: Tensor,
        attributes: Tensor,
        classes: Optional[Tensor] = None,
        *,
        dense: Optional[bool] = None,
        check_values: bool = True,
    ) -> Tensor:
        r"""Logits :math:`(B, C_t)` of the :obj:`images` :math:`(B, F_v)`
        over a task's classes with :obj:`attributes` :math:`(C_t, A)` and,
        for :obj:`"wordnet"`, dataset indices :obj:`classes`.
        :obj:`dense` and :obj:`check_values`: see :meth:`class_vectors`
        (the values of both inputs are checked or not)."""
        vectors = self.class_vectors(
            attributes, classes, dense=dense, check_values=check_values
        )
        return self.logits(
            self.scores(vectors, images, check_values=check_values)
        )

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}(attribute_dim='
            f'{self.encoder.attribute_dim}, graph={self.graph}, '
            f'num_centroids={self.encoder.num_centroids}, '
            f'score={self.head.score})'
        )


def _tie_after_loading(model: APNet, incompatible_keys: Any) -> None:
    model._tie_dense_conv()


def _checked_class_attributes(
    class_attributes: Optional[Tensor], attribute_dim: int
) -> Tensor:
    r"""A float copy of :obj:`class_attributes` :math:`(C, A)`, checked
    (read once, at construction), or an empty :math:`(0, A)` placeholder
    for a model that a saved state will fill."""
    if class_attributes is None:
        return torch.zeros(0, attribute_dim)
    if not isinstance(class_attributes, Tensor):
        raise ValueError(
            f"'class_attributes' must be a torch.Tensor (got "
            f'{type(class_attributes).__name__})'
        )
    if class_attributes.dim() != 2 or class_attributes.size(1) != (
        attribute_dim
    ):
        raise ValueError(
            f"'class_attributes' must be a [C, {attribute_dim}] "
            f'matrix (got {tuple(class_attributes.shape)})'
        )
    class_attributes = class_attributes.float().clone()
    if not bool(torch.isfinite(class_attributes).all()):
        raise ValueError("'class_attributes' must be finite")
    return class_attributes


def _checked_class_prior(class_prior: Tensor) -> Tensor:
    r"""A float copy of :obj:`class_prior`, checked to be a square matrix
    of finite, non-negative weights (read once, at construction)."""
    if not isinstance(class_prior, Tensor):
        raise ValueError(
            f"'class_prior' must be a torch.Tensor (got "
            f'{type(class_prior).__name__})'
        )
    if class_prior.dim() != 2 or class_prior.size(0) != class_prior.size(1):
        raise ValueError(
            f"'class_prior' must be a square [C, C] matrix "
            f'(got {tuple(class_prior.shape)})'
        )
    class_prior = class_prior.float().clone()
    if not bool(torch.isfinite(class_prior).all()) or bool(
        (class_prior < 0).any()
    ):
        raise ValueError(
            "'class_prior' must hold finite, non-negative "
            'weights (0 = no edge)'
        )
    return class_prior
