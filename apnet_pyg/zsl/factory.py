r"""What a configuration builds: the model, its optimizer and schedule, and
the episode (or mini-batch) sampler."""

from typing import Optional, Union

import torch
from torch import Tensor

from apnet_pyg.data.sampler import EpisodeSampler, MinibatchSampler
from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.nn.models.apnet import APNet
from apnet_pyg.zsl.class_graph import wordnet_class_prior
from apnet_pyg.zsl.config import TrainConfig


def model_from_config(
    config: TrainConfig,
    attribute_dim: int,
    image_channels: int,
    class_prior: Optional[Tensor] = None,
    class_attributes: Optional[Tensor] = None,
) -> APNet:
    r"""An :class:`APNet` with the architecture of :obj:`config`
    (:obj:`class_prior` for :obj:`graph="wordnet"`, :obj:`class_attributes`
    for :obj:`graph="knn"`; without them a model whose saved state fills
    them)."""
    return APNet(
        attribute_dim,
        image_channels=image_channels,
        class_channels=config.class_channels,
        hidden_channels=config.hidden_channels,
        num_centroids=config.num_centroids,
        graph=config.graph,
        proj_channels=config.proj_channels,
        threshold=config.threshold,
        propagation_temperature=config.propagation_temperature,
        num_steps=config.num_steps,
        score=config.score,
        interaction=config.interaction,
        logit_scale=config.logit_scale,
        class_prior=class_prior,
        knn_k=config.knn_k,
        knn_loop=config.knn_loop,
        knn_space=config.knn_space,
        knn_classes=config.knn_classes,
        learn_propagation_temperature=config.learn_propagation_temperature,
        class_attributes=class_attributes,
    )


def build_model(
    config: TrainConfig,
    data: ZSLDataset,
    train_classes: Tensor,
    image_channels: Optional[int] = None,
) -> APNet:
    r"""A freshly initialised :class:`APNet` for :obj:`data` (seeded by
    :obj:`config.seed`), with the WordNet prior over all of the dataset's
    classes if :obj:`config.graph="wordnet"`, all of its classes'
    attributes if :obj:`config.graph="knn"`, its centroids fitted to the
    attributes of :obj:`train_classes` (and, with
    :obj:`initialization="standardized"`, its scales:
    :meth:`APNet.standardize_`). :obj:`image_channels` defaults to the
    size of :obj:`data`'s features (give it for a dataset loaded
    without them)."""
    prior = (
        wordnet_class_prior(data.name, data.class_names)
        if config.graph == 'wordnet'
        else None
    )
    if image_channels is None:
        image_channels = data.features.size(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = model_from_config(
            config,
            data.attribute_dim,
            image_channels,
            prior,
            data.attributes if config.graph == 'knn' else None,
        )
    generator = torch.Generator().manual_seed(config.seed)
    seen_attributes = data.attributes[train_classes]
    model.encoder.fit_centroids(seen_attributes, generator)
    if config.initialization == 'standardized':
        model.standardize_(seen_attributes)
    return model


def make_optimizer(
    model: torch.nn.Module, config: TrainConfig
) -> torch.optim.Optimizer:
    try:  # The fused kernel is ~6x faster on CPU (one pass, no temporaries).
        return torch.optim.Adam(
            model.parameters(),
            lr=config.lr,
            weight_decay=config.weight_decay,
            fused=True,
        )
    except (RuntimeError, TypeError):  # pragma: no cover (older torch)
        return torch.optim.Adam(
            model.parameters(), lr=config.lr, weight_decay=config.weight_decay
        )


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig):
    milestones = [config.lr_decay_epoch] if config.lr_decay_epoch else []
    return torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones, gamma=config.lr_decay
    )


def check_k_shot(
    data: ZSLDataset,
    images: Tensor,
    classes: Tensor,
    config: TrainConfig,
    flag: str = '--k-shot',
) -> None:
    r"""Checks that every class of :obj:`classes` has
    :obj:`config.k_shot` images among :obj:`images`, as an episode draws
    them; otherwise a one-line :class:`ValueError` naming :obj:`k_shot`
    and :obj:`flag`, the way the user set it (:obj:`apnet-zsl`'s
    :obj:`--k-shot`; a script that reads it otherwise passes its own).
    (The sampler would advise its :obj:`allow_replacement`, which the
    pipeline does not offer.)"""
    counts = torch.bincount(data.labels[images], minlength=data.num_classes)[
        classes
    ]
    fewest = int(counts.argmin())
    if int(counts[fewest]) < config.k_shot:
        raise ValueError(
            f'k_shot={config.k_shot} ({flag}) exceeds the '
            f'{int(counts[fewest])} training images of class '
            f"'{data.class_names[int(classes[fewest])]}', the fewest "
            f'among the classes trained on: use k_shot <= '
            f'{int(counts[fewest])}'
        )


def make_sampler(
    data: ZSLDataset,
    images: Tensor,
    classes: Tensor,
    config: TrainConfig,
    device: Union[str, torch.device] = 'cpu',
):
    r"""The episode (or mini-batch) sampler of :func:`train_model` over
    :obj:`images` of :obj:`classes`, seeded by :obj:`config.seed`, with
    its tables and generator on :obj:`device`."""
    generator = torch.Generator(device=device).manual_seed(config.seed + 1)
    if config.training == 'episodic':
        check_k_shot(data, images, classes, config)
        return EpisodeSampler(
            data.labels,
            classes,
            config.n_way,
            config.k_shot,
            generator,
            pool=images,
            device=device,
        )
    return MinibatchSampler(
        data.labels,
        classes,
        config.n_way * config.k_shot,
        generator,
        pool=images,
        device=device,
    )
