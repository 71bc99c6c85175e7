r"""What a run of :obj:`make demo`'s configuration is expected to print: its
figures over several seeds of the whole pipeline, measured by
:obj:`experiments/demo_seeds.py` and kept in :obj:`demo_expected.json`
beside this module. Training amplifies the last bits in which processors'
matrix products differ, so one processor's digits do not tell a newcomer
whether their run is right; a range measured over seeds does. The
pipeline prints it beside its own figures when it runs that configuration
(same dataset, training options but the seed, and simulator options)."""

import json
from pathlib import Path
from typing import Any, Dict, Optional

from apnet_pyg.zsl.config import TrainConfig

#: The measured range, written by experiments/demo_seeds.py.
EXPECTED_FILE = Path(__file__).with_name('demo_expected.json')

#: The figures of the range, by metrics.json key, with their names.
FIGURES = {
    'zsl_acc': 'ZSL acc',
    'gzsl_h': 'H',
    'gzsl_cal_h': 'calibrated H',
}


def setup_of(metrics: Dict[str, Any]) -> Dict[str, Any]:
    r"""What makes two runs the same configuration: the dataset, the
    training options but the seed (an option added since a run was
    recorded takes its default, what that run ran with), and the
    simulator's version and options."""
    simulation = metrics.get('simulation') or {}
    return current_setup(
        {
            'dataset': metrics['dataset'],
            'config': metrics['config'],
            'simulator': [
                simulation.get('version'),
                simulation.get('options'),
            ],
        }
    )


def current_setup(setup: Dict[str, Any]) -> Dict[str, Any]:
    r"""A recorded :func:`setup_of` as today's options read it (an option
    added since it was recorded takes its default, what the run ran
    with), so that setups recorded before and after an option was added
    compare equal."""
    config = TrainConfig.from_dict({**setup['config'], 'seed': 0}).to_dict()
    config.pop('seed')
    return {**setup, 'config': config}


def expected_line(metrics: Dict[str, Any]) -> Optional[str]:
    r"""The line that puts :obj:`metrics` beside the measured range, or
    :obj:`None` where the run is not of the measured configuration (or no
    range was measured)."""
    if not EXPECTED_FILE.exists():
        return None
    expected = json.loads(EXPECTED_FILE.read_text())
    if setup_of(metrics) != current_setup(expected['setup']):
        return None
    parts = []
    for key, name in FIGURES.items():
        figure = expected['figures'][key]
        parts.append(
            f'{name} {metrics[key]:.1f} (seeds: {figure["min"]:.1f} to '
            f'{figure["max"]:.1f}, mean {figure["mean"]:.1f} ± '
            f'{figure["std"]:.1f})'
        )
    return (
        f'this run beside seeds {expected["seeds"]} of this configuration '
        f'on one processor ({expected["machine"]}; another processor can '
        f'fall outside by a few points; SIMULATED features): '
        + ', '.join(parts)
    )
