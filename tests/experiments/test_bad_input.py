r"""Bad input to experiments/trace_training.py, pair_margins.py, ablation.py,
calibrate_simulator.py, node_classification.py and eszsl_per_class.py ends
with one line naming the flag or file, before any long work (the work itself is
replaced by a function that fails the test if it is reached)."""

import json

import pytest

from apnet_pyg.scripting import run_script
from apnet_pyg.zsl.baselines.benchmark import BASELINES
from apnet_pyg.zsl.metrics import METRICS
from tests.helpers.scripts import load_script, train_tiny_run


def work_reached(*args, **kwargs):
    raise AssertionError('the work started before the input was checked')


def one_line_error(main, argv, capsys):
    r"""The error line of :obj:`main(argv)` run as a script
    (:func:`run_script`: exit status 1; a :class:`SystemExit` with a
    message counts the same, as Python prints it)."""
    try:
        status = run_script(main, argv)
        err = capsys.readouterr().err
    except SystemExit as exit:
        assert isinstance(exit.code, str), exit.code  # not argparse's
        status, err = 1, exit.code + '\n'
    assert status == 1
    assert len(err.splitlines()) == 1 and err.startswith('error: '), err
    return err.strip()


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory, tiny_root):

    run_dir = tmp_path_factory.mktemp('tiny_run') / 'run'
    return train_tiny_run(tiny_root, run_dir, epochs=1, episodes=2)


# 1. trace_training.py ------------------------------------------------------


@pytest.mark.parametrize(
    'flags, message',
    [
        (['--episodes', '0'], '--episodes must be a positive integer (got 0)'),
        (
            ['--episodes', '-5'],
            '--episodes must be a positive integer (got -5)',
        ),
        (['--adam-eps', '0'], '--adam-eps must be a positive finite number'),
        (['--adam-eps', 'nan'], '--adam-eps must be a positive finite number'),
        (['--adam-eps', '-1'], '--adam-eps must be a positive finite number'),
        (['--set', 'lr=nan'], "--set: 'lr' must be a finite number"),
        (['--set', 'foo=1'], "--set 'foo=1': 'foo' is not a training option"),
        (['--set', 'n_way=3.5'], "--set 'n_way=3.5': '3.5' is not an integer"),
        (
            ['--set', 'lr_decay_epoch=x'],
            "--set 'lr_decay_epoch=x': 'x' is not an integer or 'none'",
        ),
        (
            ['--set', 'n_way=100'],
            '--set: n_way=100 exceeds the 6 seen classes of TINY',
        ),
        # The script's own flag, not apnet-zsl's --k-shot; before the model.
        (
            ['--set', 'k_shot=1000'],
            'k_shot=1000 (--set k_shot=1000) exceeds the ',
        ),
        (
            ['--set', 'k-shot=1000'],
            'k_shot=1000 (--set k_shot=1000) exceeds the ',
        ),
    ],
)
def test_trace_training_refuses_bad_flags(
    flags, message, tiny_run, tmp_path, monkeypatch, capsys
):
    trace = load_script('trace_training')
    monkeypatch.setattr(trace, 'trace', work_reached)
    argv = [
        '--run',
        str(tiny_run),
        '--episodes',
        '1',
        '--out',
        str(tmp_path / 'trace.csv'),
    ] + flags
    assert one_line_error(trace.main, argv, capsys).startswith(
        f'error: {message}'
    )


def test_trace_training_names_the_runs_k_shot(
    tiny_run, tmp_path, monkeypatch, capsys
):
    trace = load_script('trace_training')
    monkeypatch.setattr(trace, 'trace', work_reached)
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    metrics = json.loads((tiny_run / 'metrics.json').read_text())
    metrics['config']['k_shot'] = 1000  # more than the data has
    (run_dir / 'metrics.json').write_text(json.dumps(metrics))
    err = one_line_error(
        trace.main,
        [
            '--run',
            str(run_dir),
            '--episodes',
            '1',
            '--out',
            str(tmp_path / 't.csv'),
        ],
        capsys,
    )
    assert err.startswith(
        "error: k_shot=1000 (the run's; --set k_shot=K "
        'overrides it) exceeds the '
    )
    assert '--k-shot' not in err


def test_trace_training_reads_set_with_the_field_type(tiny_run, tmp_path):
    trace = load_script('trace_training')
    out = tmp_path / 'trace.csv'
    # 'none' is the command line's spelling of an optional integer.
    records = trace.main(
        [
            '--run',
            str(tiny_run),
            '--episodes',
            '2',
            '--set',
            'lr_decay_epoch=none',
            'attributes=att',
            '--out',
            str(out),
        ]
    )
    assert len(records) == 2 and len(out.read_text().splitlines()) == 3


# 2. pair_margins.py --------------------------------------------------------


