r"""experiments/results_output.py: the demo's block of
experiments/results.md from its recorded run (the check itself runs in
tests/experiments/test_pages.py)."""

import json

from tests.helpers.scripts import load_script


def test_results_output_abridges_each_phase():
    module = load_script('results_output')
    lines = [f'selection epoch {i}/9: loss=1' for i in range(1, 10)]
    lines += [f'final epoch {i}/3: loss=1' for i in range(1, 4)]
    lines += ['x; config: {"graph": "learned", "seed": 0}']
    text = module.abridge('\n'.join(lines)).splitlines()
    assert text[:5] == [
        'selection epoch 1/9: loss=1',
        'selection epoch 2/9: loss=1',
        '...',
        'selection epoch 8/9: loss=1',
        'selection epoch 9/9: loss=1',
    ]
    assert text[5:8] == [f'final epoch {i}/3: loss=1' for i in range(1, 4)]
    assert text[8:] == ['x;', 'config: graph=learned, seed=0']


def test_results_hand_edit_is_stale(tmp_path, monkeypatch):
    module = load_script('results_output')
    page = tmp_path / 'results.md'
    text = module.PAGE.read_text()
    start = text.index(module.START)
    record = json.loads(module.RECORD_JSON.read_text())
    shown = f'{record["zsl_acc"]:.1f}'
    assert shown in text[start:]
    page.write_text(text[:start] + text[start:].replace(shown, '99.9', 1))
    monkeypatch.setattr(module, 'PAGE', page)
    assert module.check() == [f'{page.name} differs from the record']


def test_results_record_checks_the_configuration(tmp_path, monkeypatch):
    # A changed default of the demo's command is stale; an option the
    # record predates is not, where its default is what ran then.
    module = load_script('results_output')
    setup = module.current_setup()
    changed = dict(setup, config=dict(setup['config'], lr=1.0))
    monkeypatch.setattr(module, 'current_setup', lambda: changed)
    assert module.check() == ['the configuration changed (lr)']
    monkeypatch.setattr(module, 'current_setup', lambda: setup)
    record = json.loads(module.RECORD_JSON.read_text())
    record['config'].pop('interaction', None)  # recorded before it
    older = tmp_path / 'record.json'
    older.write_text(json.dumps(record))
    monkeypatch.setattr(module, 'RECORD_JSON', older)
    assert module.check() == []
