r"""Bad inputs of apnet_pyg.zsl (the closed-form baselines, the
configuration, metrics, evaluation, training, a run's files, the command
line), one row each, and the error each gets; the row and the runner are in
tests/bad_input.py."""

import dataclasses
import json
import math
from typing import Any, Callable

import pytest
import torch

from apnet_pyg.data.splits import seen_validation_split
from apnet_pyg.nn.models import APNet
from apnet_pyg.zsl import (
    TrainConfig,
    evaluate,
    harmonic_mean,
    load_model,
    per_class_accuracy,
    run,
    train_model,
)
from apnet_pyg.zsl.baselines.benchmark import sae_metrics
from apnet_pyg.zsl.baselines.eszsl import (
    attribute_map,
    fit_eszsl,
    fit_eszsl_validated,
    predict_eszsl,
)
from apnet_pyg.zsl.baselines.sae import fit_sae, fit_sae_validated, predict_sae
from apnet_pyg.zsl.evaluate import (
    GZSLScores,
    best_calibration,
    evaluate_predictions,
    evaluate_scores,
    validate,
    zsl_accuracy,
)
from apnet_pyg.zsl.factory import build_model
from apnet_pyg.zsl.rundir import load_checkpoint
from apnet_pyg.zsl.train import TrainingDiverged, check_config_fits
from tests.helpers.bad_input import (
    CORRUPT,
    LABELS,
    SMALL,
    SMALL_FLAGS,
    Case,
    Ctx,
    Table,
    check_row,
    check_table,
    toy_load,
    write,
)
from tests.helpers.xlsa17_toy import write_dataset

CASES = Table()
case, cli = CASES.case, CASES.cli
g = torch.Generator().manual_seed(0)

# ---------------------------------------------------------------------------
# The closed-form baselines
# ---------------------------------------------------------------------------
# Small closed-form problems: 12 images of classes 0-2 among 5 classes.
BASE_X = torch.randn(12, 6, generator=g)
BASE_Y = torch.arange(3).repeat(4)
BASE_S = torch.randn(5, 4, generator=g)
BASE_C = torch.arange(3)
ALL_12 = torch.arange(12)


def validated(fit: Callable, **changes) -> Any:
    r""":obj:`fit` (ESZSL's or SAE's validated fit) on the small problem,
    trained, validated and refitted on the same images."""
    arguments = dict(
        features=BASE_X,
        labels=BASE_Y,
        attributes=BASE_S,
        train_classes=BASE_C,
        train_images=ALL_12,
        val_classes=BASE_C,
        val_images=ALL_12,
        refit_classes=BASE_C,
        refit_images=ALL_12,
    )
    return fit(**{**arguments, **changes})


# tests/zsl/test_eszsl.py and test_sae.py have labels not in 'classes' and
# labels of another length, test_sae.py lam=0, solver and space,
# test_baselines.py eszsl_metrics without features.
for name, fit in [('fit_eszsl', fit_eszsl), ('fit_sae', fit_sae)]:
    case(
        f'{name}/labels-float',
        lambda c, fit=fit: fit(BASE_X, BASE_Y.float(), BASE_S, BASE_C),
        ValueError,
        r"'labels' must hold integer indices \(got dtype "
        r'torch.float32\)',
    )
    case(
        f'{name}/labels-outside-attributes',
        lambda c, fit=fit: fit(BASE_X, BASE_Y + 3, BASE_S, BASE_C + 3),
        ValueError,
        r"'classes' holds class 5, outside the 5 classes of "
        r"'attributes'",
    )
    case(
        f'{name}/classes-negative',
        lambda c, fit=fit: fit(
            BASE_X, BASE_Y, BASE_S, torch.tensor([0, 1, 2, -1])
        ),
        ValueError,
        r"'classes' holds class -1",
    )
    case(
        f'{name}/classes-empty',
        lambda c, fit=fit: fit(BASE_X, BASE_Y, BASE_S, BASE_C[:0]),
        ValueError,
        r"'classes' is empty: give at least one class",
    )
    case(
        f'{name}/features-nan',
        lambda c, fit=fit: fit(BASE_X * math.nan, BASE_Y, BASE_S, BASE_C),
        ValueError,
        r"'features' contains NaN or infinite values",
    )
for ridge, value, message in [
    ('gamma', 0.0, r"'gamma' must be > 0 \(got 0\)"),
    ('lam', -1.0, r"'lam' must be > 0 \(got -1\)"),
    ('gamma', math.inf, r"'gamma' must be finite \(got inf\)"),
    ('lam', '1', r"'lam' must be a real number \(got str '1'\)"),
]:
    case(
        f'fit_eszsl/{ridge}={value!r}',
        lambda c, ridge=ridge, value=value: fit_eszsl(
            BASE_X, BASE_Y, BASE_S, BASE_C, **{ridge: value}
        ),
        ValueError,
        message,
    )
