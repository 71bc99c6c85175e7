r"""Tests of the Triton kernels on CPU tensors run under Triton's
interpreter, which Triton reads once, when it is first imported: in a
subprocess started with :obj:`TRITON_INTERPRET=1`.

A test that needs the interpreter skips itself where Triton compiles
(:data:`needs_interpreter`), and one test of its file runs the file's
selection in such a subprocess (:func:`run_under_interpreter`), failing
with one line per failed case."""

import os
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from apnet_pyg.nn import triton_propagation

#: Set in the subprocess, which must not start another one.
CHILD = 'APNET_PYG_TRITON_INTERPRETED_CASES'

#: Marks a test that runs the kernels on CPU tensors: it runs in the
#: interpreter's subprocess, and is skipped elsewhere.
needs_interpreter = pytest.mark.skipif(
    not (
        triton_propagation.is_triton_available()
        and triton_propagation.interpreting()
    ),
    reason="runs under Triton's interpreter, in the subprocess of its "
    "file's run_under_interpreter test",
)

#: Marks the test that starts the subprocess.
starts_interpreter = pytest.mark.skipif(
    not triton_propagation.is_triton_available()
    or os.environ.get(CHILD) == '1',
    reason='Triton is not installed, or this is the subprocess',
)


def run_under_interpreter(path, selection, tmp_path, minimum):
    r"""Runs the tests of :obj:`path` that :obj:`selection` (pytest's
    :obj:`-k`) picks in a subprocess whose Triton is interpreted, and
    checks that at least :obj:`minimum` of them ran and that every one
    passed."""
    report = tmp_path / 'report.xml'
    env = dict(os.environ, TRITON_INTERPRET='1', **{CHILD: '1'})
    result = subprocess.run(
        [
            sys.executable,
            '-m',
            'pytest',
            str(path),
            '-q',
            '-p',
            'no:cacheprovider',
            '-k',
            selection,
            f'--junitxml={report}',
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter('testcase'):
        failure = case.find('failure')
        if failure is None:
            failure = case.find('error')
        skipped = case.find('skipped')
        if failure is not None:
            message = (failure.get('message') or '').splitlines()
            outcomes[case.get('name')] = 'failed: ' + (message or [''])[0]
        elif skipped is not None:
            outcomes[case.get('name')] = 'skipped: ' + (
                skipped.get('message') or ''
            )
        else:
            outcomes[case.get('name')] = 'passed'
    failed = {k: v for k, v in outcomes.items() if v != 'passed'}
    assert result.returncode == 0 and not failed, (
        '\n'.join(f'{name}: {why}' for name, why in failed.items())
        + '\n'
        + result.stdout[-4000:]
        + result.stderr[-2000:]
    )
    assert len(outcomes) >= minimum, result.stdout[-2000:]
