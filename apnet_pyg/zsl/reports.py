r"""The tables of a run's results, as markdown, and the labels every report
of this package puts on results: one owner of the "simulated" label."""
from typing import Dict, List, Optional

#: What every result on simulated features is labelled with.
SIMULATED_LABEL = 'SIMULATED features (not a benchmark result)'
#: What a result whose epoch was chosen on the test set is labelled with.
TEST_SELECTED_LABEL = 'test-set selected (optimistic)'

ROW_TITLES = {
    'zsl': 'ZSL (epoch of best validation ZSL accuracy)',
    'gzsl': 'GZSL (epoch of best validation H)',
    'gzsl_calibrated': 'GZSL, calibrated stacking (epoch and constant of '
    'best validation H)',
}
UNSELECTED_ROW_TITLES = {'zsl': 'ZSL (last epoch)',
                         'gzsl': 'GZSL (last epoch)'}




def format_table(metrics: Dict, title: Optional[str] = None) -> str:
    r"""The result table of a run as markdown: one row per selection (ZSL,
    GZSL, calibrated GZSL, and the test-selected rows if reported),
    labelled simulated when the features were."""
    tag = SIMULATED_LABEL if metrics.get('simulated') else 'real features'
    epochs = metrics.get('epochs', {})
    titles = ROW_TITLES if metrics.get('selection', 'validation') == \
        'validation' else UNSELECTED_ROW_TITLES

    def epoch(row):
        return str(epochs[row]) if row in epochs else '-'

    lines = [title or f"{metrics.get('dataset', '?')}: {tag}", '',
             '| row | epoch | ZSL acc | S | U | H |',
             '|---|---|---|---|---|---|',
             f"| {titles['zsl']} | {epoch('zsl')} | "
             f"{metrics['zsl_acc']:.1f} | | | |",
             f"| {titles['gzsl']} | {epoch('gzsl')} | | "
             f"{metrics['gzsl_seen']:.1f} | {metrics['gzsl_unseen']:.1f} | "
             f"{metrics['gzsl_h']:.1f} |"]
    if 'gzsl_cal_h' in metrics:
        lines.append(
            f"| {ROW_TITLES['gzsl_calibrated']}, c = "
            f"{metrics['calibration']:.3g} | {epoch('gzsl_calibrated')} | | "
            f"{metrics['gzsl_cal_seen']:.1f} | "
            f"{metrics['gzsl_cal_unseen']:.1f} | "
            f"{metrics['gzsl_cal_h']:.1f} |")
    selected = metrics.get('test_selected')
    if selected:
        lines.append(
            f"| {selected['label']}: best test ZSL / best test H | "
            f"{selected['zsl_epoch']} / {selected['gzsl_epoch']} | "
            f"{selected['zsl_acc']:.1f} | {selected['gzsl_seen']:.1f} | "
            f"{selected['gzsl_unseen']:.1f} | {selected['gzsl_h']:.1f} |")
    if metrics.get('class_graph_edges') is not None:
        initial = metrics.get('class_graph_edges_initial')
        lines += ['', f"class graph of the GZSL row's model: "
                  f"{metrics['class_graph_edges']} directed edges among all "
                  f"classes" + ('' if initial is None else
                                f" ({initial} before training)")]
    return '\n'.join(lines)


def format_baselines(results: Dict) -> str:
    r"""The baselines' rows as markdown: hyper-parameters chosen on the
    validation classes, GZSL raw (as published) and with calibrated
    stacking (the constant :math:`c` chosen on the validation task, as
    APNet's)."""
    from apnet_pyg.zsl.baselines import hyper_parameters
    lines = ['', '| baseline (closed form; chosen on the validation classes) '
             '| ZSL acc | S | U | H | calibrated S | U | H |',
             '|---|---|---|---|---|---|---|---|']
    for name, metrics in results.items():
        constant = f"; c = {metrics['calibration']:.3g}"
        cells = [metrics[key] for key in ('zsl_acc', 'gzsl_seen',
                                          'gzsl_unseen', 'gzsl_h',
                                          'gzsl_cal_seen', 'gzsl_cal_unseen',
                                          'gzsl_cal_h')]
        lines.append(f"| {name} ({hyper_parameters(metrics)}{constant}) | " +
                     ' | '.join(f'{cell:.1f}' for cell in cells) + ' |')
    return '\n'.join(lines)


def format_per_class(rows: List[Dict]) -> str:
    r"""The ZSL row's test accuracy per unseen class as markdown (the terms
    of its per-class mean)."""
    lines = ["ZSL row, per unseen class (test images among the unseen "
             "classes):", '',
             '| unseen class | images | ZSL acc | most of its errors go to |',
             '|---|---|---|---|']
    lines += [f"| {row['class']} | {row['images']} | {row['accuracy']:.1f} | "
              f"{row['taken_by'] or '-'} |" for row in rows]
    return '\n'.join(lines)
