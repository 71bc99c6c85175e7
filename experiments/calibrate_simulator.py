"""Simulated vs real: the closed-form baselines (ESZSL and SAE, both tuned on
the validation classes) on features simulated with the default options of
each dataset, next to their published accuracy on the real ResNet-101
features (Xian et al., TPAMI 2018, proposed split). The calibration check of
apnet_pyg.data.simulator (see docs/simulator.md).

    python experiments/calibrate_simulator.py --datasets AWA2 CUB --seeds 0 1 2

With --search N it instead draws N settings of the simulator's options at
random (SEARCH_SPACE), runs both baselines on each and writes one JSON line
per setting to --search-log (a new file); --summarize LOG [LOG ...]
tabulates such logs (how close the best settings come to the published
figures):

    python experiments/calibrate_simulator.py --datasets AWA2 --seeds 0 \
        --search 75 --search-seed 1 --search-log runs/search-1.jsonl
    python experiments/calibrate_simulator.py --datasets AWA2 --seeds 0 \
        --summarize runs/search-1.jsonl --out search.md

Features are simulated in memory (no .mat files written). Every simulated
number is labelled as such: none is a benchmark result.
"""

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from apnet_pyg.checks import check_int, is_real_number
from apnet_pyg.data.simulator import (
    DEFAULT_OPTIONS,
    SIMULATOR_VERSION,
    check_options,
    default_options,
    simulate_dataset,
)
from apnet_pyg.data.xlsa17 import DATASETS
from apnet_pyg.files import atomic_write_text, check_output_file
from apnet_pyg.scripting import run_script
from apnet_pyg.zsl.baselines.benchmark import BASELINES, hyper_parameters
from apnet_pyg.zsl.cli import check_dataset_flag, check_seeds_flag
from apnet_pyg.zsl.metrics import METRICS
from apnet_pyg.zsl.reporting.published import PUBLISHED, SOURCES, published

COLUMNS = ('ZSL', 'U', 'S', 'H')  # the order of METRICS
TOLERANCE = 5.0  # points: "near the real figure" (issue 10)
# The defaults of --search-seed and --recheck-top (flags that are None
# when not given, so that a flag of the other mode can be refused).
SEARCH_SEED = 0
RECHECK_TOP = 4

# The options --search varies and how each is drawn, in this order (the
# order is part of the random stream). 'zero_or_uniform': 0 or a uniform
# draw, with equal probability (a residual is an optional mechanism).
SEARCH_SPACE = (
    ('hidden_bias', 'uniform', (0.0, 3.0)),
    ('attribute_strength', 'uniform', (1.5, 4.5)),
    ('offset_spread', 'uniform', (2.0, 6.0)),
    ('shared_strength', 'uniform', (4.0, 12.0)),
    ('shared_weight', 'uniform', (0.6, 3.0)),
    ('residual_strength', 'zero_or_uniform', (0.0, 6.0)),
    ('noise_rank', 'choice', (16, 32, 64, 128)),
    ('lowrank_noise', 'uniform', (2.0, 20.0)),
    ('isotropic_noise', 'uniform', (18.0, 40.0)),
    ('class_size_spread', 'uniform', (0.3, 0.64)),
)


def calibrate(dataset, seeds, data_root=None, **options):
    """Per baseline, the metrics of every seed (simulated in memory), and
    summary statistics of the first seed's features."""
    runs = {name: [] for name in BASELINES}
    for seed in seeds:
        data = simulate_dataset(dataset, data_root, seed=seed, **options)
        if seed == seeds[0]:
            features = feature_statistics(data.features)
        for name, metrics in BASELINES.items():
            runs[name].append(metrics(data))
    return runs, features


def feature_statistics(features):
    """Mean value, fraction of exact zeros and mean L2 norm of the
    features (to compare with ResNet-101's pooled activations)."""
    return dict(
        mean=float(features.mean()),
        zeros=float((features == 0).double().mean()),
        norm=float(features.norm(dim=1).mean()),
    )