case(
    'fit_sae/lam=nan',
    lambda c: fit_sae(BASE_X, BASE_Y, BASE_S, BASE_C, lam=math.nan),
    ValueError,
    r"'lam' must be finite \(got nan\)",
)
case(
    'attribute_map/lam=0',
    lambda c: attribute_map(BASE_S, BASE_C, 0.0),
    ValueError,
    r"'lam' must be > 0 \(got 0\)",
)
for name, fit in [
    ('fit_eszsl_validated', fit_eszsl_validated),
    ('fit_sae_validated', fit_sae_validated),
]:
    case(
        f'{name}/grid-empty',
        lambda c, fit=fit: validated(fit, grid=()),
        ValueError,
        r"'grid' is empty: give at least one value",
    )
    case(
        f'{name}/grid-holds-0',
        lambda c, fit=fit: validated(fit, grid=(1.0, 0.0)),
        ValueError,
        r"'grid' must hold finite numbers > 0 \(got 0.0\)",
    )
case(
    'fit_sae_validated/spaces-unknown',
    lambda c: validated(fit_sae_validated, spaces=('visual',)),
    ValueError,
    r"'spaces' must hold entries of \('semantic', 'feature'\) "
    r"\(got 'visual'\)",
)
V_FIT = fit_eszsl(BASE_X, BASE_Y, BASE_S, BASE_C)
W_FIT = fit_sae(BASE_X, BASE_Y, BASE_S, BASE_C)
for name, predict, weight in [
    ('predict_eszsl', predict_eszsl, V_FIT),
    ('predict_sae', predict_sae, W_FIT),
]:
    letter = 'v' if predict is predict_eszsl else 'w'
    case(
        f'{name}/features-other-width',
        lambda c, predict=predict, weight=weight: predict(
            weight, BASE_X[:, :3], BASE_S, BASE_C
        ),
        ValueError,
        rf"'{letter}' .* got 3-d 'features' and 4 'attributes'",
    )
    case(
        f'{name}/attributes-other-width',
        lambda c, predict=predict, weight=weight: predict(
            weight, BASE_X, BASE_S[:, :2], BASE_C
        ),
        ValueError,
        rf"'{letter}' .* got 6-d 'features' and 2 'attributes'",
    )
    case(
        f'{name}/classes-outside-attributes',
        lambda c, predict=predict, weight=weight: predict(
            weight, BASE_X, BASE_S, torch.tensor([4, 9])
        ),
        ValueError,
        r"'classes' holds class 9, outside the 5 classes of 'attributes'",
    )
    case(
        f'{name}/classes-empty',
        lambda c, predict=predict, weight=weight: predict(
            weight, BASE_X, BASE_S, BASE_C[:0]
        ),
        ValueError,
        r"'classes' is empty: give at least one class",
    )
    case(
        f'{name}/classes-float',
        lambda c, predict=predict, weight=weight: predict(
            weight, BASE_X, BASE_S, BASE_C.float()
        ),
        ValueError,
        r"'classes' must hold integer indices \(got dtype torch.float32\)",
    )
case(
    'sae_metrics/no-features',
    lambda c: sae_metrics(c.class_side),
    ValueError,
    r"'data' \(TINY\) has no image features",
)

# ---------------------------------------------------------------------------
# Zero-shot learning: configuration, metrics, evaluation, training
# ---------------------------------------------------------------------------
# tests/zsl/test_config.py has graph, epochs=0, n_way=1,
# iterations_per_epoch, seen_val_fraction=1 and logit_scale=0.
for name, value, message in [
    ('training', 'online', r'must be one of episodic, minibatch'),
    ('epochs', '3', r"must be an integer \(got str '3'\)"),
    ('n_way', 2.5, r'must be an integer \(got float 2.5\)'),
    ('k_shot', 0, r'must be positive'),
    ('num_centroids', 0, r'must be positive'),
    ('class_channels', -8, r'must be positive'),
    ('lr_decay_epoch', 0, r'must be positive or None'),
    ('lr_decay_epoch', 2.5, r'must be an integer or None'),
    ('seen_val_fraction', '0.2', r'must be a finite number'),
    ('logit_scale', -1.0, r'must be positive'),
    ('logit_scale', math.inf, r'must be a finite number'),
    ('lr', -1.0, r'must be positive'),
    ('lr', math.nan, r'must be a finite number'),
    ('weight_decay', -1e-4, r'must be at least 0'),
    ('lr_decay', 0.0, r'must be positive'),
    ('threshold', 2.0, r'must lie in \[-1, 1\]'),
    ('propagation_temperature', -1.0, r'must be at least 0'),
    (
        'propagation_temperature',
        1e39,
        r'must be at most 3.40282e\+38 '
        r'\(got 1e\+39\)',
    ),
    ('seed', 'a', r'must be an integer'),
    # seed + 1 seeds the sampler: 2^64 - 1 overflowed torch.manual_seed.
    ('seed', 2**64 - 1, r'must lie in \[0, 2\^32 - 1\]'),
    ('report_test_selected', 'yes', r'must be True or False'),
]:
    case(
        f'TrainConfig/{name}={value!r}',
        lambda c, name=name, value=value: TrainConfig(**{name: value}),
        ValueError,
        f"'{name}' {message}",
    )
