r"""experiments/zero_shot_nodes_results.py: the page is the output of the
command it runs, its blocks kept while current, its check."""

import apnet_pyg.zsl.cli as cli
from tests.helpers.scripts import load_script


def test_keeps_only_current_blocks(tmp_path, monkeypatch):
    # A block of another selection stays on the page while its command is
    # the current one; a stale one (an earlier command) is dropped.
    script = load_script('zero_shot_nodes_results')
    monkeypatch.setattr(
        cli, 'main', lambda arguments: print('selection log\n\ntable') or 0
    )
    page = tmp_path / 'page.md'
    _, begin, end = script.BLOCKS['folds']
    current = f'{begin}\n`{script.command_line("folds")}` ...\n{end}'
    page.write_text(f'intro\n{current}\n')
    assert script.main(['--out', str(page)]) == 0
    written = page.read_text()
    assert written.startswith(script.INTRO)
    assert current in written and script.FOLDS_INTRO in written
    assert 'table' in written and 'load average' in written
    assert script.check(page) == []
    page.write_text(f'{begin}\n`apnet-zsl nodes --old`\n{end}\n')
    assert script.main(['--out', str(page)]) == 0
    written = page.read_text()
    assert 'nodes --old' not in written and script.FOLDS_INTRO not in written


def test_check_finds_a_stale_page(tmp_path, monkeypatch):
    script = load_script('zero_shot_nodes_results')
    monkeypatch.setattr(
        cli, 'main', lambda arguments: print('selection log\n\ntable') or 0
    )
    page = tmp_path / 'page.md'
    assert script.main(['--out', str(page)]) == 0
    assert script.check(page) == []
    text = page.read_text()
    page.write_text(text.replace(script.command_line(), 'apnet-zsl nodes'))
    (problem,) = script.check(page)
    assert 'not the output of' in problem and 'zero_shot_nodes_results' in (
        problem
    )
    page.write_text(text.replace(script.INTRO[:40], 'edited by hand'))
    assert "the prose is not the script's" in script.check(page)[0]


def test_the_command_adds_generalized_zero_shot():
    script = load_script('zero_shot_nodes_results')
    assert '--gzsl' in script.command_line()
