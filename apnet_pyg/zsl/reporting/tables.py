r"""Every table of results the ZSL application prints, as markdown (a run,
the baselines, the per-class accuracies, a tuning, a comparison of runs with
the published figures), and the labels every report puts on results: one
owner of the "simulated" label."""

import json
import statistics
from typing import Any, Dict, List, Optional

from apnet_pyg.zsl.metrics import METRICS, ROWS
from apnet_pyg.zsl.reporting.published import SOURCES, published

#: What every result on simulated features is labelled with.
SIMULATED_LABEL = 'SIMULATED features (not a benchmark result)'
#: What a result whose epoch was chosen on the test set is labelled with.
TEST_SELECTED_LABEL = 'test-set selected (optimistic)'

# The rows of a comparison of runs (apnet_pyg.zsl.reporting.compare).
CALIBRATED_SUFFIX = ', calibrated stacking'
CALIBRATED = 'APNet' + CALIBRATED_SUFFIX
TEST_SELECTED = f'APNet, {TEST_SELECTED_LABEL}'
# The metrics.json key of each figure of a method's raw row and of its
# calibrated row (which has no ZSL figure), APNet's and the baselines'.
RAW_FIGURES = dict(zip(METRICS, METRICS))
CALIBRATED_FIGURES = {
    'gzsl_unseen': 'gzsl_cal_unseen',
    'gzsl_seen': 'gzsl_cal_seen',
    'gzsl_h': 'gzsl_cal_h',
}
APNET_ROWS = {'APNet': RAW_FIGURES, CALIBRATED: CALIBRATED_FIGURES}
# The published figures the optimistic row is shown with: the paper
# selects on the test set. No published figure is calibrated.
PUBLISHED_AS = {TEST_SELECTED: 'APNet'}

ROW_TITLES = {
    'zsl': 'ZSL (epoch of best validation ZSL accuracy)',
    'gzsl': 'GZSL (epoch of best validation H)',
    'gzsl_calibrated': 'GZSL, calibrated stacking (epoch and constant of '
    'best validation H)',
}
UNSELECTED_ROW_TITLES = {
    'zsl': 'ZSL (last epoch)',
    'gzsl': 'GZSL (last epoch)',
}


def format_table(metrics: Dict, title: Optional[str] = None) -> str:
    r"""The result table of a run as markdown: one row per selection (ZSL,
    GZSL, calibrated GZSL, and the test-selected rows if reported),
    labelled simulated when the features were."""
    tag = SIMULATED_LABEL if metrics.get('simulated') else 'real features'
    epochs = metrics.get('epochs', {})
    titles = (
        ROW_TITLES
        if metrics.get('selection', 'validation') == 'validation'
        else UNSELECTED_ROW_TITLES
    )

    def epoch(row):
        return str(epochs[row]) if row in epochs else '-'

    lines = [
        title or f'{metrics.get("dataset", "?")}: {tag}',
        '',
        '| row | epoch | ZSL acc | S | U | H |',
        '|---|---|---|---|---|---|',
        f'| {titles["zsl"]} | {epoch("zsl")} | '
        f'{metrics["zsl_acc"]:.1f} | | | |',
        f'| {titles["gzsl"]} | {epoch("gzsl")} | | '
        f'{metrics["gzsl_seen"]:.1f} | {metrics["gzsl_unseen"]:.1f} | '
        f'{metrics["gzsl_h"]:.1f} |',
    ]
    if 'gzsl_cal_h' in metrics:
        lines.append(
            f'| {ROW_TITLES["gzsl_calibrated"]}, c = '
            f'{metrics["calibration"]:.3g} | {epoch("gzsl_calibrated")} | | '
            f'{metrics["gzsl_cal_seen"]:.1f} | '
            f'{metrics["gzsl_cal_unseen"]:.1f} | '
            f'{metrics["gzsl_cal_h"]:.1f} |'
        )
    selected = metrics.get('test_selected')
    if selected:
        lines.append(
            f'| {selected["label"]}: best test ZSL / best test H | '
            f'{selected["zsl_epoch"]} / {selected["gzsl_epoch"]} | '
            f'{selected["zsl_acc"]:.1f} | {selected["gzsl_seen"]:.1f} | '
            f'{selected["gzsl_unseen"]:.1f} | {selected["gzsl_h"]:.1f} |'
        )
    if metrics.get('class_graph_edges') is not None:
        initial = metrics.get('class_graph_edges_initial')
        lines += [
            '',
            f"class graph of the GZSL row's model: "
            f'{metrics["class_graph_edges"]} directed edges among all '
            f'classes'
            + ('' if initial is None else f' ({initial} before training)'),
        ]
    return '\n'.join(lines)


