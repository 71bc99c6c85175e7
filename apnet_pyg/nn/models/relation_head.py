from typing import Optional

import torch
from torch import Tensor
from torch_geometric.nn.dense.linear import Linear

from apnet_pyg.checks import check_features, check_int, check_node_features

#: The score functions :math:`\sigma` of the head's output.
SCORES = ('sigmoid', 'linear')
#: How the head joins a class vector and an image feature: summed before
#: the activation (the paper), or the activated image term weighting the
#: class term (a bilinear form, no per-class offset).
INTERACTIONS = ('additive', 'multiplicative')

# Pair activations computed at once (128 MB in float32): bounds the memory of
# scoring many images against many classes.
_PAIR_BLOCK_ELEMENTS = 1 << 25


class RelationHead(torch.nn.Module):
    r"""The parametric nearest-neighbour head of APNet, scoring every image
    against every class,

    .. math::
        h(\mathbf{x}_y, \mathbf{v}) = \sigma\left(\mathbf{w}^{\top}
        \mathrm{ReLU}\left(\mathbf{W}_1 \mathbf{x}_y + \mathbf{W}_2
        \mathbf{v} + \mathbf{b}_1 \right) + b\right),

    for class vector :math:`\mathbf{x}_y` and image feature
    :math:`\mathbf{v}`, or with :obj:`interaction="multiplicative"`

    .. math::
        h(\mathbf{x}_y, \mathbf{v}) = \sigma\left(\mathbf{w}^{\top}
        \left(\mathbf{W}_1 \mathbf{x}_y \odot \mathrm{ReLU}\left(
        \mathbf{W}_2 \mathbf{v} + \mathbf{b}_1 \right)\right) + b\right),

    a bilinear form with no term of the class alone. With
    :obj:`score="sigmoid"`, :math:`\sigma` is the logistic function and
    :math:`h \in (0, 1)`: the paper's reading ("All
    nonlinear functions were ReLU except for :math:`\sigma`, which was
    implemented using Sigmoid to map the result between 0 and 1", Liu et
    al., AAAI 2020, Implementation Details). With :obj:`score="linear"`,
    :math:`\sigma` is the identity and :math:`h` is unbounded: the authors'
    public code (:obj:`fc(ReLU(x W_img + a W_sem + b))`).

    :math:`\mathbf{W}_1 \mathbf{x}_y` is computed once per class and
    :math:`\mathbf{W}_2 \mathbf{v} + \mathbf{b}_1` once per image; only the
    sum, the activation and the product with :math:`\mathbf{w}` are per pair
    (in blocks of images, so memory stays bounded).

    Args:
        class_channels (int): Size of the class vectors.
        image_channels (int): Size of the image features.
        hidden_channels (int, optional): Size of the hidden layer.
            (default: :obj:`2048`)
        score (str, optional): :obj:`"sigmoid"` (bounded, the paper) or
            :obj:`"linear"` (unbounded, the authors' code).
            (default: :obj:`"sigmoid"`)
        interaction (str, optional): :obj:`"additive"` (the paper) or
            :obj:`"multiplicative"`. (default: :obj:`"additive"`)

    Shapes:
        - **input:** class vectors :math:`(C, F_c)`, image features
          :math:`(B, F_v)`
        - **output:** scores :math:`(B, C)`
    """

    def __init__(
        self,
        class_channels: int,
        image_channels: int,
        hidden_channels: int = 2048,
        score: str = 'sigmoid',
        interaction: str = 'additive',
    ):
        super().__init__()
        # PyG's Linear would read 0 or a negative size as lazy.
        check_int(class_channels, 'class_channels', minimum=1)
        check_int(image_channels, 'image_channels', minimum=1)
        check_int(hidden_channels, 'hidden_channels', minimum=1)
        if score not in SCORES:
            raise ValueError(
                f"'score' must be one of {', '.join(SCORES)} (got '{score}')"
            )
        if interaction not in INTERACTIONS:
            raise ValueError(
                f"'interaction' must be one of "
                f'{", ".join(INTERACTIONS)} (got '
                f"'{interaction}')"
            )
        self.class_channels = class_channels
        self.image_channels = image_channels
        self.hidden_channels = hidden_channels
        self.score = score
        self.interaction = interaction

        self.lin_class = Linear(class_channels, hidden_channels, bias=False)
        self.lin_image = Linear(image_channels, hidden_channels, bias=True)
        self.lin_out = Linear(hidden_channels, 1, bias=True)
        self.reset_parameters()

    def reset_parameters(self):
        self.lin_class.reset_parameters()
        self.lin_image.reset_parameters()
        self.lin_out.reset_parameters()

    def forward(
        self,
        class_vectors: Tensor,
        images: Tensor,
        block_size: Optional[int] = None,
        check_values: bool = True,
    ) -> Tensor:
        r""":obj:`check_values=False` skips the check that the inputs are
        finite, which reads them on the host (a synchronisation on a GPU,
        a graph break under :func:`torch.compile`), for a caller that
        checked them once."""
        check = check_node_features if check_values else check_features
        check(class_vectors, 'class_vectors', channels=self.class_channels)
        check(images, 'images', channels=self.image_channels)
        return self.pair_scores(
            self.lin_class(class_vectors), self.lin_image(images), block_size
        )

    def pair_scores(
        self,
        per_class: Tensor,
        per_image: Tensor,
        block_size: Optional[int] = None,
    ) -> Tensor:
        r"""The scores from the projected class vectors
        :math:`\mathbf{W}_1 \mathbf{x}_y` :math:`(C, H)` (:obj:`lin_class`)
        and projected images :math:`\mathbf{W}_2 \mathbf{v} + \mathbf{b}_1`
        :math:`(B, H)` (:obj:`lin_image`): an evaluation that scores the
        same images against several class sets projects them once."""
        check_int(block_size, 'block_size', minimum=1, optional=True)
        w = self.lin_out.weight.view(-1)
        num_classes = per_class.size(0)
        if self.interaction == 'multiplicative':
            # One product: no [B, C, H] tensor to bound.
            out = (per_image.relu() * w) @ per_class.t() + self.lin_out.bias
            return out.sigmoid() if self.score == 'sigmoid' else out
        block_size = block_size or max(
            1,
            _PAIR_BLOCK_ELEMENTS // max(num_classes * self.hidden_channels, 1),
        )
        scores = []
        for start in range(0, per_image.size(0), block_size):
            block = per_image[start : start + block_size]
            # In place: the pre-activation sum is a fresh tensor.
            hidden = (block.unsqueeze(1) + per_class.unsqueeze(0)).relu_()
            scores.append(hidden @ w)  # [b, C]
        if not scores:
            return per_class.new_zeros(0, num_classes)
        out = torch.cat(scores, dim=0) + self.lin_out.bias
        return out.sigmoid() if self.score == 'sigmoid' else out

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.class_channels}, '
            f'{self.image_channels}, hidden={self.hidden_channels}, '
            f'score={self.score}, interaction={self.interaction})'
        )
