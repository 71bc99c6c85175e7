r"""The record-keeping and tables of zero-shot node classification
(:mod:`apnet_pyg.zsl.nodes.protocol`): per-run metrics, their summary over
seeds, DGPN's published figures and :func:`format_nodes`.
"""

from typing import Any, Dict, List, Optional

import torch
from torch import Tensor

from apnet_pyg.zsl.metrics import per_class_accuracy

#: DGPN's Table 3 (TEXT-CSDs, Split I and II) and Table 4 (LABEL-CSDs,
#: Split I), accuracy % as (mean, std), by dataset folder name in lower
#: case, CSD kind, split and method.
PUBLISHED = {
    'cora': {
        'text': {
            'I': {
                'RandomGuess': (25.35, 1.28),
                'DAP': (26.56, 0.37),
                'ESZSL': (27.35, 0.00),
                'ZS-GCN': (25.73, 0.46),
                'WDVSc': (30.62, 0.38),
                'Hyperbolic-ZSL': (26.36, 0.41),
                'DGPN': (33.78, 0.28),
            },
            'II': {
                'RandomGuess': (32.69, 1.48),
                'DAP': (30.22, 1.21),
                'ESZSL': (38.82, 0.00),
                'ZS-GCN': (29.53, 0.91),
                'WDVSc': (34.13, 0.67),
                'Hyperbolic-ZSL': (37.02, 0.28),
                'DGPN': (46.40, 0.31),
            },
        },
        'label': {'I': {'ESZSL': (25.79, None), 'DGPN': (32.55, None)}},
    },
}
PUBLISHED_SOURCE = 'Wang et al., KDD 2021 (DGPN), Tables 3 and 4'


def node_metrics(
    prediction: Tensor, target: Tensor, classes: Tensor
) -> Dict[str, Any]:
    r"""Accuracy (%) of :obj:`prediction` against :obj:`target`, balanced
    accuracy (%), the constant-predictor floor (%, the largest class's
    share) and the number of :obj:`classes` predicted at all."""
    counts = torch.bincount(target, minlength=int(classes.max()) + 1)
    return {
        'acc': 100.0 * float((prediction == target).double().mean()),
        'balanced': 100.0 * per_class_accuracy(prediction, target, classes),
        'floor': 100.0 * float(counts[classes].max()) / target.numel(),
        'predicted_classes': int(
            torch.isin(classes, prediction.unique()).sum()
        ),
    }