def format_baselines(results: Dict) -> str:
    r"""The baselines' rows as markdown: hyper-parameters chosen on the
    validation classes, GZSL raw (as published) and with calibrated
    stacking (the constant :math:`c` chosen on the validation task, as
    APNet's)."""
    from apnet_pyg.zsl.baselines.benchmark import hyper_parameters

    lines = [
        '',
        '| baseline (closed form; chosen on the validation classes) '
        '| ZSL acc | S | U | H | calibrated S | U | H |',
        '|---|---|---|---|---|---|---|---|',
    ]
    for name, metrics in results.items():
        constant = f'; c = {metrics["calibration"]:.3g}'
        cells = [
            metrics[key]
            for key in (
                'zsl_acc',
                'gzsl_seen',
                'gzsl_unseen',
                'gzsl_h',
                'gzsl_cal_seen',
                'gzsl_cal_unseen',
                'gzsl_cal_h',
            )
        ]
        lines.append(
            f'| {name} ({hyper_parameters(metrics)}{constant}) | '
            + ' | '.join(f'{cell:.1f}' for cell in cells)
            + ' |'
        )
    return '\n'.join(lines)


def format_per_class(rows: List[Dict]) -> str:
    r"""The ZSL row's test accuracy per unseen class as markdown (the terms
    of its per-class mean)."""
    lines = [
        'ZSL row, per unseen class (test images among the unseen classes):',
        '',
        '| unseen class | images | ZSL acc | most of its errors go to |',
        '|---|---|---|---|',
    ]
    lines += [
        f'| {row["class"]} | {row["images"]} | {row["accuracy"]:.1f} | '
        f'{row["taken_by"] or "-"} |'
        for row in rows
    ]
    return '\n'.join(lines)


def format_tuning(summary: Dict[str, Any]) -> str:
    r"""The tuning as markdown: a row per setting with its validation
    metrics (epoch), the winners marked, labelled simulated when the
    features were."""
    tag = f', {SIMULATED_LABEL}' if summary['simulated'] else ''
    keys = list(summary['grid'])
    best = summary['best']
    lines = [
        f"{summary['dataset']}{tag}: APNet's hyper-parameters chosen "
        f'on the validation task (trainclasses1 minus the held-out '
        f'images; valclasses1); no test image read. * marks each '
        f"column's best.",
        '',
        '| ' + ' | '.join(keys) + ' | val ZSL acc (epoch) | '
        'val H (epoch) | val calibrated H (epoch) |',
        '|---' * (len(keys) + 3) + '|',
    ]
    for entry in summary['settings']:
        cells = [str(entry['setting'][key]) for key in keys]
        for row, metric in ROWS.items():
            mark = '*' if entry['setting'] == best[row]['setting'] else ''
            cells.append(
                f'{entry[row][metric]:.1f}{mark} ({entry[row]["epoch"]})'
            )
        lines.append('| ' + ' | '.join(cells) + ' |')
    lines += [
        '',
        "Train a row's winner on all seen classes and test it: "
        "apnet-zsl train with tune's flags and",
    ]
    for row in ROWS:
        flags = ' '.join(
            f'--{key.replace("_", "-")} {value}'
            for key, value in best[row]['setting'].items()
        )
        lines.append(f'- {row}: {flags}')
    return '\n'.join(lines)


def format_comparison(groups: Dict[str, Dict[str, Any]]) -> str:
    r"""The tables of :func:`compare_runs` as markdown."""
    return '\n\n'.join(
        _format_group(dataset, group) for dataset, group in groups.items()
    )


