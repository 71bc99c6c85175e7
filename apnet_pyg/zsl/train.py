r"""Training of APNet on an xlsa17 dataset, and the whole protocol of a run.

:func:`train_model` runs one training phase (episodic or mini-batch), with a
checkpoint after every epoch from which :obj:`resume=True` continues
exactly. :func:`run` is the protocol:

1. **Selection** (:obj:`model_selection="validation"`;
   :func:`select_on_validation`) on a validation task
   built from the seen classes only (:func:`~apnet_pyg.data.splits.
   seen_validation_split`): train on :obj:`trainclasses1` minus a held-out
   share of its images; after every epoch, validate ZSL on
   :obj:`valclasses1` and GZSL on the held-out images and
   :obj:`valclasses1` among both class sets. The epoch of best validation
   ZSL accuracy is the ZSL row's, the epoch of best validation :math:`H`
   the GZSL row's, and the (epoch, calibration constant) of best calibrated
   validation :math:`H` the calibrated GZSL row's.
2. **Final training** on all seen classes for the largest of those epoch
   counts (all :obj:`config.epochs` with :obj:`report_test_selected`,
   which does not change the selected epochs' models); the model of each
   selected epoch is saved
   (:obj:`model-epoch<E>.pt`) and evaluated on the test splits. The test
   images are not looked at before the selection is over, and no choice
   depends on them.
3. With :obj:`report_test_selected=True`, additionally the authors'
   protocol: the test set evaluated after every final epoch and the epoch
   of best test :math:`H` reported, labelled "test-set selected
   (optimistic)".

Determinism, the step without the host and its compiled form:
``docs/training.md``.
"""

import json
import math
import resource
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from tqdm.auto import tqdm

from apnet_pyg.checks import check_finite
from apnet_pyg.data.splits import ValidationSplit, seen_validation_split
from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.environment import describe_environment
from apnet_pyg.files import atomic_write_text, make_output_folder
from apnet_pyg.nn.models.apnet import APNet
from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.zsl.evaluate import (
    apnet_score_fn,
    class_graph_edges,
    evaluate_scores,
    validate,
)
from apnet_pyg.zsl.factory import (
    build_model,
    make_optimizer,
    make_sampler,
    make_scheduler,
)
from apnet_pyg.zsl.metrics import ROWS, first_best_index
from apnet_pyg.zsl.reporting.tables import SIMULATED_LABEL, TEST_SELECTED_LABEL
from apnet_pyg.zsl.rundir import (
    CONFIG_FILE,
    DATA_FILE,
    FINAL_CHECKPOINT,
    METRICS_FILE,
    SELECTION_CHECKPOINT,
    atomic_save,
    check_run_dir,
    check_same_config,
    check_same_data,
    clear_run_dir,
    load_checkpoint,
    model_file,
    model_state,
    read_json,
)
from apnet_pyg.zsl.step import FINITE_CHECK_STEPS, TrainStep, compiles_step


