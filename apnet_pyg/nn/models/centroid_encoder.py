import math
from typing import Optional

import torch
from torch import Tensor
from torch.nn import Parameter

from apnet_pyg.checks import check_features, check_int, check_node_features


def kmeans(
    x: Tensor,
    k: int,
    num_iterations: int = 100,
    generator: Optional[torch.Generator] = None,
    num_init: int = 10,
) -> Tensor:
    r"""Lloyd's :math:`k`-means with :math:`k`-means++ seeding, the best of
    :obj:`num_init` seedings by inertia (as scikit-learn's classic
    :obj:`KMeans`, which the APNet authors used), deterministic for a given
    :obj:`generator`.

    Args:
        x (torch.Tensor): Points :math:`(N, D)`.
        k (int): Number of centroids, :math:`1 \leq k \leq N`.
        num_iterations (int, optional): Maximum Lloyd iterations per
            seeding (it stops earlier once the assignment no longer
            changes). (default: :obj:`100`)
        generator (torch.Generator, optional): Randomness of the seeding.
        num_init (int, optional): Number of seedings. (default: :obj:`10`)

    :rtype: :class:`torch.Tensor` of shape :math:`(k, D)`, of the dtype of
        :obj:`x`
    """
    check_node_features(x, 'x')
    check_int(k, 'k')
    if not 1 <= k <= x.size(0):
        raise ValueError(
            f"'k' must lie in [1, {x.size(0)}] for "
            f'{x.size(0)} points (got {k})'
        )
    check_int(num_iterations, 'num_iterations', minimum=1)
    check_int(num_init, 'num_init', minimum=1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(
            f"'generator' must be a torch.Generator or None "
            f'(got {type(generator).__name__})'
        )
    dtype = x.dtype
    x = x.detach().double()  # Stable distances; cast back at the end.
    best, best_inertia = None, float('inf')
    for _ in range(num_init):
        centroids = _lloyd(
            x, _kmeans_plus_plus(x, k, generator), num_iterations
        )
        inertia = float(
            torch.cdist(x, centroids).min(dim=1).values.square().sum()
        )
        if inertia < best_inertia:
            best, best_inertia = centroids, inertia
    return best.to(dtype)


def _kmeans_plus_plus(
    x: Tensor, k: int, generator: Optional[torch.Generator]
) -> Tensor:
    first = int(torch.randint(x.size(0), (1,), generator=generator))
    centroids = x[first : first + 1].clone()  # Lloyd updates it in place.
    for _ in range(1, k):  # Far points are likelier seeds.
        distance = torch.cdist(x, centroids).min(dim=1).values.square()
        if float(distance.sum()) == 0.0:  # All points coincide with seeds.
            index = int(torch.randint(x.size(0), (1,), generator=generator))
        else:
            index = int(torch.multinomial(distance, 1, generator=generator))
        centroids = torch.cat([centroids, x[index : index + 1]])
    return centroids


def _lloyd(x: Tensor, centroids: Tensor, num_iterations: int) -> Tensor:
    assignment = None
    for _ in range(num_iterations):
        new_assignment = torch.cdist(x, centroids).argmin(dim=1)
        if assignment is not None and torch.equal(new_assignment, assignment):
            break
        assignment = new_assignment
        for cluster in range(centroids.size(0)):
            members = assignment == cluster
            if bool(members.any()):  # An empty cluster keeps its centroid.
                centroids[cluster] = x[members].mean(dim=0)
    return centroids


class CentroidEncoder(torch.nn.Module):
    r"""The class-vector encoder of APNet (`"Attribute Propagation Network
    for Graph Zero-shot Learning" <https://arxiv.org/abs/2009.11816>`_):
    :math:`k` linear experts, each reading the attribute vector relative to
    one centroid of the seen classes' attributes,

    .. math::
        \mathbf{x}^{(0)}_y = \sum_{i=1}^{k} \mathrm{ReLU}\left(
        \mathbf{\Theta}_i (\mathbf{s}_y - \mathbf{c}_i) + \mathbf{b}_i
        \right),

    with :math:`\mathbf{c}_1, \dots, \mathbf{c}_k` the :math:`k`-means
    centroids of the seen classes' attribute vectors (a buffer, set by
    :meth:`fit_centroids`). All experts run as one matrix product.

    Args:
        attribute_dim (int): Size of the attribute vectors :math:`A`.
        out_channels (int, optional): Size of the class vectors.
            (default: :obj:`2048`)
        num_centroids (int, optional): Number of experts :math:`k` (3 for
            AWA in the paper). (default: :obj:`3`)

    Shapes:
        - **input:** attributes :math:`(C, A)`
        - **output:** class vectors :math:`(C, F_{out})`
    """

    def __init__(
        self,
        attribute_dim: int,
        out_channels: int = 2048,
        num_centroids: int = 3,
    ):
        super().__init__()
        check_int(attribute_dim, 'attribute_dim', minimum=1)
        check_int(out_channels, 'out_channels', minimum=1)
        check_int(num_centroids, 'num_centroids', minimum=1)
        self.attribute_dim = attribute_dim
        self.out_channels = out_channels
        self.num_centroids = num_centroids

        self.weight = Parameter(
            torch.empty(num_centroids * out_channels, attribute_dim)
        )
        self.bias = Parameter(torch.empty(num_centroids * out_channels))
        self.register_buffer(
            'centroids', torch.zeros(num_centroids, attribute_dim)
        )
        self.reset_parameters()

    def reset_parameters(self):
        # torch.nn.Linear's initialisation, expert by expert.
        bound = 1.0 / math.sqrt(self.attribute_dim)
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        torch.nn.init.uniform_(self.bias, -bound, bound)

    @torch.no_grad()
    def fit_centroids(
        self,
        seen_attributes: Tensor,
        generator: Optional[torch.Generator] = None,
    ) -> Tensor:
        r"""Sets the centroids to the :math:`k`-means centroids of
        :obj:`seen_attributes` :math:`(C_{seen}, A)` and returns them."""
        check_node_features(
            seen_attributes, 'seen_attributes', channels=self.attribute_dim
        )
        centroids = kmeans(
            seen_attributes, self.num_centroids, generator=generator
        )
        self.centroids.copy_(centroids)
        return self.centroids

    @torch.no_grad()
    def standardize_(self, seen_attributes: Tensor) -> None:
        r"""Scales each expert unit's weights so that its pre-activation
        :math:`\boldsymbol{\theta}^{\top} (\mathbf{s}_y - \mathbf{c}_i)` has
        unit standard deviation over :obj:`seen_attributes`
        :math:`(C_{seen}, A)`: a data-dependent initialisation (as LSUV,
        Mishkin & Matas, ICLR 2016) that makes the class vectors'
        magnitude independent of the attributes' units (raw percentages or
        unit-norm rows). Call it after :meth:`fit_centroids`."""
        check_node_features(
            seen_attributes, 'seen_attributes', channels=self.attribute_dim
        )
        if seen_attributes.size(0) < 2:
            raise ValueError(
                "'seen_attributes' needs at least 2 classes to "
                'measure a spread'
            )
        k, out = self.num_centroids, self.out_channels
        weight = self.weight.view(k, out, self.attribute_dim)
        offsets = seen_attributes.to(weight.dtype).unsqueeze(
            1
        ) - self.centroids.to(weight.dtype).unsqueeze(0)  # [C, k, A]
        spread = torch.einsum('koa,cka->cko', weight, offsets).std(dim=0)
        weight.div_(spread.clamp_min(1e-12).unsqueeze(-1))

    def forward(self, attributes: Tensor, check_values: bool = True) -> Tensor:
        r""":obj:`check_values=False` skips the check that the attributes
        are finite, which reads them on the host (a synchronisation on a
        GPU, a graph break under :func:`torch.compile`), for a caller that
        checked them once."""
        check = check_node_features if check_values else check_features
        check(attributes, 'attributes', channels=self.attribute_dim)
        k, out = self.num_centroids, self.out_channels
        # Theta_i (s - c_i) + b_i = Theta_i s + (b_i - Theta_i c_i).
        weight = self.weight.view(k, out, self.attribute_dim)
        shift = self.bias.view(k, out) - torch.einsum(
            'koa,ka->ko', weight, self.centroids.to(weight.dtype)
        )
        hidden = attributes @ self.weight.t() + shift.view(-1)
        return hidden.view(-1, k, out).relu().sum(dim=1)

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.attribute_dim}, '
            f'{self.out_channels}, num_centroids={self.num_centroids})'
        )
