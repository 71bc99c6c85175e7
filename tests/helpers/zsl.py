r"""What several ZSL tests share: a tiny training configuration and a dataset
whose test labels are wrong (what a selection must never read)."""

import dataclasses

import torch

from apnet_pyg.zsl import TrainConfig

#: A configuration that trains in well under a second on the toy dataset.
TINY = TrainConfig(
    class_channels=32,
    hidden_channels=32,
    proj_channels=16,
    num_centroids=2,
    n_way=4,
    lr=1e-3,
    epochs=3,
    lr_decay_epoch=2,
    iterations_per_epoch=15,
    seen_val_fraction=0.25,
)


def corrupt_test_labels(data):
    r"""A copy of :obj:`data` whose test images carry wrong labels (each
    shifted to another class of its own side): whatever reads them gets a
    different answer."""
    labels = data.labels.clone()
    for images, classes in (
        (data.test_seen_loc, data.seen_classes),
        (data.test_unseen_loc, data.unseen_classes),
    ):
        position = torch.searchsorted(classes, labels[images])
        labels[images] = classes[(position + 1) % classes.numel()]
    return dataclasses.replace(data, labels=labels)