def train_model(
    model: APNet,
    data: ZSLDataset,
    images: Tensor,
    classes: Tensor,
    config: TrainConfig,
    *,
    epochs: Optional[int] = None,
    device: Union[str, torch.device] = 'cpu',
    checkpoint: Optional[Union[str, Path]] = None,
    resume: bool = False,
    on_epoch_end: Optional[Callable[[int, APNet], Dict[str, Any]]] = None,
    progress: bool = True,
    description: str = 'train',
    compile_step: bool = False,
    negative_classes: Optional[Tensor] = None,
) -> List[Dict[str, Any]]:
    r"""Trains :obj:`model` on the images :obj:`images` (all of
    :obj:`classes`) and returns the per-epoch history: loss, episodes per
    second and whatever :obj:`on_epoch_end(epoch, model)` returns.
    Off the CPU, or with :obj:`compile_step`, a step does not synchronise
    with the host (:class:`TrainStep`); the losses are read and checked
    every :data:`FINITE_CHECK_STEPS` steps, and a non-finite one raises
    :class:`TrainingDiverged` naming its epoch and step.

    Args:
        model (APNet): The model (moved to :obj:`device`).
        data (ZSLDataset): The dataset, with features.
        images (torch.Tensor): Indices of the training images.
        classes (torch.Tensor): The training classes.
        config (TrainConfig): The configuration.
        epochs (int, optional): Overrides :obj:`config.epochs`.
        device (str or torch.device, optional): :obj:`"cpu"` or
            :obj:`"cuda"`. (default: :obj:`"cpu"`)
        checkpoint (str or Path, optional): File written after every epoch.
        resume (bool, optional): Continue from :obj:`checkpoint` if it
            exists. (default: :obj:`False`)
        on_epoch_end (callable, optional): Called with the epoch (1-based)
            and the model after every epoch; its dictionary is added to the
            epoch's record (e.g. validation metrics).
        progress (bool, optional): Print one line per epoch, and a progress
            bar when standard error is a terminal. (default: :obj:`True`)
        description (str, optional): Label of the progress output.
        compile_step (bool, optional): Compile the whole step into CUDA
            graphs on a GPU (:class:`TrainStep`; elsewhere the step without
            the host runs uncompiled, with a warning).
            (default: :obj:`False`)
        negative_classes (torch.Tensor, optional): Classes outside
            :obj:`classes` scored in every step as a wrong answer for every
            training image (:class:`TrainStep`); their descriptions are
            read, never their images. (default: none)
    """
    if data.features is None:
        raise ValueError(
            'Training needs image features: load the dataset '
            'with load_features=True'
        )
    device = torch.device(device)
    epochs = config.epochs if epochs is None else epochs
    model.to(device)
    features = data.features.to(device)
    attributes = data.attributes.to(device)
    # Checked once here: the steps do not read them on the host.
    check_finite(features, 'data.features')
    check_finite(attributes, 'data.attributes')
    classes = classes.to(torch.long)
    if negative_classes is not None:
        negative_classes = check_negative_classes(
            negative_classes, classes, attributes.size(0)
        )

    sampler = make_sampler(data, images, classes, config, device)
    iterations = config.episodes_per_epoch(images.numel())

    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, config)
    history: List[Dict[str, Any]] = []
    start_epoch = 0
    if resume:
        state = load_checkpoint(checkpoint, config, device)
        model.load_state_dict(state['model'])
        optimizer.load_state_dict(state['optimizer'])
        scheduler.load_state_dict(state['scheduler'])
        sampler.load_state_dict(state['sampler'])
        history = state['history']
        start_epoch = state['epoch']
        if start_epoch > epochs:
            raise ValueError(
                f"'{checkpoint}' was saved after epoch "
                f'{start_epoch}, past the {epochs} epochs asked '
                f'for: resume with epochs >= {start_epoch}, or '
                f'start over without it'
            )
        if progress:
            print(
                f'{description}: resuming from {checkpoint} after epoch '
                f'{start_epoch}/{epochs}',
                flush=True,
            )

    train_step = TrainStep(
        model,
        sampler,
        optimizer,
        features,
        attributes,
        classes.to(device),
        iterations,
        negative_classes=None
        if negative_classes is None
        else negative_classes.to(device),
        compile_step=compile_step,
    )
    # Loss and accuracy of a model that has learned nothing.
    candidates = train_step.task_size
    chance_loss = math.log(candidates)

    for epoch in range(start_epoch, epochs):
        model.train()
        start = time.perf_counter()
        train_step.start_epoch()
        total_loss, checked = 0.0, 0
        bar = tqdm(
            range(iterations),
            desc=f'{description} epoch {epoch + 1}/{epochs}',
            unit='episode',
            disable=None if progress else True,
            leave=False,
        )
        # A read costs nothing to a step that synchronises anyway; the next
        # step's sparse class graph would refuse NaN class vectors.
        check_every = FINITE_CHECK_STEPS if train_step.sync_free else 1
        for step in bar:
            train_step(step)
            if (step + 1) % check_every and step + 1 < iterations:
                continue
            # One read of the steps since the last check; summed in step
            # order, as when each loss was read in its step.
            for value in train_step.losses[checked : step + 1].tolist():
                checked += 1
                if not math.isfinite(value):
                    raise TrainingDiverged(
                        f'training diverged in epoch {epoch + 1}, step '
                        f'{checked}: the loss is {value}; lower the '
                        f'learning rate (lr={config.lr:g})'
                    )
                total_loss += value
            if not bar.disable:
                bar.set_postfix(loss=f'{total_loss / (step + 1):.4f}')
        correct, seen = train_step.epoch_correct(), train_step.seen
        seconds = time.perf_counter() - start
        scheduler.step()

        record = {
            'epoch': epoch + 1,
            'loss': total_loss / iterations,
            'train_acc': 100.0 * correct / max(seen, 1),
            'episodes_per_second': iterations / seconds,
            'ms_per_episode': 1000.0 * seconds / iterations,
        }
        if on_epoch_end is not None:
            record.update(on_epoch_end(epoch + 1, model))
        history.append(record)
        if progress:
            print(
                f'{description} epoch {epoch + 1}/{epochs}: '
                + ', '.join(
                    f'{k}={v:.4g}'
                    for k, v in record.items()
                    if isinstance(v, float)
                ),
                flush=True,
            )
        _warn_if_not_learning(
            history, chance_loss, candidates, iterations, description
        )
        if checkpoint is not None:
            atomic_save(
                {
                    'epoch': epoch + 1,
                    'config': config.to_dict(),
                    'model': model.state_dict(),
                    'optimizer': optimizer.state_dict(),
                    'scheduler': scheduler.state_dict(),
                    'sampler': sampler.state_dict(),
                    'history': history,
                },
                Path(checkpoint),
            )
    return history


