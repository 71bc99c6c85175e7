r"""A run's directory: its files, checkpoints written atomically, the
checks that a resumed run reads the same data and configuration, and the
readers of a finished run (its metrics, models and dataset)."""

import json
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

from apnet_pyg.checks import is_real_number
from apnet_pyg.data.xlsa17 import ZSLDataset, load_xlsa17
from apnet_pyg.files import replace_atomically
from apnet_pyg.nn.models.apnet import APNet
from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.zsl.factory import model_from_config
from apnet_pyg.zsl.metrics import CALIBRATED_METRICS, METRICS


def atomic_save(obj: Any, path: Path) -> None:
    r""":func:`torch.save` to a temporary file renamed over :obj:`path`: a
    run killed while writing never leaves a corrupt file."""
    replace_atomically(path, lambda tmp: torch.save(obj, tmp))


CHECKPOINT_KEYS = (
    'epoch',
    'config',
    'model',
    'optimizer',
    'scheduler',
    'sampler',
    'history',
)


def _load_quietly(
    path: Union[str, Path], device: Union[str, torch.device]
) -> Any:
    r""":func:`torch.load` with :obj:`weights_only=True`, without the
    warnings it gives on some corrupt files before it fails (a second,
    confusing line before the error that names the file)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return torch.load(path, map_location=device, weights_only=True)


def _load_saved(
    path: Union[str, Path],
    device: Union[str, torch.device],
    keys: Sequence[str],
    what: str,
    remedy: str,
) -> Dict[str, Any]:
    r"""A dictionary saved by this module (a checkpoint or a model) with
    at least :obj:`keys`; a one-line error naming :obj:`path`, the kind of
    file (:obj:`what`) and the :obj:`remedy` otherwise."""
    try:
        saved = _load_quietly(path, device)
    except Exception as error:  # unpickling raises many types
        raise ValueError(
            f"'{path}' is not a readable apnet-zsl {what} "
            f'({type(error).__name__}); {remedy}'
        ) from None
    if not isinstance(saved, dict) or any(key not in saved for key in keys):
        raise ValueError(
            f"'{path}' is not an apnet-zsl {what} (it lacks "
            f'{", ".join(keys)}); {remedy}'
        )
    return saved


def load_checkpoint(
    path: Optional[Union[str, Path]],
    config: TrainConfig,
    device: Union[str, torch.device] = 'cpu',
) -> Dict[str, Any]:
    r"""The training state saved in :obj:`path` by :func:`train_model`,
    checked to be one, of :obj:`config`; a clear error otherwise."""
    if path is None or not Path(path).is_file():
        raise FileNotFoundError(
            f"no checkpoint to resume from at '{path}': start without --resume"
        )
    state = _load_saved(
        path, device, CHECKPOINT_KEYS, 'checkpoint', 'delete it to start over'
    )
    check_same_config(state['config'], config, path)
    return state


def read_json(path: Path) -> Any:
    r"""The content of a JSON file, or :obj:`None` where it does not
    parse (which the caller's check then refuses)."""
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def data_differences(saved: Any, fingerprint: Dict[str, Any]) -> List[str]:
    r"""The entries in which a dataset's :obj:`fingerprint`
    (:meth:`ZSLDataset.fingerprint`) differs from :obj:`saved`, a recorded
    one (empty when they agree)."""
    if not isinstance(saved, dict):
        return sorted(fingerprint)
    if isinstance(saved.get('splits'), str) and 'class_splits' not in saved:
        # Recorded before each list had its own checksum (2026-11-25):
        # those lists cannot be compared, the rest can.
        fingerprint = {
            key: value
            for key, value in fingerprint.items()
            if key not in ('splits', 'class_splits')
        }
    return sorted(
        key for key, value in fingerprint.items() if saved.get(key) != value
    )


def check_same_data(
    path: Path, fingerprint: Dict[str, Any], what: str, remedy: str
) -> None:
    r"""Raises unless the fingerprint recorded in the JSON file :obj:`path`
    is :obj:`fingerprint` (:meth:`ZSLDataset.fingerprint`): :obj:`what`
    (a run, a tuning's setting) was started on other data otherwise."""
    changed = data_differences(read_json(path), fingerprint)
    if changed:
        raise ValueError(
            f"'{path}': {what} was started on other data "
            f'(differs in: {", ".join(changed)}); {remedy}'
        )


def check_same_config(
    saved: Any, config: TrainConfig, path: Union[str, Path]
) -> None:
    r"""Raises unless :obj:`saved` (a configuration's :meth:`to_dict`,
    read from :obj:`path`) is :obj:`config`."""
    if saved != config.to_dict():
        changed = sorted(
            key
            for key, value in config.to_dict().items()
            if not isinstance(saved, dict) or saved.get(key) != value
        )
        raise ValueError(
            f"'{path}' was written with another configuration "
            f'(differs in: {", ".join(changed)}); run again with '
            f'the options it was written with, or start over '
            f'in another output folder'
        )


#: A finished run's record: its rows, epochs, history and configuration.
METRICS_FILE = 'metrics.json'
#: The run's configuration, written when it starts.
CONFIG_FILE = 'config.json'
#: The fingerprint of the run's data (:meth:`ZSLDataset.fingerprint`),
#: written when it starts: a resumed run must read the same data.
DATA_FILE = 'data.json'
#: The selection phase's checkpoint (:func:`select_on_validation`).
SELECTION_CHECKPOINT = 'selection.pt'
#: The final phase's checkpoint (training on all seen classes).
FINAL_CHECKPOINT = 'checkpoint.pt'
RUN_FILES = (METRICS_FILE, SELECTION_CHECKPOINT, FINAL_CHECKPOINT)


def check_run_dir(
    out: Union[str, Path], resume: bool, overwrite: bool
) -> Path:
    r"""Checks, before any work, that :obj:`out` can hold this run: a
    directory or nothing; with :obj:`resume`, an interrupted run to
    continue; else no run at all unless :obj:`overwrite`."""
    if resume and overwrite:
        raise ValueError(
            '--resume continues the run in --out and '
            '--overwrite starts it over: pass one of them'
        )
    if not str(out).strip():  # Path('') is the current folder.
        raise ValueError('the run directory (--out) is empty: name a folder')
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(
            f"the run directory '{out}' is a file: choose another --out"
        )
    present = [name for name in RUN_FILES if (out / name).exists()]
    if resume:
        if METRICS_FILE in present:
            raise FileExistsError(
                f"'{out}' holds a finished run "
                f'({METRICS_FILE}): nothing to resume'
            )
        if not present:
            raise FileNotFoundError(
                f"nothing to resume in '{out}' (no {SELECTION_CHECKPOINT} "
                f'or {FINAL_CHECKPOINT}): start without --resume'
            )
    elif present and not overwrite:
        what = (
            'a finished run'
            if METRICS_FILE in present
            else 'an interrupted run (continue it with --resume)'
        )
        raise FileExistsError(
            f"'{out}' holds {what}: choose another --out, "
            f'or pass --overwrite to start over'
        )
    return out


def clear_run_dir(out: Path) -> None:
    r"""Removes an earlier run from :obj:`out` (:obj:`overwrite`): only once
    every check of the new run has passed, so that a refused run loses
    nothing."""
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)
    # The earlier run's models too: metrics.json no longer names them.
    for model in out.glob(model_file('*')):
        model.unlink()