def table(results, seeds):
    """Markdown: simulated mean (and standard deviation over seeds) next to
    the real figure of each metric."""
    lines = [
        '| dataset | method | ZSL sim (real) | U sim (real) | S sim (real) '
        '| H sim (real) | chosen per seed |',
        '|---|---|---|---|---|---|---|',
    ]
    for dataset, runs in results.items():
        for name, per_seed in runs.items():
            real = published(dataset, name)
            cells = []
            for key in METRICS:
                values = np.array([run[key] for run in per_seed])
                spread = f' ± {values.std():.1f}' if len(seeds) > 1 else ''
                reference = '' if real[key] is None else f' ({real[key]:.1f})'
                cells.append(f'{values.mean():.1f}{spread}{reference}')
            chosen = '; '.join(hyper_parameters(run) for run in per_seed)
            lines.append(
                f'| {dataset} | {name} | {" | ".join(cells)} | {chosen} |'
            )
    return '\n'.join(lines)


def sample_options(rng):
    """One random setting of the options in SEARCH_SPACE."""
    options = {}
    for key, kind, values in SEARCH_SPACE:
        if kind == 'uniform':
            options[key] = float(rng.uniform(*values))
        elif kind == 'zero_or_uniform':
            options[key] = float(rng.choice([0.0, rng.uniform(*values)]))
        else:
            options[key] = int(rng.choice(values))
    return options


def closeness(dataset, runs):
    """The mean over seeds of every baseline's metrics, how many of them
    are within TOLERANCE points of the published figure, and the sum of
    the absolute differences."""
    means, within, distance = {}, 0, 0.0
    for name, per_seed in runs.items():
        real = published(dataset, name)
        means[name] = {
            key: float(np.mean([run[key] for run in per_seed]))
            for key in METRICS
        }
        for key in METRICS:
            if real[key] is not None:
                gap = abs(means[name][key] - real[key])
                within += gap <= TOLERANCE
                distance += gap
    return means, within, distance


def score_setting(dataset, seeds, data_root=None, **options):
    """Both baselines on one setting of the options (the defaults for the
    rest), as a search log's line: its options, the mean metrics, and
    their closeness to the published figures."""
    runs, _ = calibrate(dataset, seeds, data_root, **options)
    means, within, distance = closeness(dataset, runs)
    return dict(opts=options, res=means, within=within, dist=distance)


def search(dataset, seeds, count, search_seed, log, data_root=None):
    """Runs both baselines on `count` random settings (stream
    `search_seed`) and writes one JSON line per setting to `log`."""
    check_search_log(log)
    rng = np.random.default_rng(search_seed)
    for index in range(count):
        start = time.perf_counter()
        line = dict(
            score_setting(dataset, seeds, data_root, **sample_options(rng)),
            seeds=list(seeds),
            search_seed=search_seed,
            index=index,
        )
        with open(log, 'a') as file:
            file.write(json.dumps(line) + '\n')
        print(
            f'{index}: {line["within"]} figures within {TOLERANCE:g}, '
            f'distance {line["dist"]:.1f} '
            f'({time.perf_counter() - start:.0f} s)',
            flush=True,
        )


