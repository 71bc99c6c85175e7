r"""experiments/demo_seeds.py: the demo's range from its record (written
once, read back by the pipeline), a seed in the record is not run again,
and a changed figure or configuration is caught."""

import json

import pytest

from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.zsl.reporting import expected
from tests.helpers.scripts import load_script

METRICS = {
    'dataset': 'AWA2',
    'config': TrainConfig(epochs=1).to_dict(),
    'simulation': {'version': 2, 'options': {'scale': 0.03}},
}
SETUP = expected.setup_of(METRICS)


def row(seed, zsl_acc, setup=SETUP):
    return {
        'zsl_acc': zsl_acc,
        'gzsl_h': 2.0 * seed,
        'gzsl_cal_h': 60.0 - seed,
        'seed': seed,
        'setup': setup,
        'machine': 'a processor, 2 cores',
        'seconds': 1.0,
    }


@pytest.fixture
def script(tmp_path, monkeypatch):
    script = load_script('demo_seeds')
    monkeypatch.setattr(script, 'RECORD', tmp_path / 'demo-seeds.jsonl')
    monkeypatch.setattr(script, 'PAGE', tmp_path / 'demo-seeds.md')
    monkeypatch.setattr(script, 'EXPECTED_FILE', tmp_path / 'expected.json')
    monkeypatch.setattr(script, 'ROOT', tmp_path)
    ran = []

    def run_seed(seed, folder):
        ran.append(seed)
        return row(seed, 50.0 + seed)

    monkeypatch.setattr(script, 'run_seed', run_seed)
    script.ran = ran
    return script


def test_the_range_from_the_record(script):
    script.main(['--seeds', '0', '1', '2'])
    assert script.ran == [0, 1, 2]
    summary = json.loads(script.EXPECTED_FILE.read_text())
    assert summary['seeds'] == '0, 1, 2'
    assert summary['figures']['zsl_acc'] == {
        'min': 50.0,
        'max': 52.0,
        'mean': 51.0,
        'std': 1.0,
    }
    page = script.PAGE.read_text()
    assert '| 1 | 51.0 | 2.0 | 59.0 |' in page
    assert '| range | 50.0 to 52.0 | 0.0 to 4.0 | 58.0 to 60.0 |' in page
    assert 'SIMULATED' in page and script.check() == []
    # A seed in the record is not run again.
    script.main(['--seeds', '1', '3'])
    assert script.ran == [0, 1, 2, 3]
    # An edited page, or a record of two configurations, is caught.
    script.PAGE.write_text(page.replace('51.0', '61.0'))
    assert 'differs from' in script.check()[0]
    with open(script.RECORD, 'a') as f:
        f.write(json.dumps(row(4, 50.0, setup={**SETUP, 'dataset': 'CUB'})))
    with pytest.raises(ValueError, match='runs of 2 configurations'):
        script.check()


def test_the_pipeline_prints_the_range(script, monkeypatch):
    script.main(['--seeds', '0', '1'])
    monkeypatch.setattr(expected, 'EXPECTED_FILE', script.EXPECTED_FILE)
    figures = {'zsl_acc': 55.0, 'gzsl_h': 1.0, 'gzsl_cal_h': 59.0}
    line = expected.expected_line({**METRICS, **figures})
    assert 'ZSL acc 55.0 (seeds: 50.0 to 51.0, mean 50.5 ± 0.7)' in line
    assert 'seeds 0, 1' in line and 'SIMULATED' in line
    # Another seed of the same configuration is the same configuration;
    # another configuration gets no line.
    config = {**METRICS['config'], 'seed': 7}
    assert expected.expected_line({**METRICS, 'config': config, **figures})
    config = {**METRICS['config'], 'epochs': 2}
    assert not expected.expected_line({**METRICS, 'config': config, **figures})
