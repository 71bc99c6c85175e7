"""What ``make demo`` is expected to print: its command over several seeds
of the whole pipeline (simulated data and training), on SIMULATED AWA2.

    python experiments/demo_seeds.py                # seeds 0..4
    python experiments/demo_seeds.py --seeds 0 1 2  # others
    python experiments/demo_seeds.py --check        # files match the record

Each seed runs ``apnet-zsl pipeline --dataset AWA2 --seed S`` (``make
demo``'s command with its seed; seed 0 is the demo itself) in a folder of
its own; its metrics are kept, one JSON line a seed, in
``experiments/results/demo-seeds.jsonl`` (a seed already there is not run
again). From the record it writes the range the pipeline prints beside its
own figures (``apnet_pyg/zsl/reporting/demo_expected.json``: min, max,
mean and sample standard deviation of ZSL accuracy, H and calibrated H)
and the page ``experiments/demo-seeds.md``. Accuracies on simulated
features show how the pipeline behaves, not APNet's AWA2 result.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from apnet_pyg.environment import cpu_model
from apnet_pyg.files import atomic_write_text
from apnet_pyg.scripting import run_script
from apnet_pyg.zsl.reporting.expected import (
    EXPECTED_FILE,
    FIGURES,
    current_setup,
    setup_of,
)

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / 'experiments' / 'results' / 'demo-seeds.jsonl'
PAGE = ROOT / 'experiments' / 'demo-seeds.md'
DATASET = 'AWA2'


def command(seed: int, out: Path) -> List[str]:
    return [
        'apnet-zsl',
        'pipeline',
        '--dataset',
        DATASET,
        '--out',
        str(out),
        '--seed',
        str(seed),
    ]


def read_record() -> List[dict]:
    if not RECORD.exists():
        return []
    return [json.loads(line) for line in RECORD.read_text().splitlines()]


def run_seed(seed: int, folder: Path) -> dict:
    r"""Runs the pipeline with :obj:`seed`; its metrics, the wall clock
    and the processor."""
    out = folder / f'seed{seed}'
    executable = Path(sys.executable).with_name('apnet-zsl')
    argv = command(seed, out)
    if executable.exists():
        argv[0] = str(executable)
    else:  # Not installed as a console script: the module.
        argv[:1] = [sys.executable, '-m', 'apnet_pyg.zsl']
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(
            f'seed {seed}: the pipeline failed: '
            + (result.stderr.strip().splitlines() or ['?'])[-1]
        )
    metrics = json.loads((out / 'run' / 'metrics.json').read_text())
    row = {key: metrics[key] for key in FIGURES}
    row.update(
        seed=seed,
        setup=setup_of(metrics),
        machine=f'{cpu_model()}, {os.cpu_count()} cores',
        seconds=time.perf_counter() - start,
    )
    return row


def summarise(rows: Sequence[dict]) -> dict:
    r"""The range of the record, as the pipeline reads it."""
    setups = {
        json.dumps(current_setup(row['setup']), sort_keys=True) for row in rows
    }
    if len(setups) != 1:
        raise ValueError(
            f'{RECORD} holds runs of {len(setups)} configurations: run the '
            f'seeds again in a new record'
        )
    figures = {}
    for key in FIGURES:
        values = [row[key] for row in rows]
        figures[key] = {
            'min': min(values),
            'max': max(values),
            'mean': statistics.mean(values),
            'std': statistics.stdev(values) if len(values) > 1 else 0.0,
        }
    machines = sorted({row['machine'] for row in rows})
    return {
        'seeds': ', '.join(str(row['seed']) for row in rows),
        'machine': '; '.join(machines),
        'setup': current_setup(rows[0]['setup']),
        'figures': figures,
    }


def render_page(rows: Sequence[dict], expected: dict) -> str:
    lines = [
        '# What `make demo` prints, over seeds (SIMULATED AWA2)',
        '',
        'Written by `python experiments/demo_seeds.py` from its record '
        '(`experiments/results/demo-seeds.jsonl`). Each row is `make '
        "demo`'s command with another seed of the whole pipeline (the "
        'simulated data and the training; seed 0 is the demo), on '
        f'{expected["machine"]}. **Simulated features: not a benchmark '
        'result.** Training amplifies the last bits in which '
        "processors' matrix products differ, by about as much as a change "
        'of seed, so this spread over seeds is the scale of what a run on '
        'another processor prints; it is no guarantee (a run there can '
        'fall outside it by a few points, as results.md shows). The '
        'pipeline prints the range beside its own figures.',
        '',
        '| seed | ' + ' | '.join(FIGURES.values()) + ' |',
        '|---' * (len(FIGURES) + 1) + '|',
    ]
    for row in rows:
        cells = [f'{row[key]:.1f}' for key in FIGURES]
        lines.append(f'| {row["seed"]} | ' + ' | '.join(cells) + ' |')
    for name, pick in (
        ('mean ± std', lambda f: f'{f["mean"]:.1f} ± {f["std"]:.1f}'),
        ('range', lambda f: f'{f["min"]:.1f} to {f["max"]:.1f}'),
    ):
        cells = [pick(expected['figures'][key]) for key in FIGURES]
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def outputs(rows: Sequence[dict]) -> Dict[Path, str]:
    expected = summarise(rows)
    return {
        EXPECTED_FILE: json.dumps(expected, indent=2, sort_keys=True) + '\n',
        PAGE: render_page(rows, expected),
    }


def check() -> List[str]:
    rows = read_record()
    if not rows:
        return [f'{RECORD} is missing: run experiments/demo_seeds.py']
    problems = []
    for path, text in outputs(rows).items():
        if not path.exists() or path.read_text() != text:
            problems.append(
                f'{path.relative_to(ROOT)} differs from {RECORD.name}: run '
                f'python experiments/demo_seeds.py'
            )
    return problems


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--seeds', type=int, nargs='+', default=[0, 1, 2, 3, 4]
    )
    parser.add_argument('--check', action='store_true')
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for problem in problems:
            print(problem)
        if problems:
            raise SystemExit(1)
        print('the range and the page match the record')
        return
    if any(seed < 0 for seed in args.seeds):
        raise ValueError(f'--seeds must be at least 0 (got {args.seeds})')
    done = {row['seed']: row for row in read_record()}
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            if seed in done:
                continue
            row = run_seed(seed, Path(folder))
            done[seed] = row
            with open(RECORD, 'a') as f:
                f.write(json.dumps(row) + '\n')
            print(
                f'seed {seed}: '
                + ', '.join(f'{n} {row[k]:.1f}' for k, n in FIGURES.items())
                + f' ({row["seconds"] / 60:.1f} min)',
                flush=True,
            )
    rows = [done[seed] for seed in sorted(done)]
    for path, text in outputs(rows).items():
        atomic_write_text(text, path)
        print(f'wrote {path.relative_to(ROOT)}')


if __name__ == '__main__':
    sys.exit(run_script(main))
