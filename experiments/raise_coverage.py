r"""Which ``raise`` statements of apnet_pyg the bad-input tables reach, before
and after they were split by package (issue 43): the old single table
(``tests/test_bad_input.py``, read from git) and the new per-package tables
(``tests/<package>/test_<package>_bad_input.py``, with the module tests that
hold the rows removed as their duplicates) each run under ``coverage``, on
the same working tree, and the executed source lines holding a ``raise``
are compared. Writes ``experiments/bad-input-coverage.md``::

    .venv/bin/python experiments/raise_coverage.py
    .venv/bin/python experiments/raise_coverage.py --before-rev 1f549f7 --out -

Both runs use the current source. A line is named by its file, its text
and which occurrence of that text in the file it is, read right after its
run, so that an edit of the source between the runs that only moves lines
does not count as a change. The two runs take about a minute.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
OLD_TABLE = 'tests/test_bad_input.py'
PACKAGES = ['nn', 'graph', 'data', 'zsl']
NEW_TABLES = [
    f'tests/{package}/test_{package}_bad_input.py' for package in PACKAGES
]
# The module tests that assert what the removed duplicate rows did.
DUPLICATES_KEPT_IN = [
    'tests/nn/dense/test_dense_apnet_conv.py::test_dense_apnet_conv_bad_input',
    'tests/nn/models/test_centroid_encoder.py::test_kmeans',
    'tests/graph/test_cosine.py::test_cosine_knn_graph_bad_input',
    'tests/zsl/test_config.py::test_bad_config',
    'tests/zsl/test_evaluate.py::test_empty_classes_or_images_are_named',
    'tests/zsl/test_eszsl.py::test_bad_input',
    'tests/zsl/test_sae.py::test_bad_input',
    'tests/zsl/test_baselines.py::test_bad_input',
]
# Explicit paths are collected whatever their name; the leading underscore
# keeps a plain `pytest tests` from collecting it if a run is interrupted.
BEFORE_COPY = 'tests/_raise_coverage_before_bad_input.py'
RAISE = re.compile(r'^\s*raise\b|[:;]\s*raise\b')

# (path relative to the repository, stripped text, occurrence of the text)
Line = Tuple[str, str, int]


def git(*args: str) -> str:
    return subprocess.run(
        ['git', *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def old_table_rev(rev: Optional[str]) -> str:
    r"""The commit to read the old table from: :obj:`rev`, or else the
    newest commit whose tree still holds it."""
    candidates = (
        [rev]
        if rev
        else ['HEAD'] + git('log', '--format=%H', '--', OLD_TABLE).split()
    )
    for candidate in candidates:
        if (
            subprocess.run(
                ['git', 'cat-file', '-e', f'{candidate}:{OLD_TABLE}'],
                cwd=ROOT,
                capture_output=True,
            ).returncode
            == 0
        ):
            return git('rev-parse', '--short', candidate).strip()
    sys.exit(
        f'error: no commit holds {OLD_TABLE}' + (f' at {rev}' if rev else '')
    )


def run_under_coverage(
    test_paths: List[str], workdir: Path, name: str
) -> Tuple[Set[Line], dict]:
    r"""Runs pytest on :obj:`test_paths` under coverage of apnet_pyg; the
    executed lines holding a ``raise``, and pytest's outcome."""
    data = workdir / f'{name}.coverage'
    report = workdir / f'{name}.json'
    env = dict(os.environ, COVERAGE_FILE=str(data))
    start = time.perf_counter()
    tests = subprocess.run(
        [
            sys.executable,
            '-m',
            'coverage',
            'run',
            '--source=apnet_pyg',
            '-m',
            'pytest',
            '-q',
            '-p',
            'no:cacheprovider',
            *test_paths,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    summary = (tests.stdout.strip().splitlines() or [''])[-1]
    if tests.returncode != 0:
        sys.exit(
            f'error: the {name} tests failed ({summary}):\n'
            f'{tests.stdout[-4000:]}{tests.stderr[-2000:]}'
        )
    subprocess.run(
        [sys.executable, '-m', 'coverage', 'json', '-q', '-o', str(report)],
        cwd=ROOT,
        env=env,
        check=True,
    )
    executed: Set[Line] = set()
    for path, result in json.loads(report.read_text())['files'].items():
        rel = os.path.relpath(os.path.abspath(path), ROOT)
        source = [
            text.strip() for text in (ROOT / rel).read_text().splitlines()
        ]
        for number in result['executed_lines']:
            text = source[number - 1]
            if RAISE.search(text.split('#')[0]):
                executed.add((rel, text, source[: number - 1].count(text)))
    return executed, {
        'paths': test_paths,
        'seconds': seconds,
        'summary': summary,
    }


def line_number(line: Line) -> str:
    r"""Where :obj:`line` is in the source now ('?' if it is gone)."""
    path, text, occurrence = line
    numbers = [
        number
        for number, source in enumerate(
            (ROOT / path).read_text().splitlines(), 1
        )
        if source.strip() == text
    ]
    return str(numbers[occurrence]) if occurrence < len(numbers) else '?'


def markdown(
    rev: str, before: Set[Line], after: Set[Line], runs: Dict[str, dict]
) -> str:
    lost, gained = sorted(before - after), sorted(after - before)
    out = [
        '# Bad-input tables: `raise` coverage before and after the split',
        '',
        'Written by `experiments/raise_coverage.py` (run it again to check): '
        f'the old single table (`{OLD_TABLE}` at {rev}) and the per-package '
        'tables (`tests/<package>/test_<package>_bad_input.py`, with the '
        'module tests that assert what the rows removed as duplicates did) '
        'each run under `coverage run --source=apnet_pyg`, on the same '
        'source; a line counts when it holds a `raise` statement and was '
        'executed.',
        '',
        '| tables | tests (pytest) | time | `raise` lines executed |',
        '|---|---|---|---|',
    ]
    for name, lines in [('before', before), ('after', after)]:
        run = runs[name]
        out.append(
            f'| {name}: {", ".join(f"`{p}`" for p in run["paths"])} '
            f'| {run["summary"]} | {run["seconds"]:.0f} s '
            f'| {len(lines)} |'
        )
    out += ['', f'Lost: {len(lost)}; gained: {len(gained)}.', '']
    for title, lines in [
        ('Lost (executed before, not after)', lost),
        ('Gained (executed after only)', gained),
    ]:
        if lines:
            out += [f'## {title}', '']
            out += [
                f'- `{line[0]}:{line_number(line)}`: `{line[1]}`'
                for line in lines
            ]
            out.append('')
    out += [
        '## Every `raise` line executed',
        '',
        'B: by the old table; A: by the new tables.',
        '',
    ]

    def position(line: Line) -> Tuple[str, int]:
        number = line_number(line)
        return line[0], int(number) if number.isdigit() else 0

    for line in sorted(before | after, key=position):
        mark = ('B' if line in before else '-') + (
            'A' if line in after else '-'
        )
        out.append(f'- {mark} `{line[0]}:{line_number(line)}`')
    return '\n'.join(out) + '\n'


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--before-rev',
        help='commit to read the old table '
        'from (default: the newest one holding it)',
    )
    parser.add_argument(
        '--out',
        default='experiments/bad-input-coverage.md',
        help="markdown report ('-': standard output)",
    )
    args = parser.parse_args(argv)

    rev = old_table_rev(args.before_rev)
    missing = [p for p in NEW_TABLES if not (ROOT / p).is_file()]
    if missing:
        sys.exit(f'error: missing tables: {missing}')
    copy = ROOT / BEFORE_COPY
    runs = {}
    with tempfile.TemporaryDirectory() as workdir:
        copy.write_text(git('show', f'{rev}:{OLD_TABLE}'))
        try:
            before, runs['before'] = run_under_coverage(
                [BEFORE_COPY], Path(workdir), 'before'
            )
        finally:
            copy.unlink()
        runs['before']['paths'] = [f'{OLD_TABLE}@{rev}']
        after, runs['after'] = run_under_coverage(
            NEW_TABLES + DUPLICATES_KEPT_IN, Path(workdir), 'after'
        )
    text = markdown(rev, before, after, runs)
    if args.out == '-':
        sys.stdout.write(text)
    else:
        (ROOT / args.out).write_text(text)
        print(
            f'{args.out}: {len(before)} raise lines before, {len(after)} '
            f'after, {len(before - after)} lost'
        )
    return 1 if before - after else 0


if __name__ == '__main__':
    sys.exit(main())
