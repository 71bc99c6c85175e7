import json

from apnet_pyg.zsl import TrainConfig
from apnet_pyg.zsl.reporting import expected


def metrics(seed=0, lr=2e-5, zsl=55.0):
    return {
        'dataset': 'AWA2',
        'config': TrainConfig(seed=seed, lr=lr).to_dict(),
        'simulation': {'version': 2, 'options': {'scale': 0.03}},
        'zsl_acc': zsl,
        'gzsl_h': 10.0,
        'gzsl_cal_h': 60.0,
    }


def write_range(path, setup):
    figure = {'min': 50.0, 'max': 60.0, 'mean': 55.0, 'std': 2.0}
    path.write_text(
        json.dumps(
            {
                'seeds': '0, 1',
                'machine': 'a CPU',
                'setup': setup,
                'figures': dict.fromkeys(expected.FIGURES, figure),
            }
        )
    )


def test_the_range_is_printed_for_the_measured_configuration(
    tmp_path, monkeypatch
):
    path = tmp_path / 'demo_expected.json'
    monkeypatch.setattr(expected, 'EXPECTED_FILE', path)
    assert expected.expected_line(metrics()) is None  # nothing measured
    setup = expected.setup_of(metrics(seed=3))
    setup['config'].pop('interaction')  # recorded before that option
    write_range(path, setup)
    line = expected.expected_line(metrics(seed=7, zsl=57.25))
    assert line.startswith('this run beside seeds 0, 1 of this')
    assert 'ZSL acc 57.2 (seeds: 50.0 to 60.0, mean 55.0 ± 2.0)' in line
    assert 'SIMULATED features' in line
    # Another configuration, dataset or simulator: no range.
    assert expected.expected_line(metrics(lr=1e-3)) is None
    other = metrics()
    other['simulation']['options'] = {'scale': 0.5}
    assert expected.expected_line(other) is None