def _format_group(dataset: str, group: Dict[str, Any]) -> str:
    runs = group['runs']
    tag = (
        f'{SIMULATED_LABEL}; the published figures in parentheses are '
        f'on the real features'
        if group['simulated']
        else 'real features'
    )
    lines = [f'{dataset}, {len(runs)} run{"s" * (len(runs) != 1)}: {tag}', '']
    differing = sorted(
        key
        for key in runs[0]['config']
        if key != 'seed'
        and len({repr(run['config'][key]) for run in runs}) > 1
    )
    if differing:
        lines += [
            f"Note: the runs' configurations differ in "
            f'{", ".join(differing)}.',
            '',
        ]
    data_keys = sorted({key for run in runs for key in run['data']})
    differing = [
        key
        for key in data_keys
        if len({repr(run['data'].get(key)) for run in runs}) > 1
    ]
    if differing:
        # Else the spread would read as that of seeds alone.
        what = (
            'simulator options (beyond the data seed)'
            if group['simulated']
            else 'data fingerprints'
        )
        lines += [
            f'Note: the runs were trained on different data: their '
            f'{what} differ in {", ".join(differing)}.',
            '',
        ]
    # Not copies (compare_runs refuses those) but reruns of one seed: their
    # spread is the machine's or the resumption's, not that of seeds.
    reruns: Dict[str, List[str]] = {}
    for run in runs:
        key = json.dumps(
            [run['config'], run['data_seed'], run['data']], sort_keys=True
        )
        reruns.setdefault(key, []).append(run['run'])
    for names in reruns.values():
        if len(names) > 1:
            lines += [
                f'Note: {", ".join(names)} have the same '
                f'configuration, seed and data: reruns of one seed, '
                f'not independent seeds.',
                '',
            ]
    unselected = [
        run['run'] for run in runs if run['selection'] != 'validation'
    ]
    if unselected:
        lines += [
            f"Note: APNet's rows of {', '.join(unselected)} are its "
            f"last epoch's (trained with model_selection='none'), not "
            f'chosen on validation.',
            '',
        ]
    lines += ['| method | ZSL | U | S | H |', '|---|---|---|---|---|']
    methods = list(
        dict.fromkeys(name for run in runs for name in run['figures'])
    )
    for name in methods:
        twin = PUBLISHED_AS.get(
            name, None if name.endswith(CALIBRATED_SUFFIX) else name
        )
        reference = (
            published(dataset, twin) if twin else dict.fromkeys(METRICS)
        )
        cells = [
            _mean_cell(
                [run['figures'].get(name, {}).get(key) for run in runs],
                reference[key],
            )
            for key in METRICS
        ]
        lines.append(f'| {name} | {" | ".join(cells)} |')
    missing = [run['run'] for run in runs if 'ESZSL' not in run['figures']]
    fitted = [run['run'] for run in runs if run.get('baselines_fitted')]
    lines += [
        '',
        '| run | seed | data seed | ZSL: APNet - ESZSL | '
        'H: APNet / ESZSL | calibrated H: APNet / ESZSL |',
        '|---|---|---|---|---|---|',
    ]
    for run in runs:
        apnet, calibrated = (
            run['figures']['APNet'],
            run['figures'][CALIBRATED],
        )
        unknown = dict.fromkeys(METRICS)
        eszsl = run['figures'].get('ESZSL', unknown)
        # Calibrated against calibrated: both constants are chosen on the
        # same validation task ('-' where the run has no baselines).
        eszsl_calibrated = run['figures'].get(
            'ESZSL' + CALIBRATED_SUFFIX, unknown
        )
        data_seed = '-' if run['data_seed'] is None else run['data_seed']
        lines.append(
            f'| {run["run"]} | {run["seed"]} | {data_seed} | '
            f'{_difference(apnet["zsl_acc"], eszsl["zsl_acc"])} | '
            f'{_ratio(apnet["gzsl_h"], eszsl["gzsl_h"])} | '
            f'{_ratio(calibrated["gzsl_h"], eszsl_calibrated["gzsl_h"])} |'
        )
    paper, eszsl = published(dataset, 'APNet'), published(dataset, 'ESZSL')
    lines.append(
        f'| published ({SOURCES["APNet"]}; {SOURCES["ESZSL"]}) '
        f'| | | {_difference(paper["zsl_acc"], eszsl["zsl_acc"])} '
        f'| {_ratio(paper["gzsl_h"], eszsl["gzsl_h"])} | |'
    )
    lines += _validation_table(runs)
    if fitted:
        lines += [
            '',
            f'Baselines fitted now on the data of '
            f'{", ".join(fitted)} (not saved in the run).',
        ]
    if missing:
        lines += [
            '',
            f'No baselines in {", ".join(missing)}: train with '
            f'--baselines, or compare with --baselines, to compare '
            f'with ESZSL.',
        ]
    return '\n'.join(lines)


def _validation_table(runs: List[Dict[str, Any]]) -> List[str]:
    # Only where a baseline records its validation accuracy (runs trained
    # before it did have none).
    baselines = list(
        dict.fromkeys(
            name
            for run in runs
            for name, value in run['validation'].items()
            if name != 'APNet' and value is not None
        )
    )
    if not baselines:
        return []
    fractions = sorted(
        {
            run['config']['seen_val_fraction']
            for run in runs
            if run['validation'].get('APNet') is not None
        },
        reverse=True,
    )
    kept = ' or '.join(f'{100 * (1 - f):.0f}%' for f in fractions) or '-'
    lines = [
        '',
        f'On the validation classes (valclasses1; no test image), '
        f"ZSL accuracy: APNet at its ZSL row's epoch, trained on {kept} "
        f'of the trainclasses1 images; the baselines at their chosen '
        f'hyper-parameters, fitted on all of them.',
        '',
        '| run | APNet | ' + ' | '.join(baselines) + ' | APNet - ESZSL |',
        '|---|---|' + '---|' * len(baselines) + '---|',
    ]
    for run in runs:
        values = run['validation']
        cells = [
            '-' if values.get(name) is None else f'{values[name]:.1f}'
            for name in ['APNet'] + baselines
        ]
        lines.append(
            f'| {run["run"]} | {" | ".join(cells)} | '
            f'{_difference(values.get("APNet"), values.get("ESZSL"))}'
            f' |'
        )
    return lines


def _mean_cell(
    values: List[Optional[float]], reference: Optional[float]
) -> str:
    known = [value for value in values if value is not None]
    if not known:
        text = ''
    elif len(known) == 1:
        text = f'{known[0]:.1f}'
    else:
        text = f'{statistics.mean(known):.1f} ± {statistics.stdev(known):.1f}'
    if known and len(known) < len(values):
        text += f' [{len(known)} run{"s" * (len(known) != 1)}]'
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