case(
    'TrainConfig.from_dict/unknown-key',
    lambda c: TrainConfig.from_dict({'graph': 'learned', 'depth': 3}),
    ValueError,
    r"Unknown configuration keys: 'depth'",
)
case(
    'per_class_accuracy/lengths-differ',
    lambda c: per_class_accuracy(torch.tensor([0, 1]), torch.tensor([0])),
    ValueError,
    r"'pred' and 'target' must have the same number of "
    r'elements',
)
case(
    'per_class_accuracy/no-class-present',
    lambda c: per_class_accuracy(LABELS, LABELS, torch.tensor([7])),
    ValueError,
    r"None of 'classes' has a sample in 'target'",
)
case(
    'per_class_accuracy/empty',
    lambda c: per_class_accuracy(
        torch.tensor([], dtype=int), torch.tensor([], dtype=int)
    ),
    ValueError,
    r"'classes' is empty",
)
case(
    'per_class_accuracy/target-negative',
    lambda c: per_class_accuracy(LABELS, LABELS - 1),
    ValueError,
    r"'target' contains negative class indices",
)
case(
    'per_class_accuracy/pred-float',
    lambda c: per_class_accuracy(LABELS + 0.5, LABELS),
    ValueError,
    r"'pred' must hold integer indices",
)
case(
    'harmonic_mean/nan',
    lambda c: harmonic_mean(math.nan, 50.0),
    ValueError,
    r"'seen' must be finite",
)
case(
    'harmonic_mean/negative',
    lambda c: harmonic_mean(50.0, -1.0),
    ValueError,
    r"'unseen' must be at least 0",
)
case(
    'harmonic_mean/string',
    lambda c: harmonic_mean('50', 50.0),
    ValueError,
    r"'seen' must be a real number \(got str '50'\)",
)
case(
    'evaluate/no-features',
    lambda c: evaluate(load_model(c.run, 'zsl'), c.class_side),
    ValueError,
    r'Evaluation needs image features: load the dataset with '
    r'load_features=True',
)
case(
    'evaluate/calibration="best"',
    lambda c: evaluate(load_model(c.run, 'zsl'), c.data, 'best'),
    ValueError,
    r"'calibration' must be a finite number.*\(got 'best'\)",
)
case(
    'best_calibration/no-unseen-images',
    lambda c: best_calibration(
        GZSLScores(
            lambda images, classes: torch.zeros(
                images.numel(), classes.numel()
            ),
            LABELS,
            torch.arange(4),
            torch.tensor([], dtype=int),
            torch.tensor([0, 1]),
            torch.tensor([2, 3]),
        )
    ),
    ValueError,
    r"'task' needs images of seen and of unseen classes",
)
case(
    'zsl_accuracy/no-images',
    lambda c: zsl_accuracy(
        lambda images, classes: torch.zeros(images.numel(), classes.numel()),
        LABELS,
        torch.tensor([], dtype=int),
        torch.tensor([2, 3]),
    ),
    ValueError,
    r"None of 'classes' has a sample in 'target'",
)
case(
    'GZSLScores/no-unseen-classes',
    lambda c: GZSLScores(
        lambda images, classes: torch.zeros(images.numel(), classes.numel()),
        LABELS,
        torch.arange(4),
        torch.arange(4, 8),
        torch.tensor([0, 1]),
        torch.tensor([], dtype=int),
    ),
    ValueError,
    r"'unseen_classes' is empty",
)
case(
    'evaluate_scores/no-unseen-classes',
    lambda c: evaluate_scores(
        dataclasses.replace(
            c.data, unseen_classes=torch.tensor([], dtype=int)
        ),
        lambda images, classes: torch.zeros(images.numel(), classes.numel()),
    ),
    ValueError,
    r"'data.unseen_classes' is empty",
)
case(
    'validate/no-validation-classes',
    lambda c: validate(
        c.data,
        seen_validation_split(c.data)._replace(
            val_classes=torch.tensor([], dtype=int)
        ),
        lambda images, classes: torch.zeros(images.numel(), classes.numel()),
    ),
    ValueError,
    r"'split.val_classes' is empty: .*seen_validation_split",
)
for what, predict, message in [
    (
        'outside-the-candidates',
        lambda images, classes: torch.full((images.numel(),), 99),
        r"'predict_classes' returned 99, not one of the \d+ candidate "
        r'classes it was given',
    ),
    (
        'one-per-call',
        lambda images, classes: classes[:1],
        r"'predict_classes' must return one class per image \(\d+; got 1 "
        r'predictions\)',
    ),
    (
        'None',
        lambda images, classes: None,
        r"'predict_classes' must return one class per image \(\d+; got "
        r'NoneType\)',
    ),
]:
    case(
        f'evaluate_predictions/{what}',
        lambda c, predict=predict: evaluate_predictions(c.data, predict),
        ValueError,
        message,
    )
