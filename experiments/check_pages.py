"""The docs check: every generated page, and every figure a summary page
quotes from a record, still matches its record.

    python experiments/check_pages.py

Exits 1 with one line per stale page or figure (and the command that
regenerates it); CI runs it through ``tests/experiments/test_pages.py``.
The pages and their generators: ``experiments/README.md``.
"""

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / 'experiments'


def load(name: str):
    r"""The generator :obj:`experiments/<name>.py` as a module."""
    spec = importlib.util.spec_from_file_location(name, HERE / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demo_block() -> List[str]:
    r"""The demo's block of results.md against its recorded run, and the
    record's configuration against what :obj:`make demo` runs today."""
    return [f'results.md: {p}' for p in load('results_output').check()]


def demo_table() -> List[str]:
    r"""The AWA2 rows of results.md's summary table: the demo's run on the
    Intel Xeon of the table's other rows (its record)."""
    results_output = load('results_output')
    record = json.loads(
        (
            results_output.RECORD_JSON.parent / 'pipeline-AWA2-intel-xeon.json'
        ).read_text()
    )
    rows = {}
    for line in results_output.PAGE.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip('|').split('|')]
        if len(cells) == 9 and cells[0] == 'AWA2':
            rows[cells[1]] = cells[2:]
    keys = ('zsl_acc', 'gzsl_seen', 'gzsl_unseen', 'gzsl_h')
    expected = {
        "APNet (paper's reading)": [
            f'{record[key]:.1f}'
            for key in keys
            + ('gzsl_cal_seen', 'gzsl_cal_unseen', 'gzsl_cal_h')
        ]
    }
    for name in ('ESZSL', 'SAE'):
        expected[name] = [
            f'{record["baselines"][name][key]:.1f}' for key in keys
        ]
    problems = []
    for name, figures in expected.items():
        shown = rows.get(name, [])[: len(figures)]
        if shown != figures:
            problems.append(
                f"results.md: the AWA2 row '{name}' shows {shown}, its "
                f'record {figures}'
            )
    return problems


def demo_range() -> List[str]:
    r"""The demo's expected range (package data) and its page against the
    record of its seeds."""
    return load('demo_seeds').check()


def unquoted_figures(
    heading: str, pattern: str, pages: str, what: str, where: str
) -> List[str]:
    r"""The figures (matching :obj:`pattern`) that results.md's section
    :obj:`heading` quotes and :obj:`pages` lack, as problems; a problem
    too if the section is missing or quotes none."""
    section = (HERE / 'results.md').read_text().split(heading)
    quoted = re.findall(pattern, section[-1].split('\n## ')[0])
    if len(section) != 2 or not quoted:
        return [f'results.md: no section quoting {where}']
    return [
        f'results.md: {figure} ({what}) is not on {where}'
        for figure in quoted
        if figure not in pages
    ]


def node_classification() -> List[str]:
    r"""The operator's node-classification pages against their records, and
    the table results.md quotes from the first."""
    module = load('node_classification')
    problems = [
        problem
        for page in (
            module.TABLE_OUT,
            module.SEARCH_OUT,
            module.CSBM_OUT,
            module.AUDIT_OUT,
        )
        for problem in module.check(page)
    ]
    problems += unquoted_figures(
        '## The operator on real graphs',
        r'\d+\.\d ± \d+\.\d',
        Path(module.TABLE_OUT).read_text(),
        what='the operator table',
        where=Path(module.TABLE_OUT).name,
    )
    return problems


def zero_shot_nodes() -> List[str]:
    r"""zero-shot-nodes.md is the output of the command its script runs
    today, the DGPN ablation's page is its script's, and every figure
    results.md's section on them quotes is on one of the two pages."""
    problems = load('zero_shot_nodes_results').check()
    ablation = HERE / 'zero-shot-nodes-dgpn-ablation.md'
    text = ablation.read_text()
    if '`python experiments/dgpn_training_ablation.py --dataset' not in text:
        problems.append(
            f'{ablation.name}: not the output of '
            'experiments/dgpn_training_ablation.py: run it again'
        )
    problems += unquoted_figures(
        '## Zero-shot node classification on real data',
        r'\d+\.\d\d',
        (HERE / 'zero-shot-nodes.md').read_text() + text,
        what='zero-shot nodes',
        where=f'zero-shot-nodes.md or {ablation.name}',
    )
    return problems


CHECKS = (
    demo_block,
    demo_table,
    demo_range,
    node_classification,
    zero_shot_nodes,
)


def problems() -> List[str]:
    return [problem for check in CHECKS for problem in check()]


def main() -> int:
    found = problems()
    for problem in found:
        print(problem)
    print(f'{len(found)} stale' if found else 'every page matches its record')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