def check_negative_classes(
    negative_classes: Tensor, classes: Tensor, num_classes: int
) -> Tensor:
    r""":obj:`negative_classes` as int64 once checked: distinct class ids
    below :obj:`num_classes`, none of them a training class."""
    negative_classes = negative_classes.to(torch.long).view(-1)
    if negative_classes.numel() and (
        int(negative_classes.min()) < 0
        or int(negative_classes.max()) >= num_classes
    ):
        raise ValueError(
            f"'negative_classes' must be class ids in [0, "
            f'{num_classes}) (got '
            f'{negative_classes.tolist()})'
        )
    if negative_classes.unique().numel() != negative_classes.numel():
        raise ValueError(
            f"'negative_classes' has a class twice (got "
            f'{negative_classes.tolist()})'
        )
    overlap = torch.isin(negative_classes, classes.cpu())
    if bool(overlap.any()):
        raise ValueError(
            f"'negative_classes' must not hold a training "
            f'class (got {negative_classes[overlap].tolist()})'
        )
    return negative_classes


class TrainingDiverged(RuntimeError):
    r"""Raised when the training loss becomes NaN or infinite."""


def _warn_if_not_learning(
    history: List[Dict[str, Any]],
    chance_loss: float,
    candidates: int,
    iterations: int,
    description: str,
) -> None:
    # Two epochs in a row at chance, in loss and accuracy, over enough steps
    # to tell: a learning rate or logit scale the model cannot learn with.
    # (A tiny logit scale, as the authors' 0.01, keeps the loss near ln N
    # while the accuracy rises: that is learning.)
    recent = history[-2:]
    if (
        len(recent) == 2
        and 2 * iterations >= 50
        and all(
            record['loss'] >= 0.98 * chance_loss
            and record['train_acc'] <= 150.0 / candidates
            for record in recent
        )
    ):
        warnings.warn(
            f'{description}: the model is not learning (epochs '
            f'{recent[0]["epoch"]}-{recent[1]["epoch"]}: loss '
            f'{recent[1]["loss"]:.3f}, about ln {candidates} = '
            f'{chance_loss:.3f}, training accuracy '
            f'{recent[1]["train_acc"]:.1f}%, chance '
            f'{100 / candidates:.1f}%); check lr and logit_scale',
            NotLearningWarning,
            stacklevel=3,
        )