def summarise(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    r"""Mean and standard deviation of per-seed metrics, and how many seeds
    predicted a single class for every node."""
    out: Dict[str, Any] = {'runs': runs, 'seeds': len(runs)}
    for key in ('acc', 'balanced'):
        values = torch.tensor([run[key] for run in runs], dtype=torch.double)
        out[key] = float(values.mean())
        out[key + '_std'] = float(values.std()) if len(runs) > 1 else 0.0
    out['floor'] = runs[0]['floor']
    out['one_class_seeds'] = sum(run['predicted_classes'] == 1 for run in runs)
    return out


#: The figures of a generalized zero-shot run, raw and calibrated.
GZSL_FIGURES = ('seen', 'unseen', 'h', 'cal_seen', 'cal_unseen', 'cal_h')


def summarise_gzsl(runs: List[Dict[str, float]]) -> Dict[str, Any]:
    r"""Mean and standard deviation over runs (models or ensembles) of
    the generalized zero-shot figures :data:`GZSL_FIGURES` each run has
    (the calibrated ones only with a calibration constant)."""
    out: Dict[str, Any] = {'runs': runs, 'seeds': len(runs)}
    for key in GZSL_FIGURES:
        if key in runs[0]:
            values = torch.tensor(
                [run[key] for run in runs], dtype=torch.double
            )
            out[key] = float(values.mean())
            out[key + '_std'] = float(values.std()) if len(runs) > 1 else 0.0
    return out


def _cell(summary: Optional[Dict[str, Any]], key: str) -> str:
    if summary is None or key not in summary:
        return ''
    text = f'{summary[key]:.2f}'
    if summary['seeds'] > 1:
        text += f' ± {summary[key + "_std"]:.2f}'
    return text


def format_nodes(results: Dict[str, Any]) -> str:
    r"""The tables of :func:`~apnet_pyg.zsl.nodes.protocol.run_nodes`: for each
    CSD kind, accuracy and balanced accuracy (%) on the unseen classes' nodes
    for every split, the constant-predictor floor, and the published rows
    marked "published"."""
    names = list(results['splits'])
    lines = [
        f'{results["dataset"]}: zero-shot node classification; '
        f'{"; ".join(results["splits"].values())}',
        f'choices: {results["selection"]}',
        f'APNet: mean ± std over {len(results["seeds"])} seeds (an '
        'ensemble row: over its ensembles of consecutive seeds); '
        'the baselines are closed-form (one fit)',
    ]
    if results.get('quick'):
        lines.insert(
            0,
            'QUICK MODE (--quick): a smoke test of a few short epochs, '
            'not a result',
        )
    for csd, block in results['csds'].items():
        header = (
            '| method | '
            + ' | '.join(f'{name}: acc | {name}: balanced' for name in names)
            + ' | chosen |'
        )
        lines += [
            '',
            f'{csd.upper()}-CSDs',
            '',
            header,
            '|' + '---|' * (2 * len(names) + 2),
        ]
        for row in block['rows']:
            cells = []
            for name in names:
                summary = row['splits'].get(name)
                cells += [_cell(summary, 'acc'), _cell(summary, 'balanced')]
            note = row['setting']
            if 'epochs' in row:
                note = f'{row["epochs"]} epochs, {note}'
            flags = [
                f'{name}: one class in {summary["one_class_seeds"]}/'
                f'{summary["seeds"]} runs'
                for name, summary in row['splits'].items()
                if summary['one_class_seeds']
            ]
            if flags:
                note += ' (PREDICTS ONE CLASS: ' + '; '.join(flags) + ')'
            lines.append(
                f'| {row["method"]} | ' + ' | '.join(cells) + f' | {note} |'
            )
        oracle = block.get('oracle')
        lines.append(
            '| constant predictor (largest unseen class) | '
            + ' | '.join(
                f'{block["floor"][name]:.2f} | '
                f'{100.0 / results["num_unseen"][name]:.2f}'
                for name in names
            )
            + ' | |'
        )
        for method in sorted(
            {m for split in block['published'].values() for m in split}
        ):
            cells = []
            for name in names:
                figure = block['published'].get(name, {}).get(method)
                if figure is None:
                    cells += ['', '']
                else:
                    std = '' if figure[1] is None else f' ± {figure[1]:.2f}'
                    cells += [f'{figure[0]:.2f}{std}', '']
            if any(cells):
                lines.append(
                    f'| {method} (published) | '
                    + ' | '.join(cells)
                    + f' | {PUBLISHED_SOURCE} |'
                )
        if 'knn_chosen' in block:
            lines += [
                '',
                'k-NN class graph chosen: '
                + ('yes' if block['knn_chosen'] else 'no')
                + f' (the chosen setting: {_graph_of(block["rows"][0])})',
            ]
        if 'refinement_chosen' in block:
            lines.append(
                'prototype refinement chosen: '
                + ('yes' if block['refinement_chosen'] else 'no')
            )
        if oracle is not None:
            cells = []
            for name in names:
                here = oracle['summary'] if name == oracle['split'] else None
                cells += [_cell(here, 'acc'), _cell(here, 'balanced')]
            lines += [
                '',
                'Diagnosis only, not a result (chosen on the unseen '
                "classes' accuracy, never used for a choice or a claim):",
                '',
                header,
                '|' + '---|' * (2 * len(names) + 2),
                f'| APNet, {oracle["label"]} | '
                + ' | '.join(cells)
                + f" | Split {oracle['split']} only, from the selection's "
                f'runs ({oracle["summary"]["seeds"]} seeds or ensembles) '
                f'on its seen classes: {oracle["epochs"]} epochs, '
                f'{oracle["setting"]} |',
            ]
        if block.get('gzsl'):
            lines += ['', *format_gzsl(block['gzsl'], names)]
    return '\n'.join(lines)


def _graph_of(row: Dict[str, Any]) -> str:
    # The class graph's part of a row's setting text.
    text = row['setting']
    start = text.index('graph=')
    end = text.index(', training=', start)
    return text[start:end]


def format_gzsl(rows: List[Dict[str, Any]], names: List[str]) -> List[str]:
    r"""The generalized zero-shot table of
    :func:`~apnet_pyg.zsl.nodes.gzsl.apnet_gzsl` and
    :func:`~apnet_pyg.zsl.nodes.gzsl.closed_form_gzsl` rows: per method
    and split, :math:`S`, :math:`U`, :math:`H` (%) raw and with calibrated
    stacking, and the calibration constant."""
    lines = [
        'Generalized zero-shot (--gzsl): every test node classified among '
        "the split's seen and unseen classes; S and U per-class accuracy "
        'on the seen test nodes (a fixed 20% of each seen class, never '
        "trained on) and on the unseen classes' nodes, H their harmonic "
        'mean; calibrated: the seen scores minus a constant c chosen on '
        "Split II's validation task (best H), no test node read.",
        '',
        '| method | split | S | U | H | S calibrated | U calibrated '
        '| H calibrated | c | chosen |',
        '|' + '---|' * 10,
    ]
    for row in rows:
        constant = row.get('calibration')
        for name in names:
            summary = row['splits'].get(name)
            if summary is None:
                continue
            lines.append(
                f'| {row["method"]} | {name} | '
                + ' | '.join(_cell(summary, key) for key in GZSL_FIGURES)
                + ' | '
                + ('' if constant is None else f'{constant:.4g}')
                + f' | {row["setting"]} |'
            )
    return lines