def model_file(epoch: Union[int, str]) -> str:
    r"""The file name of the model saved at :obj:`epoch` (:obj:`'*'`: the
    glob pattern of them all)."""
    return f'model-epoch{epoch}.pt'


def model_state(
    config: TrainConfig, data: ZSLDataset, model: APNet, epoch: int
) -> Dict[str, Any]:
    return {
        'config': config.to_dict(),
        'dataset': data.name,
        'epoch': epoch,
        'attribute_dim': data.attribute_dim,
        'image_channels': data.features.size(1),
        'num_classes': data.num_classes,
        'state_dict': {
            key: value.cpu() for key, value in model.state_dict().items()
        },
    }


#: What a :obj:`model-epoch<E>.pt` holds (see :func:`model_state`).
MODEL_KEYS = (
    'config',
    'dataset',
    'epoch',
    'attribute_dim',
    'image_channels',
    'num_classes',
    'state_dict',
)

_TRAIN_AGAIN = "train the run again ('apnet-zsl train ... --overwrite')"


def load_model(
    run_dir: Union[str, Path],
    row: str = 'gzsl',
    device: Union[str, torch.device] = 'cpu',
) -> APNet:
    r"""The trained model of a run directory for the result row
    :obj:`row` (:obj:`"zsl"`, :obj:`"gzsl"` or :obj:`"gzsl_calibrated"`),
    read from the :obj:`model-epoch<E>.pt` that :obj:`metrics.json` names
    for it; a clear error, naming the file, for a missing, corrupt or
    foreign one."""
    run_dir = Path(run_dir)
    metrics_path, metrics = _read_metrics(run_dir)
    try:
        models = metrics['models']
        if not isinstance(models, dict) or not all(
            isinstance(name, str) for name in models.values()
        ):
            raise TypeError("'models' is not a dictionary of file names")
    except (KeyError, TypeError) as error:
        raise _not_a_run(metrics_path, error) from None
    if row not in models:
        raise ValueError(
            f"Run '{run_dir}' has no model for row '{row}' "
            f'(it has: {", ".join(models)})'
        )
    path = run_dir / models[row]
    if not path.is_file():
        raise FileNotFoundError(
            f"No trained model at '{path}': {_TRAIN_AGAIN}"
        )
    saved = _load_saved(path, 'cpu', MODEL_KEYS, 'model', _TRAIN_AGAIN)
    try:
        config = TrainConfig.from_dict(saved['config'])
        prior = (
            torch.zeros(saved['num_classes'], saved['num_classes'])
            if config.graph == 'wordnet'
            else None
        )
        model = model_from_config(
            config, saved['attribute_dim'], saved['image_channels'], prior
        )
        model.load_state_dict(saved['state_dict'])
    except (ValueError, TypeError, RuntimeError) as error:
        raise ValueError(
            f"'{path}' holds no model of its configuration "
            f'({type(error).__name__}: {_one_line(error)}); '
            f'{_TRAIN_AGAIN}'
        ) from None
    return model.to(device)


