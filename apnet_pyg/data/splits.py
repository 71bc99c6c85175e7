r"""Validation splits of the xlsa17 benchmark for model selection.

The benchmark's class-level split (:obj:`trainclasses1.txt` /
:obj:`valclasses1.txt`) gives the *unseen* side of a validation task: the
images of the validation classes. Generalised ZSL also needs a *seen* side:
images of the training classes that training never sees.
:func:`seen_validation_split` holds out a fixed share of every training
class's images for that, the way the benchmark holds out :obj:`test_seen`
images of every seen class.
"""

from typing import NamedTuple

import torch
from torch import Tensor

from apnet_pyg.checks import as_index_tensor, check_int, check_number
from apnet_pyg.data.xlsa17 import ZSLDataset


class ValidationSplit(NamedTuple):
    r"""A validation task built from the seen classes only.

    Attributes:
        train_classes (Tensor): Classes trained on (:obj:`trainclasses1`).
        val_classes (Tensor): Classes playing the unseen classes
            (:obj:`valclasses1`).
        train_images (Tensor): Images trained on: the :obj:`trainval`
            images of :obj:`train_classes` minus :obj:`seen_val_images`.
        seen_val_images (Tensor): Held-out images of :obj:`train_classes`.
        unseen_val_images (Tensor): The :obj:`trainval` images of
            :obj:`val_classes`.
    """

    train_classes: Tensor
    val_classes: Tensor
    train_images: Tensor
    seen_val_images: Tensor
    unseen_val_images: Tensor


def _check_fraction(fraction, name: str) -> float:
    fraction = check_number(fraction, name)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"'{name}' must lie in (0, 1) (got {fraction:g})")
    return fraction


def hold_out_per_class(
    images: Tensor, labels: Tensor, fraction: float, generator: torch.Generator
):
    r"""Splits :obj:`images` (indices into :obj:`labels`) into kept and
    held-out images, holding out :math:`\mathrm{round}(f \cdot n_c)` random
    images of each class with :math:`n_c` images, at least one when
    :math:`n_c \geq 2` and never all of them.

    Returns:
        (Tensor, Tensor): Kept and held-out image indices, each sorted.
    """
    _check_fraction(fraction, 'fraction')
    if not isinstance(generator, torch.Generator):
        raise ValueError(
            f"'generator' must be a torch.Generator (got "
            f'{type(generator).__name__})'
        )
    images = as_index_tensor(images, 'images')
    labels = as_index_tensor(labels, 'labels')
    if images.numel() > 0 and (
        int(images.min()) < 0 or int(images.max()) >= labels.numel()
    ):
        raise ValueError(
            f"'images' must hold indices into 'labels', in "
            f'[0, {labels.numel()})'
        )
    if images.unique().numel() != images.numel():
        # A repeated image could land on both sides of the split.
        raise ValueError("'images' contains duplicate image indices")
    if labels.numel() > 0 and int(labels.min()) < 0:
        raise ValueError("'labels' contains negative class indices")
    order = torch.randperm(images.numel(), generator=generator)
    shuffled = images[order]
    image_labels = labels[shuffled]
    # Rank of each image within its class, in the shuffled order.
    by_class = torch.argsort(image_labels, stable=True)
    sorted_labels = image_labels[by_class]
    first = torch.searchsorted(sorted_labels, sorted_labels)
    rank = torch.empty_like(by_class)
    rank[by_class] = torch.arange(by_class.numel()) - first
    counts = torch.bincount(image_labels)[image_labels]
    quota = torch.round(fraction * counts.double()).long()
    quota = torch.clamp(quota, min=(counts >= 2).long(), max=counts - 1)
    held = rank < quota
    return shuffled[~held].sort().values, shuffled[held].sort().values


def seen_validation_split(
    data: ZSLDataset, fraction: float = 0.2, seed: int = 0
) -> ValidationSplit:
    r"""The validation task of :obj:`data`: train on the :obj:`trainval`
    images of :obj:`trainclasses1` minus a held-out share
    :obj:`fraction` of each class's images (the seen validation images,
    drawn with :obj:`seed`), validate on those and on the images of
    :obj:`valclasses1` (the unseen validation images). Test images are
    never touched."""
    if not isinstance(data, ZSLDataset):
        raise ValueError(
            f"'data' must be a ZSLDataset (got {type(data).__name__})"
        )
    _check_fraction(fraction, 'fraction')
    check_int(seed, 'seed', minimum=0)
    if seed >= 2**64:  # torch.Generator's seeds: [0, 2^64 - 1].
        raise ValueError(f"'seed' must be below 2^64 (got {seed})")
    if data.labels is None:
        raise ValueError(
            f"Dataset '{data.name}' was loaded without "
            f'features/labels (load_features=False)'
        )
    if data.train_classes is None or data.val_classes is None:
        raise ValueError(
            f"Validation needs the benchmark's validation classes "
            f'(trainclasses1.txt, valclasses1.txt) next to att_splits.mat '
            f"for '{data.name}'"
        )
    generator = torch.Generator().manual_seed(seed)
    train_images, seen_val_images = hold_out_per_class(
        data.images_of(data.train_classes, 'trainval'),
        data.labels,
        fraction,
        generator,
    )
    return ValidationSplit(
        data.train_classes,
        data.val_classes,
        train_images,
        seen_val_images,
        data.images_of(data.val_classes, 'trainval'),
    )
