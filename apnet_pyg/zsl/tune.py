r"""APNet's hyper-parameters chosen on the validation task, as the
closed-form baselines' are.

ESZSL and SAE pick their regularisers on the validation classes
(:mod:`apnet_pyg.zsl.baselines.benchmark`); :func:`tune` gives APNet the same
treatment: every setting of a grid of :class:`TrainConfig` fields runs the
selection phase of a run (:func:`apnet_pyg.zsl.train.select_on_validation`:
train on :obj:`trainclasses1` minus the held-out images, validate on them
and on :obj:`valclasses1` after every epoch), and each row of the result
table (ZSL, GZSL, calibrated GZSL) gets the setting of best validation
metric at its best epoch. No test image is read; what the winners do on the
test classes is for :obj:`apnet-zsl train` with the winning flags to say.

Each setting's selection is saved in :obj:`OUT/<setting>/selection.json`,
so that a tuning that was interrupted continues where it stopped, on the
same data only (each setting records its data's fingerprint, as a run
does, in :obj:`OUT/<setting>/data.json` and in its selection); the summary
is :obj:`OUT/tuning.json`.
"""

import dataclasses
import itertools
import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.environment import describe_environment
from apnet_pyg.files import atomic_write_text, make_output_folder
from apnet_pyg.zsl.config import TrainConfig, parse_option_value
from apnet_pyg.zsl.factory import check_k_shot
from apnet_pyg.zsl.metrics import ROWS, first_best_index
from apnet_pyg.zsl.rundir import (
    DATA_FILE,
    SELECTION_CHECKPOINT,
    check_same_data,
    data_differences,
)
from apnet_pyg.zsl.train import (
    check_config_fits,
    select_on_validation,
    validation_task,
)

#: Fields a grid may not vary: they change the validation task itself (so
#: that settings would be compared on different data) or do not act on the
#: selection phase. The seed may vary: a seed grid measures how much the
#: seed moves the selection (each seed draws its own held-out images), it
#: is not a choice.
FIXED_FIELDS = ('seen_val_fraction', 'model_selection', 'report_test_selected')

SELECTION_FILE = 'selection.json'
SUMMARY_FILE = 'tuning.json'


def parse_grid(items: Sequence[str]) -> Dict[str, List[Any]]:
    r"""A grid from :obj:`KEY=V1,V2,...` items (:obj:`KEY` a
    :class:`TrainConfig` field, with :obj:`-` or :obj:`_`; values parsed
    with the field's type, :obj:`none` for an optional one); a one-line
    error naming the item otherwise."""
    fields = {option.name for option in dataclasses.fields(TrainConfig)}
    grid: Dict[str, List[Any]] = {}
    for item in items:
        key, equals, text = item.partition('=')
        name = key.strip().replace('-', '_')
        if not equals or not text.strip():
            raise ValueError(
                f"--grid '{item}': write KEY=VALUE[,VALUE...], "
                f'e.g. lr=1e-5,2e-5'
            )
        if name not in fields:
            raise ValueError(
                f"--grid '{item}': '{key}' is not a training "
                f'option (see apnet-zsl train --help)'
            )
        if name in FIXED_FIELDS:
            raise ValueError(
                f"--grid '{item}': '{key}' cannot be tuned (it "
                f'changes the validation task or does not act '
                f'on it)'
            )
        if name in grid:
            raise ValueError(f"--grid '{item}': '{key}' is given twice")
        values = [
            parse_option_value(name, value.strip(), '--grid', item)
            for value in text.split(',')
        ]
        if len(set(map(repr, values))) < len(values):
            raise ValueError(f"--grid '{item}': a value is repeated")
        grid[name] = values
    if not grid:
        raise ValueError('--grid: give at least one KEY=VALUE[,VALUE...]')
    return grid


def grid_settings(
    base: TrainConfig, grid: Dict[str, List[Any]]
) -> List[Tuple[Dict[str, Any], TrainConfig]]:
    r"""Every setting of :obj:`grid` (in the order of its keys and values)
    with its configuration, :obj:`base` with the setting's values; each is
    checked before anything is trained."""
    keys = list(grid)
    settings = []
    for values in itertools.product(*(grid[key] for key in keys)):
        setting = dict(zip(keys, values))
        try:
            settings.append((setting, base.replace(**setting)))
        except ValueError as error:
            raise ValueError(
                f'--grid setting {setting_name(setting)}: {error}'
            ) from None
    return settings


def setting_name(setting: Dict[str, Any]) -> str:
    r"""The setting as :obj:`key=value,key=value` (its folder's name)."""
    return ','.join(f'{key}={value}' for key, value in setting.items())


