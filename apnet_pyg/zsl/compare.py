r"""Finished runs next to the published figures (:obj:`apnet-zsl compare`).

For every dataset among the runs, two tables:

* the figures (ZSL, GZSL :math:`U`, :math:`S`, :math:`H`) of APNet's rows
  (ZSL and raw GZSL, each selected on validation, and calibrated stacking)
  and of the baselines the runs carry (:obj:`apnet-zsl train
  --baselines`; raw and calibrated), as the mean and sample standard
  deviation (ddof 1) over the runs, with the published figure on the real
  features in parentheses (:mod:`apnet_pyg.zsl.published`);
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
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from apnet_pyg.zsl.baselines import VALIDATION_ACCURACY, fit_baselines
from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.zsl.metrics import METRICS
from apnet_pyg.zsl.published import SOURCES, published
from apnet_pyg.zsl.reports import SIMULATED_LABEL, TEST_SELECTED_LABEL
from apnet_pyg.zsl.rundir import read_run_metrics, run_dataset
from apnet_pyg.zsl.train import ROWS, validation_task

CALIBRATED_SUFFIX = ', calibrated stacking'
CALIBRATED = 'APNet' + CALIBRATED_SUFFIX
TEST_SELECTED = f'APNet, {TEST_SELECTED_LABEL}'
# The metrics.json key of each figure of a method's raw row and of its
# calibrated row (which has no ZSL figure), APNet's and the baselines'.
RAW_FIGURES = dict(zip(METRICS, METRICS))
CALIBRATED_FIGURES = {'gzsl_unseen': 'gzsl_cal_unseen',
                      'gzsl_seen': 'gzsl_cal_seen', 'gzsl_h': 'gzsl_cal_h'}
APNET_ROWS = {'APNet': RAW_FIGURES, CALIBRATED: CALIBRATED_FIGURES}
# The published figures the optimistic row is shown with: the paper
# selects on the test set. No published figure is calibrated.
PUBLISHED_AS = {TEST_SELECTED: 'APNet'}


def compare_runs(run_dirs: Sequence[Union[str, Path]],
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
            raise ValueError(f"'run_dirs' (--runs) names the run "
                             f"'{run_dir}' twice: each run counts once in "
                             f"the means")
        seen_dirs.add(key)
        saved = read_run_metrics(run_dir)
        record = json.dumps(saved, sort_keys=True)
        if record in seen_records:
            raise ValueError(
                f"'run_dirs' (--runs): '{run_dir}' is a copy of the run "
                f"'{seen_records[record]}' (the same metrics.json, timings "
                f"included): each run counts once in the means, so name "
                f"one of them")
        seen_records[record] = run_dir
        fitted = fit_missing_baselines and not saved.get('baselines')
        if fitted:
            try:
                data = run_dataset(run_dir, saved, root)
            except (OSError, ValueError) as error:
                # Name the run: several may be read.
                raise type(error)(
                    f"the data of the run '{run_dir}' (for its baselines): "
                    f"{error}") from None
            # Calibrated on the run's own validation task.
            saved = {**saved, 'baselines': fit_baselines(
                data, root or saved['data_root'], validation_task(
                    data, TrainConfig.from_dict(saved['config'])))}
        summary = _summary(str(run_dir), saved)
        summary['baselines_fitted'] = fitted
        group = groups.setdefault(summary['dataset'], {
            'simulated': summary['simulated'], 'runs': []})
        if group['simulated'] != summary['simulated']:
            first = group['runs'][0]['run']
            raise ValueError(
                f"'run_dirs' (--runs) mixes simulated and real features for "
                f"{summary['dataset']} ('{first}' and '{run_dir}'): compare "
                f"them separately")
        group['runs'].append(summary)
    return groups


def _figures(saved: Dict[str, Any],
             sources: Dict[str, str]) -> Dict[str, Optional[float]]:
    return {key: saved.get(sources[key]) if key in sources else None
            for key in METRICS}


def _summary(run_dir: str, saved: Dict[str, Any]) -> Dict[str, Any]:
    figures = {name: _figures(saved, sources)
               for name, sources in APNET_ROWS.items()}
    if saved.get('test_selected'):  # --report-test-selected
        figures[TEST_SELECTED] = {key: saved['test_selected'].get(key)
                                  for key in METRICS}
    validation = {}  # method: validation ZSL accuracy, where recorded
    selection = saved.get('model_selection')
    if isinstance(selection, dict):
        validation['APNet'] = selection['zsl'].get(ROWS['zsl'])
    for name, baseline in (saved.get('baselines') or {}).items():
        figures[name] = _figures(baseline, RAW_FIGURES)
        figures[name + CALIBRATED_SUFFIX] = _figures(baseline,
                                                     CALIBRATED_FIGURES)
        validation[name] = baseline.get(VALIDATION_ACCURACY)
    simulation = saved.get('simulation') or {}
    # The configuration as TrainConfig reads it: every option, checked.
    config = TrainConfig.from_dict(saved['config']).to_dict()
    # What the data is besides its seed: the simulator's version and
    # options, or the real features' fingerprint.
    data = ({'version': simulation.get('version'),
             **(simulation.get('options') or {})}
            if saved.get('simulated') else saved.get('data') or {})
    return {'run': run_dir, 'dataset': saved['dataset'],
            'simulated': bool(saved.get('simulated')),
            'seed': config['seed'],
            'selection': saved.get('selection', 'validation'),
            'data_seed': simulation.get('seed'), 'data': data,
            'config': config, 'figures': figures,
            'validation': validation}


def format_comparison(groups: Dict[str, Dict[str, Any]]) -> str:
    r"""The tables of :func:`compare_runs` as markdown."""
    return '\n\n'.join(_format_group(dataset, group)
                       for dataset, group in groups.items())


def _format_group(dataset: str, group: Dict[str, Any]) -> str:
    runs = group['runs']
    tag = (f'{SIMULATED_LABEL}; the published figures in parentheses are '
           f'on the real features' if group['simulated'] else 'real features')
    lines = [f'{dataset}, {len(runs)} run{"s" * (len(runs) != 1)}: {tag}',
             '']
    differing = sorted(key for key in runs[0]['config'] if key != 'seed'
                       and len({repr(run['config'][key])
                                for run in runs}) > 1)
    if differing:
        lines += [f"Note: the runs' configurations differ in "
                  f"{', '.join(differing)}.", '']
    data_keys = sorted({key for run in runs for key in run['data']})
    differing = [key for key in data_keys
                 if len({repr(run['data'].get(key)) for run in runs}) > 1]
    if differing:
        # Else the spread would read as that of seeds alone.
        what = ('simulator options (beyond the data seed)'
                if group['simulated'] else 'data fingerprints')
        lines += [f"Note: the runs were trained on different data: their "
                  f"{what} differ in {', '.join(differing)}.", '']
    # Not copies (compare_runs refuses those) but reruns of one seed: their
    # spread is the machine's or the resumption's, not that of seeds.
    reruns: Dict[str, List[str]] = {}
    for run in runs:
        key = json.dumps([run['config'], run['data_seed'], run['data']],
                         sort_keys=True)
        reruns.setdefault(key, []).append(run['run'])
    for names in reruns.values():
        if len(names) > 1:
            lines += [f"Note: {', '.join(names)} have the same "
                      f"configuration, seed and data: reruns of one seed, "
                      f"not independent seeds.", '']
    unselected = [run['run'] for run in runs
                  if run['selection'] != 'validation']
    if unselected:
        lines += [f"Note: APNet's rows of {', '.join(unselected)} are its "
                  f"last epoch's (trained with model_selection='none'), not "
                  f"chosen on validation.", '']
    lines += ['| method | ZSL | U | S | H |', '|---|---|---|---|---|']
    methods = list(dict.fromkeys(name for run in runs
                                 for name in run['figures']))
    for name in methods:
        twin = PUBLISHED_AS.get(
            name, None if name.endswith(CALIBRATED_SUFFIX) else name)
        reference = published(dataset, twin) if twin else \
            dict.fromkeys(METRICS)
        cells = [_mean_cell([run['figures'].get(name, {}).get(key)
                             for run in runs], reference[key])
                 for key in METRICS]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    missing = [run['run'] for run in runs if 'ESZSL' not in run['figures']]
    fitted = [run['run'] for run in runs if run.get('baselines_fitted')]
    lines += ['', '| run | seed | data seed | ZSL: APNet - ESZSL | '
              'H: APNet / ESZSL | calibrated H: APNet / ESZSL |',
              '|---|---|---|---|---|---|']
    for run in runs:
        apnet, calibrated = (run['figures']['APNet'],
                             run['figures'][CALIBRATED])
        unknown = dict.fromkeys(METRICS)
        eszsl = run['figures'].get('ESZSL', unknown)
        # Calibrated against calibrated: both constants are chosen on the
        # same validation task ('-' where the run has no baselines).
        eszsl_calibrated = run['figures'].get('ESZSL' + CALIBRATED_SUFFIX,
                                              unknown)
        data_seed = '-' if run['data_seed'] is None else run['data_seed']
        lines.append(
            f"| {run['run']} | {run['seed']} | {data_seed} | "
            f"{_difference(apnet['zsl_acc'], eszsl['zsl_acc'])} | "
            f"{_ratio(apnet['gzsl_h'], eszsl['gzsl_h'])} | "
            f"{_ratio(calibrated['gzsl_h'], eszsl_calibrated['gzsl_h'])} |")
    paper, eszsl = published(dataset, 'APNet'), published(dataset, 'ESZSL')
    lines.append(f"| published ({SOURCES['APNet']}; {SOURCES['ESZSL']}) "
                 f"| | | {_difference(paper['zsl_acc'], eszsl['zsl_acc'])} "
                 f"| {_ratio(paper['gzsl_h'], eszsl['gzsl_h'])} | |")
    lines += _validation_table(runs)
    if fitted:
        lines += ['', f"Baselines fitted now on the data of "
                  f"{', '.join(fitted)} (not saved in the run)."]
    if missing:
        lines += ['', f"No baselines in {', '.join(missing)}: train with "
                  f"--baselines, or compare with --baselines, to compare "
                  f"with ESZSL."]
    return '\n'.join(lines)


def _validation_table(runs: List[Dict[str, Any]]) -> List[str]:
    # Only where a baseline records its validation accuracy (runs trained
    # before it did have none).
    baselines = list(dict.fromkeys(
        name for run in runs for name, value in run['validation'].items()
        if name != 'APNet' and value is not None))
    if not baselines:
        return []
    fractions = sorted({run['config']['seen_val_fraction'] for run in runs
                        if run['validation'].get('APNet') is not None},
                       reverse=True)
    kept = ' or '.join(f'{100 * (1 - f):.0f}%' for f in fractions) or '-'
    lines = ['', f"On the validation classes (valclasses1; no test image), "
             f"ZSL accuracy: APNet at its ZSL row's epoch, trained on {kept} "
             f"of the trainclasses1 images; the baselines at their chosen "
             f"hyper-parameters, fitted on all of them.", '',
             '| run | APNet | ' + ' | '.join(baselines) +
             ' | APNet - ESZSL |',
             '|---|---|' + '---|' * len(baselines) + '---|']
    for run in runs:
        values = run['validation']
        cells = ['-' if values.get(name) is None else
                 f'{values[name]:.1f}' for name in ['APNet'] + baselines]
        lines.append(f"| {run['run']} | {' | '.join(cells)} | "
                     f"{_difference(values.get('APNet'), values.get('ESZSL'))}"
                     f" |")
    return lines


def _mean_cell(values: List[Optional[float]],
               reference: Optional[float]) -> str:
    known = [value for value in values if value is not None]
    if not known:
        text = ''
    elif len(known) == 1:
        text = f'{known[0]:.1f}'
    else:
        text = f'{statistics.mean(known):.1f} ± {statistics.stdev(known):.1f}'
    if known and len(known) < len(values):
        text += f" [{len(known)} run{'s' * (len(known) != 1)}]"
    if reference is not None:
        text = f'{text} ({reference:.1f})'.strip()
    return text


def _difference(value: Optional[float], baseline: Optional[float]) -> str:
    if value is None or baseline is None:
        return '-'
    return f'{value - baseline:+.1f}'


def _ratio(value: Optional[float], baseline: Optional[float]) -> str:
    if value is None or baseline is None:
        return '-'
    if baseline == 0:
        return 'ESZSL H is 0'
    return f'{value / baseline:.1f}x'