case(
    'train_model/no-features',
    lambda c: train_model(
        None, c.class_side, torch.arange(4), torch.arange(4), SMALL
    ),
    ValueError,
    r'Training needs image features: load the dataset with '
    r'load_features=True',
)
case(
    'train_model/resume-without-checkpoint',
    lambda c: train_model(
        build_model(SMALL, c.data, c.data.seen_classes),
        c.data,
        c.data.trainval_loc,
        c.data.seen_classes,
        SMALL,
        resume=True,
        progress=False,
    ),
    FileNotFoundError,
    r"no checkpoint to resume from at 'None': start "
    r'without --resume',
)
case(
    'train_model/diverged',
    lambda c: train_model(
        diverging_model(c),
        c.data,
        c.data.trainval_loc,
        c.data.seen_classes,
        SMALL,
        progress=False,
    ),
    TrainingDiverged,
    r'training diverged in epoch 1, step 1: the loss is '
    r'nan.*\(lr=0.001\)',
)
case(
    'load_checkpoint/missing',
    lambda c: load_checkpoint(c.tmp / 'checkpoint.pt', SMALL),
    FileNotFoundError,
    r'no checkpoint to resume from at '
    r"'.*checkpoint.pt'",
)
case(
    'load_checkpoint/random-bytes',
    lambda c: load_checkpoint(write(c.tmp / 'c.pt', CORRUPT), SMALL),
    ValueError,
    r"'.*c.pt' is not a readable apnet-zsl checkpoint",
)
case(
    'load_checkpoint/empty',
    lambda c: load_checkpoint(write(c.tmp / 'c.pt', b''), SMALL),
    ValueError,
    r"'.*c.pt' is not a readable apnet-zsl checkpoint",
)
case(
    'load_checkpoint/foreign',
    lambda c: load_checkpoint(write(c.tmp / 'c.pt', [1, 2]), SMALL),
    ValueError,
    r"'.*c.pt' is not an apnet-zsl checkpoint \(it lacks",
)
case(
    'load_checkpoint/other-configuration',
    lambda c: load_checkpoint(
        write(c.tmp / 'c.pt', checkpoint_of(SMALL.replace(lr=0.5))), SMALL
    ),
    ValueError,
    r"'.*c.pt' was written with another configuration \(differs in: lr\)",
)
case(
    'run/out-a-file',
    lambda c: run(c.data, SMALL, write(c.tmp / 'out', 'x'), progress=False),
    NotADirectoryError,
    r"the run directory '.*out' is a file: choose "
    r'another --out',
)
case(
    'run/k_shot-beyond-a-class',
    lambda c: run(c.data, SMALL.replace(k_shot=1000), c.tmp, progress=False),
    ValueError,
    r'k_shot=1000 \(--k-shot\) exceeds the \d+ training images '
    r"of class '.*'",
)
case(
    'run/resume-and-overwrite',
    lambda c: run(
        c.data, SMALL, c.tmp, resume=True, overwrite=True, progress=False
    ),
    ValueError,
    r'--resume .*--overwrite .*pass one of them',
)
case(
    'run/out-empty',
    lambda c: run(c.data, SMALL, '', progress=False),
    ValueError,
    r'the run directory \(--out\) is empty: name a folder',
)
case(
    'run/resume-nothing',
    lambda c: run(c.data, SMALL, c.tmp, resume=True, progress=False),
    FileNotFoundError,
    r"nothing to resume in '.*' .*start without "
    r'--resume',
)
case(
    'run/resume-finished',
    lambda c: run(c.data, SMALL, c.run_copy(), resume=True, progress=False),
    FileExistsError,
    r"'.*run' holds a finished run \(metrics.json\): "
    r'nothing to resume',
)
case(
    'run/finished-without-overwrite',
    lambda c: run(c.data, SMALL, c.run_copy(), progress=False),
    FileExistsError,
    r"'.*run' holds a finished run: choose another --out, "
    r'or pass --overwrite',
)
case(
    'run/interrupted-without-resume',
    lambda c: run(c.data, SMALL, c.checkpoint_run(b'x'), progress=False),
    FileExistsError,
    r'holds an interrupted run \(continue it with '
    r'--resume\)',
)
case(
    'run/n_way-above-seen-classes',
    lambda c: run(c.data, SMALL.replace(n_way=7), c.tmp, progress=False),
    ValueError,
    r'n_way=7 exceeds the 6 seen classes of TINY: use n_way '
    r'<= 6',
)
case(
    'check_config_fits/validation-without-val-classes',
    lambda c: check_config_fits(
        SMALL.replace(model_selection='validation'),
        toy_load(c.toy(lists={'valclasses1.txt': None})),
    ),
    ValueError,
    r"model_selection='validation' needs the benchmark's "
    r'validation classes',
)
case(
    'load_model/no-metrics.json',
    lambda c: load_model(c.tmp),
    FileNotFoundError,
    r"No metrics.json in '.*'",
)
case(
    'load_model/metrics.json-corrupt',
    lambda c: load_model(c.run_with('metrics.json', '{"models": ')),
    ValueError,
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl "
    r'run \(JSONDecodeError',
)
case(
    'load_model/metrics.json-without-models',
    lambda c: load_model(c.run_with('metrics.json', '{"dataset": "TINY"}')),
    ValueError,
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl "
    r'run \(KeyError',
)
case(
    'load_model/metrics.json-binary',
    lambda c: load_model(c.run_with('metrics.json', CORRUPT)),
    ValueError,
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run",
)
case(
    'load_model/unknown-row',
    lambda c: load_model(c.run, 'best'),
    ValueError,
    r"Run '.*' has no model for row 'best' \(it has: zsl, "
    r'gzsl\)',
)
case(
    'load_model/model-file-missing',
    lambda c: load_model(c.run_without('model-epoch1.pt')),
    FileNotFoundError,
    r"No trained model at '.*model-epoch1.pt'",
)
case(
    'load_model/model-file-random-bytes',
    lambda c: load_model(c.run_with('model-epoch1.pt', CORRUPT)),
    ValueError,
    r"'.*model-epoch1.pt' is not a readable apnet-zsl model",
)
case(
    'load_model/model-file-empty',
    lambda c: load_model(c.run_with('model-epoch1.pt', b'')),
    ValueError,
    r"'.*model-epoch1.pt' is not a readable apnet-zsl model",
)
case(
    'load_model/model-file-a-tensor',
    lambda c: load_model(c.run_with('model-epoch1.pt', torch.ones(3))),
    ValueError,
    r"'.*model-epoch1.pt' is not an apnet-zsl model \(it lacks "
    r'config, dataset',
)
case(
    'load_model/model-file-a-checkpoint',
    lambda c: load_model(c.run_with('model-epoch1.pt', checkpoint_of(SMALL))),
    ValueError,
    r"'.*model-epoch1.pt' is not an apnet-zsl model",
)
case(
    'load_model/model-weights-of-another-size',
    lambda c: load_model(
        c.run_with('model-epoch1.pt', saved_model(c, attribute_dim=17))
    ),
    ValueError,
    r"'.*model-epoch1.pt' holds no model of its configuration "
    r'\(RuntimeError',
)
case(
    'load_model/model-config-unknown-key',
    lambda c: load_model(
        c.run_with(
            'model-epoch1.pt',
            saved_model(c, config={**SMALL.to_dict(), 'depth': 3}),
        )
    ),
    ValueError,
    r"'.*model-epoch1.pt' holds no model of its configuration "
    r"\(ValueError: .*'depth'",
)
case(
    'load_model/model-config-bad-value',
    lambda c: load_model(
        c.run_with(
            'model-epoch1.pt',
            saved_model(c, config={**SMALL.to_dict(), 'epochs': 0}),
        )
    ),
    ValueError,
    r"'.*model-epoch1.pt' holds no model of its configuration "
    r"\(ValueError: 'epochs'",
)