def summarize(
    dataset,
    logs,
    seeds,
    data_root=None,
    top=10,
    recheck_seeds=None,
    recheck_top=RECHECK_TOP,
):
    """Markdown: the settings of the search logs next to the dataset's
    defaults (run here on the same seeds), best first; with
    `recheck_seeds`, the defaults and the `recheck_top` best settings run
    again on those seeds (is a setting's lead more than its data seed?)."""
    per_log = {log: _read_log(log) for log in logs}
    settings = [setting for log in logs for setting in per_log[log]]
    if not settings:
        raise SystemExit(f'error: no settings in {logs}')
    if any(setting['seeds'] != list(seeds) for setting in settings):
        raise SystemExit(
            f'error: --seeds {seeds} differs from the seeds of '
            f'the search logs; pass the same --seeds'
        )
    default = dict(
        score_setting(dataset, seeds, data_root), opts=default_options(dataset)
    )
    names = list(BASELINES)
    figures = [
        (name, key)
        for name in names
        for key in METRICS
        if published(dataset, name)[key] is not None
    ]

    def row(setting):
        """A table row's first cells: name, within, distance, and each
        baseline's ZSL / U / S / H."""
        cells = ' | '.join(
            ' / '.join(f'{setting["res"][name][key]:.1f}' for key in METRICS)
            for name in names
        )
        return (
            f'| {_name(setting)} | {setting["within"]} | '
            f'{setting["dist"]:.1f} | {cells} |'
        )

    seeds_flag = ' '.join(map(str, seeds))
    command = (
        'OMP_NUM_THREADS=1 python experiments/calibrate_simulator.py '
        f'--datasets {dataset} --seeds {seeds_flag}'
    )
    lines = [
        f'# Random search of the simulator options for {dataset} '
        f'(SIMULATED features: not benchmark results)',
        '',
        f'{len(settings)} settings drawn at random from the ranges below '
        f'(the other options at their {dataset} default), each simulated '
        f'with data seed(s) {", ".join(map(str, seeds))}; on each, ESZSL '
        f'and SAE tuned on the validation classes as in the calibration '
        f"({SOURCES['ESZSL']} for the real figures). 'within' counts the "
        f'{len(figures)} published figures the simulated ones are within '
        f'{TOLERANCE:g} points of; distance is the sum of the absolute '
        f'differences. Produced by',
        '',
        '```bash',
    ]
    for log, logged in per_log.items():
        streams = [setting['search_seed'] for setting in logged]
        lines += [
            f'{command} --search {streams.count(stream)} --search-seed '
            f'{stream} --search-log {log}'
            for stream in dict.fromkeys(streams)
        ]
    recheck = (
        ''
        if not recheck_seeds
        else ' --recheck-seeds '
        + ' '.join(map(str, recheck_seeds))
        + f' --recheck-top {recheck_top}'
    )
    lines += [
        f'{command} --summarize {" ".join(logs)}{recheck}',
        '```',
        '',
        '| option | drawn from |',
        '|---|---|',
    ]
    for key, kind, values in SEARCH_SPACE:
        drawn = {
            'uniform': 'uniform on [{}, {}]',
            'zero_or_uniform': '0 or uniform on [{}, {}], each with '
            'probability 1/2',
            'choice': 'one of ' + ', '.join(['{}'] * len(values)),
        }[kind]
        lines.append(f'| `{key}` | {drawn.format(*values)} |')
    lines += [
        '',
        f'Settings by the number of figures within {TOLERANCE:g} '
        f'points ({dataset} defaults: {default["within"]}):',
        '',
        '| within | settings |',
        '|---|---|',
    ]
    counts = [setting['within'] for setting in settings]
    lines += [
        f'| {n} | {counts.count(n)} |'
        for n in range(len(figures), -1, -1)
        if n in counts
    ]
    lines += [
        '',
        'Per figure: the range over the settings and how many '
        f'are within {TOLERANCE:g} points of it:',
        '',
        '| method | metric | real | simulated min - max | settings within |',
        '|---|---|---|---|---|',
    ]
    for name, key in figures:
        real = published(dataset, name)[key]
        values = [setting['res'][name][key] for setting in settings]
        near = sum(abs(value - real) <= TOLERANCE for value in values)
        lines.append(
            f'| {name} | {COLUMNS[METRICS.index(key)]} | {real} | '
            f'{min(values):.1f} - {max(values):.1f} | {near} |'
        )
    best = sorted(settings, key=lambda s: (-s['within'], s['dist']))[:top]
    lines += [
        '',
        f'The {dataset} defaults and the {len(best)} best settings '
        '(most figures within, then smallest distance); ZSL / U / S / '
        'H:',
        '',
        f'| setting | within | distance | {" | ".join(names)} | options |',
        '|---|---|---|---|---|---|',
    ]
    real = [
        ' / '.join(
            '-' if value is None else f'{value:.1f}'
            for value in published(dataset, name).values()
        )
        for name in names
    ]
    lines.append(
        f'| real ({SOURCES["ESZSL"]}) | - | - | {" | ".join(real)} | - |'
    )
    lines.append(f'{row(default)} `{json.dumps(default["opts"])}` |')
    for setting in best:
        options = {
            key: round(value, 2) for key, value in setting['opts'].items()
        }
        lines.append(f'{row(setting)} `{json.dumps(options)}` |')
    if recheck_seeds:
        lines += [
            '',
            f'Rechecked on data seeds '
            f'{", ".join(map(str, recheck_seeds))} (mean over seeds; '
            f'`--recheck-seeds`): the defaults and the '
            f'{recheck_top} best settings above, ZSL / U / S / H:',
            '',
            f'| setting | within | distance | {" | ".join(names)} |',
            '|---|---|---|---|---|',
        ]
        for setting in [default] + best[:recheck_top]:
            rechecked = score_setting(
                dataset, recheck_seeds, data_root, **setting['opts']
            )
            lines.append(row({**setting, **rechecked}))
    return '\n'.join(lines)


