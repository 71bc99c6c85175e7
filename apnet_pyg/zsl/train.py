r"""Training of APNet on an xlsa17 dataset, the way the paper does it.

:func:`train_model` runs one training phase (episodic or mini-batch), with a
checkpoint after every epoch from which :obj:`resume=True` continues.
:func:`run` is the whole protocol: model selection on the benchmark's
validation classes (train on :obj:`trainclasses1`, pick the epoch with the
best ZSL accuracy on :obj:`valclasses1`), retraining on all seen classes for
that many epochs, and evaluation on the test classes. The test classes are
never looked at before the final evaluation.

Runs are deterministic for a seed on CPU: the model's initialisation, the
k-means seeding and the episode sampler each draw from their own generator,
and a checkpoint stores all their states.
"""
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from apnet_pyg.data.sampler import EpisodeSampler, MinibatchSampler
from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.nn.models.apnet import APNet
from apnet_pyg.zsl.class_graph import ClassPrior
from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.zsl.evaluate import evaluate, zsl_accuracy

SIMULATED_LABEL = ('simulated features: not a reproduction of the paper, '
                   'only a check that the pipeline works')


def model_from_config(config: TrainConfig, attribute_dim: int,
                      image_channels: int) -> APNet:
    r"""An :class:`APNet` with the architecture of :obj:`config`."""
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
        activation=config.activation,
        logit_scale=config.logit_scale,
    )