class NotLearningWarning(UserWarning):
    r"""Warned when the training loss and accuracy stay at chance."""


class ValidationEpisodeWarning(UserWarning):
    r"""Warned when the validation task has fewer training classes than
    :obj:`n_way`, so that its episodes have fewer classes."""


def check_config_fits(config: TrainConfig, data: ZSLDataset) -> None:
    r"""Checks that :obj:`config` can run on :obj:`data` as it says, before
    any work: an episode cannot have more classes than the seen classes.
    (The validation task's episodes are capped at its training classes:
    AWA's 27 :obj:`trainclasses1` against the paper's :math:`N = 30`; see
    :func:`run`.)"""
    if data.features is None:
        raise ValueError(
            'Training needs image features: load the dataset '
            'with load_features=True'
        )
    if config.model_selection == 'validation' and (
        data.train_classes is None or data.val_classes is None
    ):
        raise ValueError(
            f"model_selection='validation' needs the benchmark's validation "
            f'classes (trainclasses1.txt, valclasses1.txt) next to '
            f"att_splits.mat for '{data.name}'; or use "
            f"model_selection='none'"
        )
    seen = data.seen_classes.numel()
    if config.training == 'episodic' and config.n_way > seen:
        raise ValueError(
            f'n_way={config.n_way} exceeds the {seen} seen '
            f'classes of {data.name}: use n_way <= {seen}'
        )


def select_epochs(history: List[Dict[str, Any]]) -> Dict[str, Any]:
    r"""The validation-selected epoch of every row of :data:`ROWS` (the
    earliest on ties), with its validation metrics, from the history of a
    selection phase."""
    selection = {}
    for row, metric in ROWS.items():
        record = history[first_best_index([h[metric] for h in history])]
        selection[row] = {
            'epoch': record['epoch'],
            **{
                key: value
                for key, value in record.items()
                if key.startswith('val_')
            },
        }
    calibrated = selection['gzsl_calibrated']
    calibrated['calibration'] = calibrated['val_calibration']
    return selection


def validation_task(data: ZSLDataset, config: TrainConfig) -> ValidationSplit:
    r"""The validation task a run with :obj:`config` selects on (its share
    of held-out seen images, drawn with its seed); the run's baselines
    choose their calibration on the same one."""
    return seen_validation_split(data, config.seen_val_fraction, config.seed)


def select_on_validation(
    data: ZSLDataset,
    config: TrainConfig,
    out: Union[str, Path],
    device: Union[str, torch.device] = 'cpu',
    resume: bool = False,
    progress: bool = True,
    compile_step: bool = False,
) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    r"""The selection phase of :func:`run` (step 1 of the module
    docstring): trains on the validation task built from the seen classes,
    validates after every epoch and returns the selection (each row's
    epoch and validation metrics, the calibration constant and the
    validation task's sizes) with the phase's history. Reads no test
    image. Its checkpoint is :obj:`out/selection.pt`, from which
    :obj:`resume` continues. :obj:`compile_step`: see
    :func:`train_model`."""
    out = Path(out)
    split = validation_task(data, config)
    validation_n_way = min(config.n_way, split.train_classes.numel())
    if config.training == 'episodic' and validation_n_way < config.n_way:
        warnings.warn(
            f'the validation task of {data.name} trains on '
            f'{validation_n_way} classes (trainclasses1): its episodes '
            f"are {validation_n_way}-way, the final training's "
            f'{config.n_way}-way',
            ValidationEpisodeWarning,
            stacklevel=2,
        )
    model = build_model(config, data, split.train_classes)

    def validate_epoch(epoch: int, model: APNet) -> Dict[str, float]:
        return validate(data, split, apnet_score_fn(model, data))

    checkpoint = out / SELECTION_CHECKPOINT
    history = train_model(
        model,
        data,
        split.train_images,
        split.train_classes,
        config,
        device=device,
        checkpoint=checkpoint,
        resume=resume and checkpoint.exists(),
        on_epoch_end=validate_epoch,
        progress=progress,
        description='selection',
        compile_step=compile_step,
    )
    selection = select_epochs(history)
    selection['validation_task'] = {
        'train_classes': 'trainclasses1',
        'val_classes': 'valclasses1',
        'n_way': validation_n_way,
        'seen_val_fraction': config.seen_val_fraction,
        'train_images': split.train_images.numel(),
        'seen_val_images': split.seen_val_images.numel(),
        'unseen_val_images': split.unseen_val_images.numel(),
    }
    return selection, history