def tune(
    load_data: Callable[[TrainConfig], ZSLDataset],
    base: TrainConfig,
    grid: Dict[str, List[Any]],
    out: Union[str, Path],
    device: Union[str, torch.device] = 'cpu',
    progress: bool = True,
) -> Dict[str, Any]:
    r"""Runs the selection phase for every setting of :obj:`grid` on top of
    :obj:`base` and returns (and writes to :obj:`out/tuning.json`) each
    setting's selection and, per row of :data:`~apnet_pyg.zsl.metrics.ROWS`,
    the winning setting: best validation metric, the earliest setting in
    grid order on ties.

    Args:
        load_data (callable): The dataset for a configuration (its
            :obj:`attributes` decide what the model reads), e.g.
            :obj:`lambda config: load_dataset(root, 'AWA2', config)`.
        base (TrainConfig): The configuration the grid modifies.
        grid (dict): Field name to the values to try (:func:`parse_grid`).
        out (str or Path): Folder of the settings' selections.
        device (str or torch.device, optional): (default: :obj:`"cpu"`)
        progress (bool, optional): Print one line per epoch and setting.
            (default: :obj:`True`)
    """
    if base.model_selection != 'validation':
        raise ValueError(
            f'tuning selects on the validation task: drop '
            f"model_selection='{base.model_selection}'"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(
            f"the tuning folder '{out}' is a file: choose another --out"
        )
    settings = grid_settings(base, grid)
    # Every setting checked against its data before anything is trained.
    datasets: Dict[str, ZSLDataset] = {}
    for _, config in settings:
        if config.attributes not in datasets:
            datasets[config.attributes] = load_data(config)
        data = datasets[config.attributes]
        check_config_fits(config, data)
        if config.training == 'episodic':
            # Else a setting's episodes would fail only once the settings
            # before it had trained.
            split = validation_task(data, config)
            check_k_shot(
                data,
                split.train_images,
                split.train_classes,
                config,
                '--grid' if 'k_shot' in grid else '--k-shot',
            )
    fingerprints = {
        kind: data.fingerprint() for kind, data in datasets.items()
    }
    results = []
    for number, (setting, config) in enumerate(settings, start=1):
        data = datasets[config.attributes]
        fingerprint = fingerprints[config.attributes]
        folder = out / setting_name(setting)
        if progress:
            print(
                f'setting {number}/{len(settings)}: {setting_name(setting)}',
                flush=True,
            )
        result = _finished_setting(folder, config, data, fingerprint)
        if result is None:
            start = time.perf_counter()
            make_output_folder(folder)
            _check_interrupted_setting(folder, fingerprint)
            # Resumes from an interrupted setting's checkpoint, if any.
            selection, history = select_on_validation(
                data, config, folder, device, resume=True, progress=progress
            )
            result = {
                'setting': setting,
                'config': config.to_dict(),
                'dataset': data.name,
                'simulation': data.simulation,
                'data': fingerprint,
                'selection': selection,
                'history': history,
                'environment': describe_environment(device),
                'wall_seconds': time.perf_counter() - start,
            }
            atomic_write_text(
                json.dumps(result, indent=2), folder / SELECTION_FILE
            )
            (folder / SELECTION_CHECKPOINT).unlink()
        elif progress:
            print(f'reusing the finished selection in {folder}', flush=True)
        results.append(result)

    data = next(iter(datasets.values()))
    summary = {
        'dataset': data.name,
        'simulated': data.simulated,
        'base': base.to_dict(),
        'grid': grid,
        'settings': [
            {
                'setting': r['setting'],
                **{row: r['selection'][row] for row in ROWS},
            }
            for r in results
        ],
        'best': best_settings(results),
        # Where this summary was made; each setting's selection.json says
        # where it ran (bit for bit only on one processor and thread count).
        'environment': describe_environment(device),
    }
    atomic_write_text(json.dumps(summary, indent=2), out / SUMMARY_FILE)
    return summary


def best_settings(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    r"""Per row, the setting of best validation metric (the earliest on
    ties), its epoch and metric."""
    best = {}
    for row, metric in ROWS.items():
        index = first_best_index(
            [result['selection'][row][metric] for result in results]
        )
        selected = results[index]['selection'][row]
        best[row] = {
            'setting': results[index]['setting'],
            'epoch': selected['epoch'],
            metric: selected[metric],
        }
        if row == 'gzsl_calibrated':
            best[row]['calibration'] = selected['calibration']
    return best


def _check_interrupted_setting(
    folder: Path, fingerprint: Dict[str, Any]
) -> None:
    r"""Before a setting's selection phase starts or continues in
    :obj:`folder`: an interrupted one there must have run on the same data
    (its checkpoint is continued); records the data for the next time."""
    data_path = folder / DATA_FILE
    if data_path.is_file():
        check_same_data(
            data_path,
            fingerprint,
            'the setting',
            'tune again with the --root it was started with, '
            'or choose another --out',
        )
    elif (folder / SELECTION_CHECKPOINT).is_file():
        raise ValueError(
            f"'{folder / SELECTION_CHECKPOINT}' has no record "
            f'of the data it was trained on ({DATA_FILE}): '
            f'delete it to run the setting from the start'
        )
    atomic_write_text(json.dumps(fingerprint, indent=2), data_path)


def _finished_setting(
    folder: Path,
    config: TrainConfig,
    data: ZSLDataset,
    fingerprint: Dict[str, Any],
) -> Optional[Dict[str, Any]]:
    r"""The saved selection of this setting in :obj:`folder` if it was made
    with the same configuration on the same data (:obj:`fingerprint`), else
    :obj:`None` (and a selection of something else there is an error, not
    overwritten)."""
    path = folder / SELECTION_FILE
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
        same = (
            saved['config'] == config.to_dict()
            and saved['dataset'] == data.name
            and saved['simulation'] == data.simulation
            and not data_differences(saved['data'], fingerprint)
        )
    except (ValueError, KeyError, TypeError):
        same = False
    if not same:
        raise FileExistsError(
            f"'{path}' holds the selection of another "
            f'configuration or dataset: choose another '
            f"--out or delete '{folder}'"
        )
    return saved