def build_model(config: TrainConfig, data: ZSLDataset,
                train_classes: Tensor) -> APNet:
    r"""A freshly initialised :class:`APNet` for :obj:`data` (seeded by
    :obj:`config.seed`), its centroids fitted to the attributes of
    :obj:`train_classes`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = model_from_config(config, data.attribute_dim,
                                  data.features.size(1))
    generator = torch.Generator().manual_seed(config.seed)
    model.encoder.fit_centroids(data.attributes[train_classes], generator)
    return model


def make_optimizer(model: torch.nn.Module,
                   config: TrainConfig) -> torch.optim.Optimizer:
    try:  # The fused kernel is ~6x faster on CPU (one pass, no temporaries).
        return torch.optim.Adam(model.parameters(), lr=config.lr,
                                weight_decay=config.weight_decay, fused=True)
    except (RuntimeError, TypeError):  # pragma: no cover (older torch)
        return torch.optim.Adam(model.parameters(), lr=config.lr,
                                weight_decay=config.weight_decay)


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig):
    milestones = [config.lr_decay_epoch] if config.lr_decay_epoch else []
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones,
                                                gamma=config.lr_decay)


def _sampler(data: ZSLDataset, classes: Tensor, config: TrainConfig):
    generator = torch.Generator().manual_seed(config.seed + 1)
    if config.training == 'episodic':
        return EpisodeSampler(data.labels, classes, config.n_way,
                              config.k_shot, generator,
                              pool=data.trainval_loc)
    return MinibatchSampler(data.labels, classes,
                            config.n_way * config.k_shot, generator,
                            pool=data.trainval_loc)


def _atomic_save(obj: Any, path: Path) -> None:
    # A run killed while writing must not leave a corrupt checkpoint.
    tmp = path.with_name(path.name + '.tmp')
    torch.save(obj, tmp)
    os.replace(tmp, path)


def train_model(
    model: APNet,
    data: ZSLDataset,
    classes: Tensor,
    config: TrainConfig,
    *,
    epochs: Optional[int] = None,
    device: Union[str, torch.device] = 'cpu',
    checkpoint: Optional[Union[str, Path]] = None,
    resume: bool = False,
    validate: Optional[Callable[[APNet], float]] = None,
    prior: Optional[ClassPrior] = None,
    progress: bool = True,
    description: str = 'train',
) -> List[Dict[str, float]]:
    r"""Trains :obj:`model` on the :obj:`trainval` images of
    :obj:`classes` and returns the per-epoch history (loss, episodes per
    second, and the validation accuracy if :obj:`validate` is given).

    Args:
        model (APNet): The model (moved to :obj:`device`).
        data (ZSLDataset): The dataset, with features.
        classes (torch.Tensor): The training classes.
        config (TrainConfig): The configuration.
        epochs (int, optional): Overrides :obj:`config.epochs`.
        device (str or torch.device, optional): :obj:`"cpu"` or
            :obj:`"cuda"`. (default: :obj:`"cpu"`)
        checkpoint (str or Path, optional): File written after every epoch.
        resume (bool, optional): Continue from :obj:`checkpoint` if it
            exists. (default: :obj:`False`)
        validate (callable, optional): Returns a validation accuracy of the
            model, called after every epoch.
        prior (ClassPrior, optional): The WordNet class graph
            (:obj:`graph="wordnet"`).
        progress (bool, optional): Show a progress bar. (default:
            :obj:`True`)
        description (str, optional): Label of the progress bar.
    """
    if data.features is None:
        raise ValueError("Training needs image features: load the dataset "
                         "with load_features=True")
    if config.graph == 'wordnet' and prior is None:
        raise ValueError("graph='wordnet' needs the WordNet class prior")
    device = torch.device(device)
    epochs = config.epochs if epochs is None else epochs
    model.to(device)
    features = data.features.to(device)
    attributes = data.attributes.to(device)
    classes = classes.to(torch.long)
    if prior is not None:
        prior = prior.to(device)

    sampler = _sampler(data, classes, config)
    images_per_step = config.n_way * config.k_shot
    num_train_images = int(
        torch.isin(data.labels[data.trainval_loc], classes).sum())
    iterations = config.iterations_per_epoch or max(
        1, num_train_images // images_per_step)

    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, config)
    history: List[Dict[str, float]] = []
    start_epoch = 0
    if checkpoint is not None and resume and Path(checkpoint).exists():
        state = torch.load(checkpoint, map_location=device,
                           weights_only=False)
        if state['config'] != config.to_dict():
            raise ValueError(f"'{checkpoint}' was written with another "
                             f"configuration; start a new run directory "
                             f"or drop --resume")
        model.load_state_dict(state['model'])
        optimizer.load_state_dict(state['optimizer'])
        scheduler.load_state_dict(state['scheduler'])
        sampler.load_state_dict(state['sampler'])
        history = state['history']
        start_epoch = state['epoch']

    minibatch_classes = attributes[classes.to(device)]
    minibatch_prior = prior.subgraph(classes.to(device)) \
        if prior is not None and config.training == 'minibatch' else None
    batches = iter(sampler) if config.training == 'minibatch' else None

    for epoch in range(start_epoch, epochs):
        model.train()
        total_loss, start = 0.0, time.perf_counter()
        bar = tqdm(range(iterations), desc=f'{description} epoch '
                   f'{epoch + 1}/{epochs}', unit='episode',
                   disable=not progress, leave=False)
        for step in bar:
            if config.training == 'episodic':
                episode = sampler.sample()
                episode_classes = episode.episode_classes.to(device)
                logits = model(
                    features[episode.image_index.to(device)],
                    attributes[episode_classes],
                    prior.subgraph(episode_classes) if prior else None)
            else:
                batch = next(batches, None)
                if batch is None:  # One pass over the images is done.
                    batches = iter(sampler)
                    batch = next(batches)
                episode = batch
                logits = model(features[batch.image_index.to(device)],
                               minibatch_classes, minibatch_prior)
            loss = F.cross_entropy(logits, episode.target.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total_loss += float(loss.detach())
            if step % 20 == 0:
                bar.set_postfix(loss=f'{total_loss / (step + 1):.4f}')
        seconds = time.perf_counter() - start
        scheduler.step()

        record = {
            'epoch': epoch + 1,
            'loss': total_loss / iterations,
            'episodes_per_second': iterations / seconds,
            'ms_per_episode': 1000.0 * seconds / iterations,
        }
        if validate is not None:
            record['val_zsl_acc'] = validate(model)
        history.append(record)
        if progress:
            tqdm.write(f'{description} epoch {epoch + 1}/{epochs}: ' +
                       ', '.join(f'{k}={v:.4g}' for k, v in record.items()
                                 if k != 'epoch'))
        if checkpoint is not None:
            _atomic_save(
                {
                    'epoch': epoch + 1,
                    'config': config.to_dict(),
                    'model': model.state_dict(),
                    'optimizer': optimizer.state_dict(),
                    'scheduler': scheduler.state_dict(),
                    'sampler': sampler.state_dict(),
                    'history': history,
                }, Path(checkpoint))
    return history


def run(
    data: ZSLDataset,
    config: TrainConfig,
    out: Union[str, Path],
    device: Union[str, torch.device] = 'cpu',
    resume: bool = False,
    progress: bool = True,
    data_root: Optional[str] = None,
) -> Dict[str, Any]:
    r"""The whole protocol (see the module docstring); writes
    :obj:`out/config.json`, :obj:`out/model.pt` and
    :obj:`out/metrics.json` (which records :obj:`data_root`, the folder the
    dataset was read from) and returns the metrics."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'config.json').write_text(json.dumps(config.to_dict(), indent=2))
    prior = ClassPrior.for_graph(config.graph, data.name, data.class_names)

    epochs, selection = config.epochs, None
    if config.model_selection == 'validation':
        if data.train_classes is None or data.val_classes is None:
            raise ValueError(
                f"Model selection needs the benchmark's validation classes "
                f"(trainclasses1.txt, valclasses1.txt) next to "
                f"att_splits.mat for '{data.name}'; or use "
                f"model_selection='none'")
        val_images = data.images_of(data.val_classes, 'trainval')

        def validate(model: APNet) -> float:
            return zsl_accuracy(model, data, val_images, data.val_classes,
                                prior, torch.device(device))

        model = build_model(config, data, data.train_classes)
        history = train_model(model, data, data.train_classes, config,
                              device=device, checkpoint=out / 'selection.pt',
                              resume=resume, validate=validate, prior=prior,
                              progress=progress, description='selection')
        accuracies = [record['val_zsl_acc'] for record in history]
        best = max(range(len(accuracies)), key=accuracies.__getitem__)
        epochs = best + 1
        selection = {
            'train_classes': 'trainclasses1',
            'val_classes': 'valclasses1',
            'val_zsl_acc': accuracies,
            'best_epoch': epochs,
            'best_val_zsl_acc': accuracies[best],
        }

    model = build_model(config, data, data.seen_classes)
    history = train_model(model, data, data.seen_classes, config,
                          epochs=epochs, device=device,
                          checkpoint=out / 'checkpoint.pt', resume=resume,
                          prior=prior, progress=progress, description='final')
    metrics = evaluate(model, data, prior, torch.device(device))

    torch.save(
        {
            'config': config.to_dict(),
            'dataset': data.name,
            'attribute_dim': data.attribute_dim,
            'image_channels': data.features.size(1),
            'state_dict': model.state_dict(),
        }, out / 'model.pt')
    result = {
        **metrics,
        'dataset': data.name,
        'data_root': data_root,
        'simulated': data.simulated,
        'label': SIMULATED_LABEL if data.simulated else 'real features',
        'simulation': data.simulation,
        'epochs_trained': epochs,
        'model_selection': selection or 'none (trained for config.epochs)',
        'ms_per_episode': sum(r['ms_per_episode'] for r in history) /
        max(len(history), 1),
        'history': history,
        'config': config.to_dict(),
        'device': str(device),
    }
    (out / 'metrics.json').write_text(json.dumps(result, indent=2))
    return result


def load_model(run_dir: Union[str, Path],
               device: Union[str, torch.device] = 'cpu') -> APNet:
    r"""The trained model of a run directory (:obj:`model.pt`)."""
    path = Path(run_dir) / 'model.pt'
    if not path.exists():
        raise FileNotFoundError(f"No trained model at '{path}': run "
                                f"'apnet-zsl train' first")
    saved = torch.load(path, map_location=device, weights_only=False)
    config = TrainConfig.from_dict(saved['config'])
    model = model_from_config(config, saved['attribute_dim'],
                              saved['image_channels'])
    model.load_state_dict(saved['state_dict'])
    return model.to(device)