def _read_log(log):
    """The settings of one --search log, or a one-line error naming it."""
    try:
        lines = Path(log).read_text().splitlines()
    except OSError as error:
        raise SystemExit(
            f'error: --summarize {log}: cannot read it '
            f'({error.strerror}); pass a --search-log file'
        ) from None
    settings = []
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            setting = json.loads(line)
        except json.JSONDecodeError:
            raise SystemExit(
                f'error: --summarize {log}: line {number} is '
                f'not JSON; pass a file written by --search'
            ) from None
        problem = _setting_problem(setting)
        if problem:
            raise SystemExit(
                f'error: --summarize {log}: line {number} is '
                f'no --search setting ({problem}); pass a '
                f'file written by --search'
            )
        settings.append(setting)
    return settings


#: The keys of a --search log line (search).
LOG_KEYS = ('opts', 'res', 'within', 'dist', 'seeds', 'search_seed', 'index')


def _setting_problem(setting):
    """What keeps one line of a --search log from being tabulated, or
    None."""
    if not isinstance(setting, dict):
        return f'a JSON {type(setting).__name__}, not an object'
    missing = [key for key in LOG_KEYS if key not in setting]
    if missing:
        return f'it lacks {", ".join(map(repr, missing))}'
    res = setting['res']
    if not isinstance(res, dict) or not all(
        isinstance(res.get(name), dict)
        and all(is_real_number(res[name].get(key)) for key in METRICS)
        for name in BASELINES
    ):
        return f"'res' lacks the metrics of {', '.join(BASELINES)}"
    if not isinstance(setting['opts'], dict) or not all(
        map(is_real_number, setting['opts'].values())
    ):
        return "'opts' is not a dictionary of numbers"
    if not isinstance(setting['seeds'], list) or not all(
        isinstance(seed, int) for seed in setting['seeds']
    ):
        return "'seeds' is not a list of integers"
    if not all(is_real_number(setting[key]) for key in ('within', 'dist')):
        return "'within' or 'dist' is not a number"
    return None


def check_search_log(log):
    """Refuses a --search-log that exists (a stream always starts at its
    first setting: appending would repeat settings) or that cannot be
    written, before any setting is run."""
    if Path(log).exists():
        raise ValueError(f'--search-log {log} exists; pass a new file')
    check_output_file(log, '--search-log', 'a new JSON-lines file name')