def run(
    data: ZSLDataset,
    config: TrainConfig,
    out: Union[str, Path],
    device: Union[str, torch.device] = 'cpu',
    resume: bool = False,
    progress: bool = True,
    data_root: Optional[str] = None,
    overwrite: bool = False,
    compile_step: bool = False,
) -> Dict[str, Any]:
    r"""The whole protocol (see the module docstring); writes
    :obj:`out/config.json`, :obj:`out/data.json` (the data's
    :meth:`~apnet_pyg.data.ZSLDataset.fingerprint`), the selected epochs'
    models :obj:`out/model-epoch<E>.pt` and :obj:`out/metrics.json` (which
    records :obj:`data_root`, the folder the dataset was read from, and the
    fingerprint) and returns the metrics. :obj:`resume` continues an
    interrupted run in :obj:`out`, on the same configuration and data;
    a run directory that holds a run is otherwise only written over with
    :obj:`overwrite`. Evaluating a finished run (:func:`run_dataset`) checks
    the fingerprint too. :obj:`compile_step`: see :func:`train_model`."""
    start = time.perf_counter()
    out = check_run_dir(out, resume, overwrite)
    check_config_fits(config, data)
    make_output_folder(out)
    if overwrite and not resume:
        clear_run_dir(out)
    # Both checked before they are rewritten: they describe the checkpoints.
    config_path = out / CONFIG_FILE
    if resume and config_path.is_file():
        check_same_config(read_json(config_path), config, config_path)
    fingerprint = data.fingerprint()
    data_path = out / DATA_FILE
    if resume and data_path.is_file():
        check_same_data(
            data_path,
            fingerprint,
            'the run',
            'resume with the --root it was started with, or '
            'start over in another output folder',
        )
    atomic_write_text(json.dumps(config.to_dict(), indent=2), config_path)
    atomic_write_text(json.dumps(fingerprint, indent=2), data_path)

    selection = None
    if config.model_selection == 'validation':
        selection, _ = select_on_validation(
            data, config, out, device, resume, progress, compile_step
        )
        row_epochs = {row: selection[row]['epoch'] for row in ROWS}
        calibration = selection['gzsl_calibrated']['calibration']
    else:
        row_epochs = {'zsl': config.epochs, 'gzsl': config.epochs}
        calibration = None

    # Final training: test evaluation only at the selected epochs; for the
    # opt-in test-selected report, at every epoch of the whole schedule.
    epochs = (
        config.epochs
        if config.report_test_selected
        else max(row_epochs.values())
    )
    evaluate_at = set(row_epochs.values())

    def evaluate_epoch(epoch: int, model: APNet) -> Dict[str, Any]:
        # The class graph's size every epoch (one encoder pass): whether
        # training keeps the propagation mixing classes.
        record = {'class_graph_edges': class_graph_edges(model, data)}
        if epoch not in evaluate_at and not config.report_test_selected:
            return record
        if epoch in evaluate_at:
            atomic_save(
                model_state(config, data, model, epoch),
                out / model_file(epoch),
            )
        cal = (
            calibration if row_epochs.get('gzsl_calibrated') == epoch else None
        )
        record['test'] = evaluate_scores(
            data, apnet_score_fn(model, data), cal
        )
        return record

    model = build_model(config, data, data.seen_classes)
    initial_edges = class_graph_edges(model, data)
    history = train_model(
        model,
        data,
        data.trainval_loc,
        data.seen_classes,
        config,
        epochs=epochs,
        device=device,
        checkpoint=out / FINAL_CHECKPOINT,
        resume=resume and (out / FINAL_CHECKPOINT).exists(),
        on_epoch_end=evaluate_epoch,
        progress=progress,
        description='final',
        compile_step=compile_step,
    )

    result = {
        'dataset': data.name,
        'data_root': data_root,
        'data': fingerprint,
        'simulated': data.simulated,
        'label': SIMULATED_LABEL if data.simulated else 'real features',
        'simulation': data.simulation,
        **result_rows(history, row_epochs, config.report_test_selected),
        'class_graph_edges_initial': initial_edges,
        'model_selection': selection
        or 'none (trained for config.epochs, no calibration)',
        'models': {
            row: model_file(epoch) for row, epoch in row_epochs.items()
        },
        'ms_per_episode': sum(r['ms_per_episode'] for r in history)
        / max(len(history), 1),
        'history': history,
        'config': config.to_dict(),
        'device': str(device),
        'compiled_step': compile_step and compiles_step(device),
        # Bit-for-bit repeatable only on the same processor and threads.
        'environment': describe_environment(device),
        # This process's: a resumed run's covers the part after the resume.
        'wall_seconds': time.perf_counter() - start,
        'resumed': resume,
        # The process's high-water mark (data loading included), Linux: KB.
        'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        / 1024,
    }
    atomic_write_text(json.dumps(result, indent=2), out / METRICS_FILE)
    return result


