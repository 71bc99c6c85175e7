r"""Finished runs next to the published figures (:obj:`apnet-zsl compare`).

For every dataset among the runs, two tables:

* the figures (ZSL, GZSL :math:`U`, :math:`S`, :math:`H`) of APNet's rows
  (ZSL and raw GZSL, each selected on validation, and calibrated stacking)
  and of the baselines the runs carry (:obj:`apnet-zsl train
  --baselines`; raw and calibrated), as the mean and sample standard
  deviation (ddof 1) over the runs, with the published figure on the real
  features in parentheses (:mod:`apnet_pyg.zsl.reporting.published`);
* per run, APNet against ESZSL on the same data: the difference of their
  ZSL accuracies and the ratio of their :math:`H` (raw to raw, and
  calibrated to calibrated where the run's ESZSL records it), under the
  same comparison of the published figures;
* where the runs' baselines record it, the same per run on the validation
  classes: APNet's validation ZSL accuracy at its ZSL row's epoch and the
  baselines' at their chosen hyper-parameters (no test image involved).

Each run counts once in the means: a run named twice, or copied to another
folder, is refused; runs of the same configuration, seed and data that are
not copies (reruns) are noted as such, as are runs trained on different
data.

Runs on simulated features are labelled so: their figures say how the
methods compare on the simulator's generative model, the published ones
are on the real features. One dataset's runs must all be simulated or all
real.
"""

import json
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

from apnet_pyg.zsl.baselines.benchmark import (
    VALIDATION_ACCURACY,
    fit_baselines,
)
from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.zsl.metrics import METRICS, ROWS
from apnet_pyg.zsl.reporting.tables import (
    APNET_ROWS,
    CALIBRATED_FIGURES,
    CALIBRATED_SUFFIX,
    RAW_FIGURES,
    TEST_SELECTED,
)
from apnet_pyg.zsl.rundir import read_run_metrics, run_dataset
from apnet_pyg.zsl.train import validation_task


def compare_runs(
    run_dirs: Sequence[Union[str, Path]],
    fit_missing_baselines: bool = False,
    root: Optional[Union[str, Path]] = None,
) -> Dict[str, Dict[str, Any]]:
    r"""The runs of :obj:`run_dirs` grouped by dataset, in order of first
    appearance: for each, :obj:`simulated` and :obj:`runs` (one summary per
    run: its directory, seeds and the figures of every method it has, by
    :obj:`metrics.json` key, :obj:`None` where it has none).

    With :obj:`fit_missing_baselines`, the baselines of a run trained
    without them are fitted on
    its data (read from :obj:`root`, by
    default from where it was trained; the run is not modified) and its
    summary's :obj:`baselines_fitted` is :obj:`True`.

    Each run counts once: a folder named twice, or a copy of a run (the
    same :obj:`metrics.json`, which records its timings: a rerun's
    differ), is refused."""
    if not run_dirs:
        raise ValueError("'run_dirs' is empty: name at least one run")
    seen_dirs = set()
    # A run's whole record (figures, history, timings) -> its folder: a
    # copy of a run at another path is no second run.
    seen_records: Dict[str, Union[str, Path]] = {}
    groups: Dict[str, Dict[str, Any]] = {}
    for run_dir in run_dirs:
        key = Path(run_dir).resolve()
        if key in seen_dirs:
            raise ValueError(
                f"'run_dirs' (--runs) names the run "
                f"'{run_dir}' twice: each run counts once in "
                f'the means'
            )
        seen_dirs.add(key)
        saved = read_run_metrics(run_dir)
        record = json.dumps(saved, sort_keys=True)
        if record in seen_records:
            raise ValueError(
                f"'run_dirs' (--runs): '{run_dir}' is a copy of the run "
                f"'{seen_records[record]}' (the same metrics.json, timings "
                f'included): each run counts once in the means, so name '
                f'one of them'
            )
        seen_records[record] = run_dir
        fitted = fit_missing_baselines and not saved.get('baselines')
        if fitted:
            try:
                data = run_dataset(run_dir, saved, root)
            except (OSError, ValueError) as error:
                # Name the run: several may be read.
                raise type(error)(
                    f"the data of the run '{run_dir}' (for its baselines): "
                    f'{error}'
                ) from None
            # Calibrated on the run's own validation task.
            saved = {
                **saved,
                'baselines': fit_baselines(
                    data,
                    root or saved['data_root'],
                    validation_task(
                        data, TrainConfig.from_dict(saved['config'])
                    ),
                ),
            }
        summary = _summary(str(run_dir), saved)
        summary['baselines_fitted'] = fitted
        group = groups.setdefault(
            summary['dataset'], {'simulated': summary['simulated'], 'runs': []}
        )
        if group['simulated'] != summary['simulated']:
            first = group['runs'][0]['run']
            raise ValueError(
                f"'run_dirs' (--runs) mixes simulated and real features for "
                f"{summary['dataset']} ('{first}' and '{run_dir}'): compare "
                f'them separately'
            )
        group['runs'].append(summary)
    return groups


def _figures(
    saved: Dict[str, Any], sources: Dict[str, str]
) -> Dict[str, Optional[float]]:
    return {
        key: saved.get(sources[key]) if key in sources else None
        for key in METRICS
    }


def _summary(run_dir: str, saved: Dict[str, Any]) -> Dict[str, Any]:
    figures = {
        name: _figures(saved, sources) for name, sources in APNET_ROWS.items()
    }
    if saved.get('test_selected'):  # --report-test-selected
        figures[TEST_SELECTED] = {
            key: saved['test_selected'].get(key) for key in METRICS
        }
    validation = {}  # method: validation ZSL accuracy, where recorded
    selection = saved.get('model_selection')
    if isinstance(selection, dict):
        validation['APNet'] = selection['zsl'].get(ROWS['zsl'])
    for name, baseline in (saved.get('baselines') or {}).items():
        figures[name] = _figures(baseline, RAW_FIGURES)
        figures[name + CALIBRATED_SUFFIX] = _figures(
            baseline, CALIBRATED_FIGURES
        )
        validation[name] = baseline.get(VALIDATION_ACCURACY)
    simulation = saved.get('simulation') or {}
    # The configuration as TrainConfig reads it: every option, checked.
    config = TrainConfig.from_dict(saved['config']).to_dict()
    # What the data is besides its seed: the simulator's version and
    # options, or the real features' fingerprint.
    data = (
        {
            'version': simulation.get('version'),
            **(simulation.get('options') or {}),
        }
        if saved.get('simulated')
        else saved.get('data') or {}
    )
    return {
        'run': run_dir,
        'dataset': saved['dataset'],
        'simulated': bool(saved.get('simulated')),
        'seed': config['seed'],
        'selection': saved.get('selection', 'validation'),
        'data_seed': simulation.get('seed'),
        'data': data,
        'config': config,
        'figures': figures,
        'validation': validation,
    }