def check_arguments(args):
    """Refuses bad flags with a one-line error before anything is
    simulated or fitted (the loops over datasets and seeds would otherwise
    reach a bad one minutes in)."""
    folders = [
        check_dataset_flag(name, args.data_root, '--datasets')
        for name in args.datasets
    ]
    if len(set(folders)) < len(folders):
        raise ValueError(
            f'--datasets names a dataset twice '
            f'({" ".join(args.datasets)}): pass each once'
        )
    check_seeds_flag(args.seeds, '--seeds')
    if args.recheck_seeds is not None:
        check_seeds_flag(args.recheck_seeds, '--recheck-seeds')
    if args.search_seed is not None:
        try:
            check_int(args.search_seed, 'search_seed', minimum=0)
        except ValueError as error:
            raise ValueError(f'--search-seed: {error}') from None
    if args.search_log:
        check_search_log(args.search_log)
    if args.out is not None:
        check_output_file(args.out, '--out', 'a markdown file name')


def _name(setting):
    if 'index' not in setting:
        return 'defaults'
    return f'stream {setting["search_seed"]} #{setting["index"]}'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--datasets', nargs='+', default=list(DATASETS))
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument(
        '--data-root',
        default=None,
        help='real class side (default: the packaged copy)',
    )
    parser.add_argument(
        '--set',
        nargs='*',
        default=[],
        metavar='KEY=VALUE',
        help="simulator options overriding every dataset's "
        'defaults (values parsed as JSON)',
    )
    parser.add_argument('--out', default=None, help='markdown file')
    parser.add_argument(
        '--search',
        type=int,
        default=None,
        metavar='N',
        help='draw N random settings of SEARCH_SPACE and '
        'write their results to --search-log',
    )
    parser.add_argument(
        '--search-seed',
        type=int,
        default=None,
        help=f'random stream of --search (default: {SEARCH_SEED})',
    )
    parser.add_argument(
        '--search-log',
        default=None,
        help='with --search: new JSON-lines file, one line per setting',
    )
    parser.add_argument(
        '--summarize',
        nargs='+',
        default=None,
        metavar='LOG',
        help='tabulate --search logs',
    )
    parser.add_argument(
        '--recheck-seeds',
        nargs='+',
        type=int,
        default=None,
        help='with --summarize: run the defaults and the '
        'best settings again on these data seeds',
    )
    parser.add_argument(
        '--recheck-top',
        type=int,
        default=None,
        help='with --recheck-seeds: how many of the best '
        f'settings to recheck (default: {RECHECK_TOP})',
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.search is not None and args.summarize:
        raise SystemExit('error: pass --search or --summarize, not both')
    # A flag of the other mode would silently do nothing.
    for flags, mode, given in (
        (('search_seed', 'search_log'), '--search', args.search is not None),
        (
            ('recheck_seeds', 'recheck_top'),
            '--summarize',
            bool(args.summarize),
        ),
    ):
        for name in flags:
            if getattr(args, name) is not None and not given:
                raise SystemExit(
                    f'error: --{name.replace("_", "-")} goes with {mode}'
                )
    try:
        check_arguments(args)
    except ValueError as error:
        raise SystemExit(f'error: {error}') from None
    if args.search is not None or args.summarize:
        return _search_main(args)
    overrides = parse_overrides(args.set)
    torch.set_num_threads(1)

    results, options, statistics = {}, {}, {}
    for dataset in args.datasets:
        start = time.perf_counter()
        results[dataset], statistics[dataset] = calibrate(
            dataset, args.seeds, args.data_root, **overrides
        )
        options[dataset] = {**default_options(dataset), **overrides}
        print(f'{dataset}: {time.perf_counter() - start:.0f} s', flush=True)
    lines = [
        '# Simulator calibration (SIMULATED features: not benchmark results)',
        '',
        f'ESZSL and SAE on simulated features (simulator version '
        f'{SIMULATOR_VERSION}; mean ± standard deviation (population, '
        f'ddof 0) over seeds '
        f'{", ".join(map(str, args.seeds))}) next to their published '
        f'accuracy on the real ResNet-101 features in parentheses '
        f'({SOURCES["ESZSL"]}). ZSL: unseen test images among the unseen '
        f'classes; U / S: unseen / seen test images among all classes; H: '
        f'their harmonic mean; per-class mean accuracy in %. '
        f'Hyper-parameters are chosen on the validation classes '
        f'(trainclasses1 -> valclasses1) for every seed. Produced by',
        '',
        '```bash',
        'OMP_NUM_THREADS=1 python experiments/calibrate_simulator.py '
        + shlex.join(argv),
        '```',
        '',
        table(results, args.seeds),
        '',
        'Simulated features (seed {}): mean value, fraction of exact zeros, '
        'mean L2 norm per image:'.format(args.seeds[0]),
        '',
    ]
    lines += [
        f'- {dataset}: {stats["mean"]:.2f}, {stats["zeros"]:.2f}, '
        f'{stats["norm"]:.1f}'
        for dataset, stats in statistics.items()
    ]
    lines += ['', 'Simulator options per dataset:', '']
    lines += [
        f'- {dataset}: `{json.dumps(opts)}`'
        for dataset, opts in options.items()
    ]
    text = '\n'.join(lines)
    _report(text, args.out)
    return results


def parse_overrides(items):
    """The simulator options of --set KEY=VALUE, checked before any work
    against the simulator's option names and rules; a one-line error
    naming --set otherwise."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition('=')
        if not sep:
            raise SystemExit(f"error: --set expects KEY=VALUE (got '{item}')")
        if key not in DEFAULT_OPTIONS:
            raise SystemExit(
                f"error: --set '{item}': '{key}' is not a "
                f'simulator option (known: '
                f'{", ".join(DEFAULT_OPTIONS)})'
            )
        if key in overrides:
            raise SystemExit(f"error: --set '{item}': '{key}' is given twice")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            raise SystemExit(
                f"error: --set '{item}': '{value}' is not a number"
            ) from None
    try:
        # The simulator's own rules (the defaults pass them).
        check_options({**DEFAULT_OPTIONS, **overrides})
    except (TypeError, ValueError) as error:
        raise SystemExit(f'error: --set: {error}') from None
    return overrides


def _search_main(args):
    if len(args.datasets) != 1 or args.set:
        raise SystemExit(
            'error: --search and --summarize take one dataset '
            'in --datasets and no --set'
        )
    dataset = args.datasets[0]
    if all(
        value is None
        for name in BASELINES
        for value in published(dataset, name).values()
    ):
        raise SystemExit(
            f'error: no published figures for {dataset} to '
            f'search towards (known: {sorted(PUBLISHED)})'
        )
    if args.recheck_top is not None and args.recheck_top < 1:
        raise SystemExit(
            f'error: --recheck-top must be at least 1 (got {args.recheck_top})'
        )
    if args.recheck_top is not None and args.recheck_seeds is None:
        raise SystemExit('error: --recheck-top goes with --recheck-seeds')
    torch.set_num_threads(1)
    if args.search is not None:
        if args.search < 1 or not args.search_log:
            raise SystemExit('error: --search needs N >= 1 and --search-log')
        search(
            dataset,
            args.seeds,
            args.search,
            SEARCH_SEED if args.search_seed is None else args.search_seed,
            args.search_log,
            args.data_root,
        )
        return None
    text = summarize(
        dataset,
        args.summarize,
        args.seeds,
        args.data_root,
        recheck_seeds=args.recheck_seeds,
        recheck_top=RECHECK_TOP
        if args.recheck_top is None
        else args.recheck_top,
    )
    _report(text, args.out)
    return text


def _report(text, out):
    """Prints the markdown and, with --out, writes it there."""
    print(text)
    if out:
        atomic_write_text(text + '\n', out)


if __name__ == '__main__':
    sys.exit(run_script(main))