def checkpoint_of(config: TrainConfig) -> dict:
    return {
        'epoch': 1,
        'config': config.to_dict(),
        'model': {},
        'optimizer': {},
        'scheduler': {},
        'sampler': {},
        'history': [],
    }


def saved_model(c: Ctx, **changes) -> dict:
    saved = torch.load(c.run / 'model-epoch1.pt', weights_only=True)
    return {**saved, **changes}


def diverging_model(c: Ctx) -> APNet:
    model = build_model(SMALL, c.data, c.data.seen_classes)
    with torch.no_grad():  # What a learning rate far too high leads to.
        model.head.lin_out.bias.fill_(math.nan)
    return model


# ---------------------------------------------------------------------------
# The command line: one line 'error: ...' (status 1), or argparse's usage
# error (status 2) for a malformed flag
# ---------------------------------------------------------------------------
USAGE = r'apnet-zsl( \w+)?: error: '
cli(
    'cli/no-command',
    lambda c: [],
    USAGE + r'the following arguments are '
    r'required: command',
    status=2,
)
cli(
    'cli/unknown-command',
    lambda c: ['fit'],
    USAGE + r'argument command: '
    r"invalid choice: 'fit'",
    status=2,
)
cli(
    'cli/train-without-dataset',
    lambda c: ['train', '--root', str(c.tmp), '--out', str(c.tmp)],
    USAGE + r'the following arguments are required: --dataset',
    status=2,
)
cli(
    'cli/evaluate-without-run',
    lambda c: ['evaluate'],
    USAGE + r'the following arguments are required: --run',
    status=2,
)
# A flag's value: malformed (argparse, status 2) or out of range (status 1).
for flag, value, status, message in [
    ('--graph', 'gcn', 2, r"invalid choice: 'gcn'"),
    ('--knn-k', '0', 1, r"'knn_k' must be positive \(got 0\)"),
    ('--knn-space', 'projected', 2, r"invalid choice: 'projected'"),
    ('--epochs', 'abc', 2, r"invalid int value: 'abc'"),
    ('--n-way', '1.5', 2, r"invalid int value: '1.5'"),
    ('--lr', 'abc', 2, r"invalid float value: 'abc'"),
    ('--device', 'tpu', 2, r"invalid choice: 'tpu'"),
    ('--recipe', 'slow', 2, r"invalid choice: 'slow'"),
    ('--variant', 'mine', 2, r"invalid choice: 'mine'"),
    ('--seed', 'abc', 2, r"invalid int value: 'abc'"),
    ('--lr-decay-epoch', 'soon', 2, r'invalid _optional_int value'),
    ('--epochs', '0', 1, r"'epochs' must be positive \(got 0\)"),
    ('--epochs', '-5', 1, r"'epochs' must be positive"),
    ('--n-way', '1', 1, r"'n_way' must be at least 2"),
    ('--k-shot', '0', 1, r"'k_shot' must be positive"),
    ('--num-centroids', '0', 1, r"'num_centroids' must be positive"),
    ('--class-channels', '0', 1, r"'class_channels' must be positive"),
    ('--logit-scale', '0', 1, r"'logit_scale' must be positive"),
    ('--logit-scale', 'nan', 1, r"'logit_scale' must be a finite number"),
    ('--lr', '-1', 1, r"'lr' must be positive"),
    ('--lr', 'inf', 1, r"'lr' must be a finite number"),
    ('--weight-decay', '-1', 1, r"'weight_decay' must be at least 0"),
    ('--lr-decay', '0', 1, r"'lr_decay' must be positive"),
    ('--threshold', '2', 1, r"'threshold' must lie in \[-1, 1\]"),
    (
        '--propagation-temperature',
        '-1',
        1,
        r"'propagation_temperature' must be at least 0",
    ),
    (
        '--seen-val-fraction',
        '1',
        1,
        r"'seen_val_fraction' must lie in "
        r'\(0, 1\)',
    ),
    (
        '--lr-decay-epoch',
        '0',
        1,
        r"'lr_decay_epoch' must be positive or "
        r'None',
    ),
    (
        '--iterations-per-epoch',
        '0',
        1,
        r"'iterations_per_epoch' must be "
        r'positive or None',
    ),
]:
    if status == 2:
        message = USAGE + f'argument {flag}: {message}'
    cli(
        f'cli/train{flag}={value}',
        lambda c, flag=flag, value=value: c.train(flag, value),
        message,
        status,
    )