@pytest.mark.parametrize(
    'pair, message',
    [
        ('wolf:wolf', "--pairs 'wolf:wolf': the two classes must differ"),
        (
            'wolf:zebra',
            "--pairs 'wolf:zebra': 'zebra' is a seen class of TINY",
        ),
        (
            'wolf:okapi',
            "--pairs 'wolf:okapi': 'okapi' is no class of TINY as read from",
        ),
    ],
)
def test_pair_margins_refuses_bad_pairs(
    pair, message, tiny_run, monkeypatch, capsys
):
    pair_margins = load_script('pair_margins')
    monkeypatch.setattr(pair_margins, 'fit_eszsl_validated', work_reached)
    err = one_line_error(
        pair_margins.main,
        ['--run', str(tiny_run), '--pairs', 'wolf:fox', pair],
        capsys,
    )
    assert err.startswith(f'error: {message}')
    if 'okapi' in pair:  # Another dataset's data under --root?
        assert '--root' in err


# 3. ablation.py ------------------------------------------------------------


@pytest.mark.parametrize(
    'flags, message',
    [
        (
            ['--root', None, '--shared-strength', '1'],
            '--shared-strength is a simulator option: it goes without --root',
        ),
        (
            ['--shared-strength', '-1'],
            '--shared-strength must be a finite number >= 0 (got -1.0)',
        ),
        (
            ['--shared-strength', 'nan'],
            '--shared-strength must be a finite number >= 0 (got nan)',
        ),
        (
            ['--root', None, '--epochs', '0'],
            "--epochs: 'epochs' must be positive (got 0)",
        ),
        (
            ['--root', None, '--n-way', '1'],
            "--n-way: 'n_way' must be at least 2",
        ),
    ],
)
def test_ablation_refuses_bad_flags(
    flags, message, tiny_root, tmp_path, monkeypatch, capsys
):
    ablation = load_script('ablation')
    monkeypatch.setattr(ablation, 'simulate_xlsa17', work_reached)
    monkeypatch.setattr(ablation, 'run', work_reached)
    flags = [str(tiny_root) if flag is None else flag for flag in flags]
    argv = ['--dataset', 'TINY', '--out-dir', str(tmp_path / 'runs')] + flags
    assert one_line_error(ablation.main, argv, capsys).startswith(
        f'error: {message}'
    )


# 4. calibrate_simulator.py -------------------------------------------------


@pytest.mark.parametrize(
    'item, message',
    [
        ('foo=1', "--set 'foo=1': 'foo' is not a simulator option (known: "),
        ('shared_weight=-1', "--set: 'shared_weight' must be finite and >= 0"),
        ('hidden_dim=2.5', "--set: 'hidden_dim' must be a positive integer"),
    ],
)
def test_calibration_checks_set_before_the_work(
    item, message, monkeypatch, capsys
):
    calibrate = load_script('calibrate_simulator')
    monkeypatch.setattr(calibrate, 'calibrate', work_reached)
    monkeypatch.setattr(calibrate, 'simulate_dataset', work_reached)
    err = one_line_error(
        calibrate.main,
        ['--datasets', 'AWA2', '--seeds', '0', '--set', item],
        capsys,
    )
    assert err.startswith(f'error: {message}')


@pytest.mark.parametrize(
    'flags, message',
    [
        (
            ['--datasets', 'TINY', 'OKAPI'],
            "--datasets 'OKAPI': No dataset folder 'OKAPI' in",
        ),
        (
            ['--datasets', 'TINY', '..'],
            "--datasets must name a dataset folder such as AWA2 (got '..')",
        ),
        (
            ['--datasets', 'TINY', 'tiny'],
            '--datasets names a dataset twice (TINY tiny): pass each once',
        ),
        (
            ['--data-root', '{tmp}/a-file'],
            "--data-root: The data root '{tmp}/a-file' is a file",
        ),
        (
            ['--seeds', '0', '-1'],
            "--seeds: 'seed' must be at least 0 (got -1)",
        ),
        (
            ['--seeds', '1', '1'],
            '--seeds names a seed twice (1 1): pass each once',
        ),
        (
            ['--search', '1', '--search-log', '{tmp}/a-file/log.jsonl'],
            "--search-log '{tmp}/a-file/log.jsonl': the output folder "
            "'{tmp}/a-file' is a file",
        ),
        (
            [
                '--search',
                '1',
                '--search-seed',
                '-1',
                '--search-log',
                '{tmp}/new.jsonl',
            ],
            "--search-seed: 'search_seed' must be at least 0 (got -1)",
        ),
        (
            ['--summarize', '{tmp}/log.jsonl', '--recheck-seeds', '0', '-1'],
            "--recheck-seeds: 'seed' must be at least 0 (got -1)",
        ),
    ],
)
def test_calibration_checks_flags_before_the_work(
    flags, message, tiny_root, tmp_path, monkeypatch, capsys
):
    calibrate = load_script('calibrate_simulator')
    for work in ('calibrate', 'score_setting', 'simulate_dataset'):
        monkeypatch.setattr(calibrate, work, work_reached)
    # Figures to search towards: --search and --summarize run on TINY.
    monkeypatch.setattr(
        calibrate,
        'published',
        lambda dataset, method: {
            key: 50.0 for key in ('zsl_acc', 'gzsl_unseen', 'gzsl_seen')
        },
    )
    (tmp_path / 'a-file').write_text('')
    # A --search log of seed 0: --summarize reads it, then runs the work.
    figures = {name: {key: 50.0 for key in METRICS} for name in BASELINES}
    (tmp_path / 'log.jsonl').write_text(
        json.dumps(
            dict(
                opts={},
                res=figures,
                within=0,
                dist=1.0,
                seeds=[0],
                search_seed=0,
                index=0,
            )
        )
        + '\n'
    )
    flags = [flag.format(tmp=tmp_path) for flag in flags]
    argv = [
        '--datasets',
        'TINY',
        '--data-root',
        str(tiny_root),
        '--seeds',
        '0',
    ] + flags  # The last --datasets, --seeds counts.
    err = one_line_error(calibrate.main, argv, capsys)
    assert err.startswith(f'error: {message.format(tmp=tmp_path)}')