def load_dataset(
    root: Union[str, Path], dataset: str, config: TrainConfig
) -> ZSLDataset:
    r"""The dataset of a run, with the attributes its model reads."""
    return load_xlsa17(root, dataset, attributes=config.attributes)


def read_run_metrics(run_dir: Union[str, Path]) -> Dict[str, Any]:
    r"""A finished run's :obj:`metrics.json`, checked to hold what the
    readers of a run use (its configuration, dataset, selected epochs and
    test figures); a clear error, naming the file, when it does not."""
    metrics_path, saved = _read_metrics(run_dir)
    try:
        TrainConfig.from_dict(saved['config'])
        if not isinstance(saved['dataset'], str):
            raise TypeError("'dataset' is not a name")
        epochs = saved['epochs']  # what evaluate reads
        if not isinstance(epochs, dict):
            raise TypeError("'epochs' is not a dictionary")
        calibrated = 'gzsl_calibrated' in epochs
        for row in ('zsl', 'gzsl') + ('gzsl_calibrated',) * calibrated:
            epoch = epochs.get(row)
            if not (
                is_real_number(epoch) and isinstance(epoch, int) and epoch >= 1
            ):
                raise TypeError(f"'epochs' has no epoch for the {row} row")
        numbers = METRICS + (CALIBRATED_METRICS if calibrated else ())
        for key in numbers:
            if not is_real_number(saved[key]):
                raise TypeError(f"'{key}' is not a number")
        for name, figures in (saved.get('baselines') or {}).items():
            if not isinstance(figures, dict) or not all(
                is_real_number(figures.get(key))
                for key in METRICS + CALIBRATED_METRICS
            ):
                raise TypeError(f'baseline {name!r} lacks a figure')
    except (ValueError, KeyError, TypeError) as error:
        raise _not_a_run(metrics_path, error) from None
    return saved


