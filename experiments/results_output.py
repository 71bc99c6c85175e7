"""The main job's sample output in experiments/results.md, from a recorded run.

    # run `make demo`'s command, record it, update experiments/results.md:
    python experiments/results_output.py
    # rewrite the block from the record (no run):
    python experiments/results_output.py --from-record
    # exit 1 if experiments/results.md or the record is stale:
    python experiments/results_output.py --check

Running it executes `apnet-zsl pipeline --dataset AWA2 --out runs/awa2
--overwrite` (what `make demo` runs), keeps its standard output in
`experiments/results/pipeline-AWA2.txt` and its metrics (with the wall time
and peak memory of the run) in `experiments/results/pipeline-AWA2.json`,
and rewrites the block of experiments/results.md between the
`pipeline-output` markers from them. `--check` (also run by the test suite)
re-renders the block from the record and compares it with
experiments/results.md, and compares the record's configuration and
simulator settings with what the command would use today: a change of
defaults makes it fail until the demo is run again.
"""

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / 'experiments' / 'results.md'
RECORD_TEXT = ROOT / 'experiments' / 'results' / 'pipeline-AWA2.txt'
RECORD_JSON = ROOT / 'experiments' / 'results' / 'pipeline-AWA2.json'
COMMAND = [
    'apnet-zsl',
    'pipeline',
    '--dataset',
    'AWA2',
    '--out',
    'runs/awa2',
    '--overwrite',
]
# Where the pipeline writes the run: <--out>/run.
RUN_DIR = ROOT / COMMAND[COMMAND.index('--out') + 1] / 'run'
START, END = '<!-- pipeline-output:start -->', '<!-- pipeline-output:end -->'
# Epoch lines shown at the start and end of each training phase.
EPOCH_LINES_KEPT = 2


def abridge(output: str) -> str:
    r"""The command's output with each phase's epoch lines cut to the first
    and last :data:`EPOCH_LINES_KEPT`, and the configuration line wrapped
    (it is complete in the record)."""
    lines, phase = [], []

    def flush():
        if len(phase) > 2 * EPOCH_LINES_KEPT:
            lines.extend(
                phase[:EPOCH_LINES_KEPT] + ['...'] + phase[-EPOCH_LINES_KEPT:]
            )
        else:
            lines.extend(phase)
        phase.clear()

    for line in output.splitlines():
        if re.match(r'^(selection|final) epoch \d+/\d+:', line):
            if phase and not line.startswith(phase[0].split(' ')[0]):
                flush()
            phase.append(line)
            continue
        flush()
        if '; config: {' in line:
            head, config = line.split('; config: ', 1)
            lines.append(head + ';')
            lines.append(
                'config: '
                + ', '.join(
                    f'{key}={value}'
                    for key, value in json.loads(config).items()
                )
            )
        else:
            lines.append(line)
    flush()
    return '\n'.join(lines)


def render(text: str, record: dict) -> str:
    r"""The page's block: what the command printed (abridged), and how long
    it took."""
    minutes, seconds = divmod(round(record['command_wall_seconds']), 60)
    return '\n'.join(
        [
            START,
            f'`{" ".join(COMMAND[:-1])}` printed (run on '
            f'{record["machine"]}, {minutes} min {seconds} s wall clock, '
            f'{record["command_peak_rss_mb"] / 1024:.1f} GB peak memory; the '
            f'whole output is in '
            f'[experiments/results/pipeline-AWA2.txt]'
            f'(results/pipeline-AWA2.txt)):',
            '',
            '```text',
            abridge(text),
            '```',
            END,
        ]
    )


def current_setup() -> dict:
    r"""The configuration and simulator settings the command uses today."""
    from apnet_pyg.data.simulator import SIMULATOR_VERSION, default_options
    from apnet_pyg.zsl.cli import build_parser
    from apnet_pyg.zsl.commands import config_from_flags

    args = build_parser().parse_args(COMMAND[1:])
    return {
        'config': config_from_flags(args).to_dict(),
        'simulator_version': SIMULATOR_VERSION,
        'simulator_options': default_options('AWA2'),
    }


def check() -> list:
    r"""The reasons the page's block or the record is stale (empty: it is
    current)."""
    problems = []
    from apnet_pyg.zsl.config import TrainConfig

    record = json.loads(RECORD_JSON.read_text())
    setup = current_setup()
    # An option added since the record was made takes its default, which
    # is the behaviour from before it existed (as when a run is loaded).
    recorded = TrainConfig.from_dict(record['config']).to_dict()
    if recorded != setup['config']:
        changed = sorted(
            k for k, v in setup['config'].items() if recorded.get(k) != v
        )
        problems.append(f'the configuration changed ({", ".join(changed)})')
    simulation = record['simulation']
    if (
        simulation['version'] != setup['simulator_version']
        or simulation['options'] != setup['simulator_options']
    ):
        problems.append('the simulator changed')
    block = PAGE.read_text()
    block = block[block.index(START) : block.index(END) + len(END)]
    if block != render(RECORD_TEXT.read_text(), record):
        problems.append(f'{PAGE.name} differs from the record')
    return problems


def machine() -> str:
    from apnet_pyg.environment import available_cores, cpu_model

    return f'{available_cores()} cores of an {cpu_model()}'


def update() -> None:
    start = time.perf_counter()
    # This interpreter's apnet-zsl, not whichever is first on PATH.
    result = subprocess.run(
        [sys.executable, '-m', 'apnet_pyg.zsl', *COMMAND[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f'the command failed:\n{result.stderr}')
    from apnet_pyg.zsl.rundir import METRICS_FILE

    metrics = json.loads((RUN_DIR / METRICS_FILE).read_text())
    record = {key: value for key, value in metrics.items() if key != 'history'}
    record.update(
        command=' '.join(COMMAND),
        machine=machine(),
        command_wall_seconds=wall,
        # The child's high-water mark (KB on Linux).
        command_peak_rss_mb=resource.getrusage(
            resource.RUSAGE_CHILDREN
        ).ru_maxrss
        / 1024,
    )
    RECORD_TEXT.write_text(result.stdout)
    RECORD_JSON.write_text(json.dumps(record, indent=2) + '\n')
    write_block(result.stdout, record)
    print(
        f'updated {PAGE.relative_to(ROOT)} and {RECORD_TEXT.name} '
        f'({wall / 60:.1f} min)'
    )


def write_block(text: str, record: dict) -> None:
    page = PAGE.read_text()
    block = page[page.index(START) : page.index(END) + len(END)]
    PAGE.write_text(page.replace(block, render(text, record)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--check', action='store_true')
    parser.add_argument(
        '--from-record',
        action='store_true',
        help='rewrite the block from the record, no run',
    )
    args = parser.parse_args()
    if args.check:
        problems = check()
        if problems:
            sys.exit(
                'stale: '
                + '; '.join(problems)
                + ': run python experiments/results_output.py'
            )
        print(f'{PAGE.relative_to(ROOT)} matches the recorded run')
    elif args.from_record:
        write_block(
            RECORD_TEXT.read_text(), json.loads(RECORD_JSON.read_text())
        )
    else:
        update()


if __name__ == '__main__':
    main()