@pytest.mark.parametrize(
    'line, problem',
    [
        ({'a': 1}, "it lacks 'opts', 'res'"),
        ([1, 2], 'a JSON list, not an object'),
        (
            {
                'opts': {},
                'res': {},
                'within': 1,
                'dist': 2.0,
                'seeds': [0],
                'search_seed': 0,
                'index': 0,
            },
            "'res' lacks the metrics of ESZSL",
        ),
    ],
)
def test_calibration_summary_names_a_foreign_log(
    line, problem, tmp_path, monkeypatch, capsys
):
    calibrate = load_script('calibrate_simulator')
    monkeypatch.setattr(calibrate, 'score_setting', work_reached)
    log = tmp_path / 'foreign.jsonl'
    log.write_text(json.dumps(line) + '\n')
    err = one_line_error(
        calibrate.main,
        ['--datasets', 'AWA2', '--seeds', '0', '--summarize', str(log)],
        capsys,
    )
    assert err.startswith(
        f'error: --summarize {log}: line 1 is no --search setting ({problem}'
    )
    assert err.endswith('pass a file written by --search')


# 5. --out, checked before the work; eszsl_per_class.py --dataset, --seeds ----


def out_cases(tmp_path):
    (tmp_path / 'a-file').write_text('')
    return {
        'directory': (tmp_path, 'is a directory'),
        'under a file': (tmp_path / 'a-file' / 'out.md', 'the output folder'),
    }


@pytest.mark.parametrize('out', ['directory', 'under a file'])
@pytest.mark.parametrize(
    'script',
    ['trace_training', 'eszsl_per_class', 'ablation', 'node_classification'],
)
def test_out_is_checked_before_the_work(
    script, out, tiny_root, tiny_run, tmp_path, monkeypatch, capsys
):
    example = load_script(script)
    path, message = out_cases(tmp_path)[out]
    argv = {
        'trace_training': ['--run', str(tiny_run), '--episodes', '1'],
        'eszsl_per_class': [
            '--dataset',
            'TINY',
            '--data-root',
            str(tiny_root),
            '--seeds',
            '0',
        ],
        'ablation': [
            '--dataset',
            'TINY',
            '--root',
            str(tiny_root),
            '--out-dir',
            str(tmp_path / 'runs'),
        ],
        'node_classification': [
            '--planetoid-root',
            str(tmp_path / 'no-cora'),
        ],
    }[script] + ['--out', str(path)]
    for work in (
        'trace',
        'simulate_dataset',
        'run',
        'simulate_xlsa17',
        'load_xlsa17',
        'load_graph',
    ):
        if hasattr(example, work):
            monkeypatch.setattr(example, work, work_reached)
    err = one_line_error(example.main, argv, capsys)
    assert err.startswith(f"error: --out '{path}'")
    assert message in err


@pytest.mark.parametrize(
    'dataset, message',
    [
        ('', "--dataset must name a dataset folder such as AWA2 (got '')"),
        ('..', "--dataset must name a dataset folder such as AWA2 (got '..')"),
        ('OKAPI', "--dataset 'OKAPI': No dataset folder 'OKAPI' in"),
    ],
)
def test_eszsl_per_class_names_dataset(
    dataset, message, tiny_root, monkeypatch, capsys
):
    example = load_script('eszsl_per_class')
    monkeypatch.setattr(example, 'simulate_dataset', work_reached)
    err = one_line_error(
        example.main,
        ['--dataset', dataset, '--data-root', str(tiny_root), '--seeds', '0'],
        capsys,
    )
    assert err.startswith(f'error: {message}')


@pytest.mark.parametrize(
    'seeds, message',
    [
        (['-1'], "--seeds: 'seed' must be at least 0 (got -1)"),
        (['0', '-1'], "--seeds: 'seed' must be at least 0 (got -1)"),
        (['2', '2'], '--seeds names a seed twice (2 2): pass each once'),
    ],
)
def test_eszsl_per_class_names_seeds(
    seeds, message, tiny_root, monkeypatch, capsys
):
    example = load_script('eszsl_per_class')
    monkeypatch.setattr(example, 'simulate_dataset', work_reached)
    err = one_line_error(
        example.main,
        [
            '--dataset',
            'TINY',
            '--data-root',
            str(tiny_root),
            '--seeds',
            *seeds,
        ],
        capsys,
    )
    assert err == f'error: {message}'