def load_run(
    run_dir: Union[str, Path],
    root: Optional[Union[str, Path]] = None,
) -> Tuple[Dict[str, Any], ZSLDataset]:
    r"""A finished run's :obj:`metrics.json` (:func:`read_run_metrics`) and
    its dataset (:func:`run_dataset`)."""
    saved = read_run_metrics(run_dir)
    return saved, run_dataset(run_dir, saved, root)


def run_dataset(
    run_dir: Union[str, Path],
    saved: Dict[str, Any],
    root: Optional[Union[str, Path]] = None,
    config: Optional[TrainConfig] = None,
) -> ZSLDataset:
    r"""The dataset of the run in :obj:`run_dir`, whose :obj:`metrics.json`
    reads :obj:`saved`, with the attributes its model reads (or those
    :obj:`config` reads, for a variant of the run): from :obj:`root`, or
    else from the folder the run was trained on; a clear error, naming the
    file, when neither is known."""
    root = root or saved.get('data_root')
    if root is None:
        raise ValueError(
            f"'{Path(run_dir) / METRICS_FILE}' does not say "
            f'where the data was read from: pass its folder as '
            f'root (--root)'
        )
    own = config is None
    if own:
        config = TrainConfig.from_dict(saved['config'])
    data = load_dataset(root, saved['dataset'], config)
    # The run's own attributes: the whole fingerprint must agree (runs
    # from before it was recorded have none).
    if own and 'data' in saved:
        changed = data_differences(saved['data'], data.fingerprint())
        if changed:
            raise ValueError(
                f"the data in '{root}' is not the data the run "
                f"in '{run_dir}' was trained on (differs in: "
                f'{", ".join(changed)}): pass the folder it was '
                f'trained on as root (--root)'
            )
    return data


def _read_metrics(run_dir: Union[str, Path]) -> Tuple[Path, Any]:
    r"""The path and parsed content of a run's :obj:`metrics.json` (its
    fields unchecked); a clear error when it is missing or not JSON."""
    metrics_path = Path(run_dir) / METRICS_FILE
    if not metrics_path.is_file():
        checkpoints = [
            name
            for name in (FINAL_CHECKPOINT, SELECTION_CHECKPOINT)
            if (Path(run_dir) / name).is_file()
        ]
        if checkpoints:
            raise FileNotFoundError(
                f"'{run_dir}' holds an unfinished run (last checkpoint "
                f'{checkpoints[0]}, no {METRICS_FILE}): finish it with '
                f"'apnet-zsl train ... --out {run_dir} --resume' and the "
                f'options it was started with'
            )
        raise FileNotFoundError(
            f"No {METRICS_FILE} in '{run_dir}': is it a "
            f"finished 'apnet-zsl train' run?"
        )
    try:
        return metrics_path, json.loads(metrics_path.read_text())
    except ValueError as error:  # JSON, Unicode too
        raise _not_a_run(metrics_path, error) from None


def _not_a_run(metrics_path: Path, error: BaseException) -> ValueError:
    return ValueError(
        f"'{metrics_path}' is not the {METRICS_FILE} of an "
        f'apnet-zsl run ({type(error).__name__}: '
        f'{_one_line(error)}); {_TRAIN_AGAIN}'
    )


def _one_line(error: BaseException, limit: int = 160) -> str:
    text = ' '.join(str(error).split())
    return text if len(text) <= limit else text[: limit - 3] + '...'