cli(
    'cli/train--n-way-above-seen-classes',
    lambda c: c.train('--n-way', '7'),
    r'n_way=7 exceeds the 6 seen classes of TINY: use n_way <= 6',
)
cli(
    'cli/train--dataset-missing',
    lambda c: c.train(root=c.tmp) + ['--dataset', 'NOPE'],
    r"No dataset folder 'NOPE' in '.*' \(found: nothing\)",
)
cli(
    'cli/train--root-a-file',
    lambda c: c.train(root=write(c.tmp / 'r', 'x')),
    r"The data root '.*r' is a file: pass the folder holding <DATASET>/",
)
cli(
    'cli/train--out-a-file',
    lambda c: c.train(out=write(c.tmp / 'o', 'x')),
    r"the run directory '.*o' is a file: choose another --out",
)
cli(
    'cli/train--out-under-a-file',
    lambda c: c.train(out=write(c.tmp / 'o', 'x') / 'run'),
    r"cannot create the output folder '.*run' \(Not a directory\)",
)
cli(
    'cli/tune--out-under-a-file',
    lambda c: (
        [
            'tune',
            '--dataset',
            'TINY',
            '--root',
            str(c.tiny_root),
            '--out',
            str(write(c.tmp / 'o', 'x') / 'grid'),
            '--grid',
            'lr=1e-3',
        ]
        + SMALL_FLAGS[:-3]
    ),
    r"cannot create the output folder '.*lr=0.001' \(Not a directory\)",
)
cli(
    'cli/simulate--out-under-a-file',
    lambda c: [
        'simulate',
        '--dataset',
        'TOY',
        '--data-root',
        str(c.toy()),
        '--out',
        str(write(c.tmp / 'o', 'x')),
    ],
    r"cannot create the output folder '.*TOY' \(Not a directory\)",
)
cli(
    'cli/baselines--seed-negative',
    lambda c: [
        'baselines',
        '--dataset',
        'TINY',
        '--root',
        str(c.tiny_root),
        '--seed',
        '-1',
    ],
    r"'seed' must lie in \[0, 2\^32 - 1\] \(got -1\)",
)
cli(
    'cli/baselines--seen-val-fraction-1',
    lambda c: [
        'baselines',
        '--dataset',
        'TINY',
        '--root',
        str(c.tiny_root),
        '--seen-val-fraction',
        '1',
    ],
    r"'seen_val_fraction' must lie in \(0, 1\) \(got 1.0\)",
)
cli(
    'cli/baselines--out-directory',
    lambda c: [
        'baselines',
        '--dataset',
        'TINY',
        '--root',
        str(c.tiny_root),
        '--out',
        str(c.tmp),
    ],
    r"--out '.*' is a directory: give a JSON file name",
)
cli(
    'cli/baselines-no-features',
    lambda c: ['baselines', '--dataset', 'TINY', '--root', str(c.tmp)],
    r"No dataset folder 'TINY' in",
)
cli(
    'cli/compare--out-under-a-file',
    lambda c: [
        'compare',
        '--runs',
        str(c.run),
        '--out',
        str(write(c.tmp / 'o', 'x') / 'table.md'),
    ],
    r"the output folder '.*o' is a file: choose another folder",
)
cli(
    'cli/train--resume-nothing',
    lambda c: c.train('--resume'),
    r"nothing to resume in '.*run'.*start without --resume",
)
cli(
    'cli/train-into-finished-run',
    lambda c: c.train(out=c.run_copy()),
    r"'.*run' holds a finished run: choose another --out, or pass "
    r'--overwrite',
)
cli(
    'cli/train--resume-finished-run',
    lambda c: c.train('--resume', out=c.run_copy()),
    r"'.*run' holds a finished run \(metrics.json\): nothing to resume",
)
cli(
    'cli/train-into-interrupted-run',
    lambda c: c.train(out=c.checkpoint_run(b'x')),
    r'holds an interrupted run \(continue it with --resume\)',
)
cli(
    'cli/train--resume-corrupt-checkpoint',
    lambda c: c.train('--resume', out=c.checkpoint_run(CORRUPT)),
    r"'.*checkpoint.pt' is not a readable apnet-zsl checkpoint",
)
cli(
    'cli/train--resume-empty-checkpoint',
    lambda c: c.train('--resume', out=c.checkpoint_run(b'')),
    r"'.*checkpoint.pt' is not a readable apnet-zsl checkpoint",
)
cli(
    'cli/train--resume-foreign-checkpoint',
    lambda c: c.train('--resume', out=c.checkpoint_run({'weights': 1})),
    r"'.*checkpoint.pt' is not an apnet-zsl checkpoint \(it lacks",
)
cli(
    'cli/train--resume-other-configuration',
    lambda c: c.train(
        '--resume', out=c.checkpoint_run(checkpoint_of(SMALL.replace(lr=0.5)))
    ),
    r"'.*checkpoint.pt' was written with another configuration \(differs "
    r'in: lr, lr_decay_epoch\)',
)
cli(
    'cli/evaluate-no-metrics.json',
    lambda c: ['evaluate', '--run', str(c.tmp)],
    r"No metrics.json in '.*'",
)
cli(
    'cli/evaluate-run-a-file',
    lambda c: ['evaluate', '--run', str(write(c.tmp / 'f', 'x'))],
    r"No metrics.json in '.*f'",
)
cli(
    'cli/evaluate-corrupt-metrics.json',
    lambda c: ['evaluate', '--run', str(c.run_with('metrics.json', '{'))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r'\(JSONDecodeError',
)
cli(
    'cli/evaluate-metrics.json-without-config',
    lambda c: ['evaluate', '--run', str(c.run_with('metrics.json', '{}'))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r'\(KeyError',
)
cli(
    'cli/evaluate-root-without-dataset',
    lambda c: ['evaluate', '--run', str(c.run), '--root', str(c.tmp)],
    r"No dataset folder 'TINY' in '.*'",
)
cli(
    'cli/evaluate-corrupt-model',
    lambda c: [
        'evaluate',
        '--run',
        str(c.run_with('model-epoch1.pt', CORRUPT)),
    ],
    r"'.*model-epoch1.pt' is not a readable apnet-zsl model",
)
cli(
    'cli/evaluate-foreign-model',
    lambda c: [
        'evaluate',
        '--run',
        str(c.run_with('model-epoch1.pt', {'a': 1})),
    ],
    r"'.*model-epoch1.pt' is not an apnet-zsl model",
)
cli(
    'cli/compare-no-metrics.json',
    lambda c: ['compare', '--runs', str(c.run), str(c.tmp)],
    r"No metrics.json in '.*'",
)
cli(
    'cli/compare-metrics.json-without-figures',
    lambda c: [
        'compare',
        '--runs',
        str(
            c.run_with(
                'metrics.json',
                json.dumps(
                    {k: v for k, v in c.metrics().items() if k != 'gzsl_h'}
                ),
            )
        ),
    ],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(KeyError: 'gzsl_h'\)",
)
cli(
    'cli/evaluate-unfinished-run',
    lambda c: ['evaluate', '--run', str(c.checkpoint_run(b'x'))],
    r"'.*' holds an unfinished run \(last checkpoint \w+\.pt, no "
    r'metrics.json\).*--resume',
)
cli(
    'cli/evaluate-metrics.json-without-row-epochs',
    lambda c: [
        'evaluate',
        '--run',
        str(
            c.run_with(
                'metrics.json', json.dumps({**c.metrics(), 'epochs': {}})
            )
        ),
    ],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(TypeError: 'epochs' has no epoch for the zsl row\)",
)
cli(
    'cli/compare-metrics.json-baseline-without-figures',
    lambda c: [
        'compare',
        '--runs',
        str(
            c.run_with(
                'metrics.json',
                json.dumps(
                    {**c.metrics(), 'baselines': {'ESZSL': {'zsl_acc': 'x'}}}
                ),
            )
        ),
    ],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(TypeError: baseline 'ESZSL' lacks a figure\)",
)
cli(
    'cli/compare-metrics.json-baseline-half-calibrated',
    lambda c: [
        'compare',
        '--runs',
        str(
            c.run_with(
                'metrics.json',
                json.dumps(
                    {
                        **c.metrics(),
                        'baselines': {
                            'ESZSL': {
                                **dict.fromkeys(
                                    (
                                        'zsl_acc',
                                        'gzsl_unseen',
                                        'gzsl_seen',
                                        'gzsl_h',
                                    ),
                                    1.0,
                                ),
                                'gzsl_cal_h': 'oops',
                            }
                        },
                    }
                ),
            )
        ),
    ],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(TypeError: baseline 'ESZSL' lacks a figure\)",
)
cli(
    'cli/compare-a-run-twice',
    lambda c: ['compare', '--runs', str(c.run), str(c.run) + '/.'],
    r"'run_dirs' \(--runs\) names the run '.*' twice: each run counts once",
)
cli(
    'cli/compare-a-copy-of-a-run',  # Was averaged as a second seed.
    lambda c: ['compare', '--runs', str(c.run), str(c.run_copy())],
    r"'run_dirs' \(--runs\): '.*' is a copy of the run '.*'",
)
cli(
    'cli/compare-simulated-and-real',
    lambda c: [
        'compare',
        '--runs',
        str(c.run),
        str(
            c.run_with(
                'metrics.json', json.dumps({**c.metrics(), 'simulated': False})
            )
        ),
    ],
    r"'run_dirs' \(--runs\) mixes simulated and real features",
)
cli(
    'cli/compare--out-a-directory',
    lambda c: ['compare', '--runs', str(c.run), '--out', str(c.tmp)],
    r"--out '.*' is a directory: give a markdown file name",
)
cli(
    'cli/plot--out-not-png',
    lambda c: ['plot', '--run', str(c.run), '--out', str(c.tmp / 'a.jpg')],
    r"the figure's path '.*a.jpg' must name a .png file",
)
cli(
    'cli/plot--out-.png',
    lambda c: ['plot', '--run', str(c.run), '--out', str(c.tmp / '.png')],
    r"the figure's path '.*/.png' must name a .png file, e.g. "
    r"'classes.png'",
)
cli(
    'cli/plot--out-a-directory',
    lambda c: ['plot', '--run', str(c.run), '--out', str(c.tmp)],
    r"the figure's path '.*' is a directory: name a .png file",
)
cli(
    'cli/plot--out-under-a-file',  # Before the (corrupt) model is read.
    lambda c: [
        'plot',
        '--run',
        str(c.run_with('model-epoch1.pt', b'')),
        '--out',
        str(write(c.tmp / 'f', 'x') / 'a.png'),
    ],
    r"the output folder '.*f' is a file: choose another folder",
)
cli(
    'cli/plot-corrupt-model',
    lambda c: [
        'plot',
        '--run',
        str(c.run_with('model-epoch1.pt', b'')),
        '--out',
        str(c.tmp / 'a.png'),
    ],
    r"'.*model-epoch1.pt' is not a readable apnet-zsl model",
)
cli(
    'cli/plot-corrupt-metrics.json',
    lambda c: [
        'plot',
        '--run',
        str(c.run_with('metrics.json', 'nope')),
        '--out',
        str(c.tmp / 'a.png'),
    ],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run",
)
cli(
    'cli/pipeline--epochs=0',
    lambda c: ['pipeline', '--out', str(c.tmp), '--epochs', '0'],
    r"'epochs' must be positive",
)
cli(
    'cli/pipeline-differently-simulated-data',
    lambda c: (
        [
            'pipeline',
            '--dataset',
            'TINY',
            '--out',
            str(c.pipeline_out()),
            '--isotropic-noise',
            '3.0',
        ]
        + SMALL_FLAGS
    ),
    r"'.*TINY' was simulated differently: .*isotropic_noise",
)
cli(
    'cli/pipeline-data-not-simulated',
    lambda c: (
        [
            'pipeline',
            '--dataset',
            'TOY',
            '--out',
            str(write_dataset(c.tmp / 'data').parents[1]),
        ]
        + SMALL_FLAGS
    ),
    r"'.*TOY' holds features that are not simulated \(no SIMULATED.json\)",
)
if not torch.cuda.is_available():
    cli(
        'cli/train--device=cuda-without-cuda',
        lambda c: c.train('--device', 'cuda'),
        r'--device cuda, but torch sees no CUDA device',
    )
    cli(
        'cli/evaluate--device=cuda-without-cuda',
        lambda c: ['evaluate', '--run', str(c.run), '--device', 'cuda'],
        r'--device cuda, but torch sees no CUDA device',
    )


def test_the_table():
    check_table(CASES)


@pytest.mark.filterwarnings('ignore::apnet_pyg.zsl.train.NotLearningWarning')
@CASES.parametrize()
def test_bad_input(row: Case, bad_input_ctx: Ctx, capsys):
    check_row(row, bad_input_ctx, capsys)
