r"""``python -m benchmarks [SUITE] [options]``: runs one benchmark suite, or
all of them in turn when no suite is named.

A suite is a module with ``add_arguments(parser)`` (its own options) and
``run(args)``; register it in :data:`SUITES`.
"""

import argparse
import importlib
import sys
from typing import List, Optional

from apnet_pyg.environment import available_cores
from apnet_pyg.scripting import run_script

#: Suite name -> module.
SUITES = {
    'propagation': 'benchmarks.propagation',
    'train_step': 'benchmarks.train_step',
    'profile': 'benchmarks.profile_training',
    'compiled_training': 'benchmarks.compiled_training',
}


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--device',
        default='cpu',
        help='torch device, e.g. cpu or cuda (default: cpu)',
    )
    parser.add_argument(
        '--quick',
        action='store_true',
        help='only the smallest configurations, in seconds',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=None,
        help='torch.set_num_threads, a positive integer (default: all cores)',
    )
    parser.add_argument(
        '--out',
        default=None,
        help='output directory (default: '
        'benchmarks/results/<machine>[/quick])',
    )
    parser.add_argument(
        '--machine',
        default=None,
        help='machine name for the output directory '
        '(default: derived, e.g. cpu-amd-epyc-2c)',
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m benchmarks',
        description='Benchmark suites of apnet_pyg. Without a suite name, '
        'runs every suite with its default options.',
    )
    subparsers = parser.add_subparsers(dest='suite', metavar='SUITE')
    for name, module in SUITES.items():
        suite = importlib.import_module(module)
        subparser = subparsers.add_parser(
            name, help=(suite.__doc__ or '').strip().splitlines()[0]
        )
        add_common_arguments(subparser)
        suite.add_arguments(subparser)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if not argv or argv[0].startswith('-'):
        # No suite named: run them all, with the options given here.
        shared_options = argparse.ArgumentParser(
            prog='python -m benchmarks',
            description=f'Runs every suite ({", ".join(SUITES)}) with its '
            f"default options; 'python -m benchmarks SUITE --help' lists a "
            f"suite's own options.",
        )
        add_common_arguments(shared_options)
        # Only common options here; each suite re-parses them below, and
        # checks their values before it measures (common.prepare_run).
        shared_options.parse_args(argv)
        runs = [[name] + argv for name in SUITES]
    else:
        runs = [argv]
    for suite_argv in runs:
        args = parser.parse_args(suite_argv)
        if args.threads is None:
            args.threads = available_cores()
        args.command = ' '.join(['python -m benchmarks'] + suite_argv)
        importlib.import_module(SUITES[args.suite]).run(args)


if __name__ == '__main__':
    sys.exit(run_script(main))