def result_rows(
    history: List[Dict[str, Any]],
    row_epochs: Dict[str, int],
    report_test_selected: bool,
) -> Dict[str, Any]:
    r"""The result table of a run from the final phase's history: the
    test metrics of each row at its selected epoch (flat keys
    :obj:`zsl_acc`, :obj:`gzsl_seen`, ... for the validation-selected rows)
    and, if asked for, the test-selected rows."""
    test = {
        record['epoch']: record['test']
        for record in history
        if 'test' in record
    }
    rows = {'zsl_acc': test[row_epochs['zsl']]['zsl_acc']}
    gzsl = test[row_epochs['gzsl']]
    rows.update(
        gzsl_seen=gzsl['gzsl_seen'],
        gzsl_unseen=gzsl['gzsl_unseen'],
        gzsl_h=gzsl['gzsl_h'],
    )
    if 'gzsl_calibrated' in row_epochs:
        calibrated = test[row_epochs['gzsl_calibrated']]
        rows.update(
            calibration=calibrated['calibration'],
            gzsl_cal_seen=calibrated['gzsl_cal_seen'],
            gzsl_cal_unseen=calibrated['gzsl_cal_unseen'],
            gzsl_cal_h=calibrated['gzsl_cal_h'],
        )
    rows['epochs'] = dict(row_epochs)
    # Edges of the GZSL model's class graph over all classes.
    rows['class_graph_edges'] = next(
        (
            record.get('class_graph_edges')
            for record in history
            if record['epoch'] == row_epochs['gzsl']
        ),
        None,
    )
    rows['selection'] = (
        'validation' if 'gzsl_calibrated' in row_epochs else 'none'
    )
    if report_test_selected:
        best_h = max(test, key=lambda e: (test[e]['gzsl_h'], -e))
        best_zsl = max(test, key=lambda e: (test[e]['zsl_acc'], -e))
        rows['test_selected'] = {
            'label': TEST_SELECTED_LABEL,
            'zsl_acc': test[best_zsl]['zsl_acc'],
            'zsl_epoch': best_zsl,
            'gzsl_seen': test[best_h]['gzsl_seen'],
            'gzsl_unseen': test[best_h]['gzsl_unseen'],
            'gzsl_h': test[best_h]['gzsl_h'],
            'gzsl_epoch': best_h,
        }
    return rows
