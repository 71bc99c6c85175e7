r"""The docs check (experiments/check_pages.py): every generated page, and
every figure a summary page quotes from a record, matches its record."""

from tests.helpers.scripts import load_script


def test_every_page_matches_its_record():
    assert load_script('check_pages').problems() == []


def test_a_changed_figure_is_stale(tmp_path, monkeypatch):
    check_pages = load_script('check_pages')
    results_output = check_pages.load('results_output')
    page = tmp_path / 'results.md'
    text = results_output.PAGE.read_text()
    rows = [line for line in text.splitlines() if line.startswith('| AWA2 |')]
    cells = rows[0].split('|')
    cells[3] = ' 0.0 '
    page.write_text(text.replace(rows[0], '|'.join(cells)))

    def load(name):
        module = load_script(name)
        if name == 'results_output':
            module.PAGE = page
        return module

    monkeypatch.setattr(check_pages, 'load', load)
    assert len(check_pages.demo_table()) == 1


def test_a_figure_results_md_quotes_must_be_on_its_page(tmp_path, monkeypatch):
    check_pages = load_script('check_pages')
    runner = check_pages.load('node_classification')
    page = tmp_path / 'node-classification.md'
    text = open(runner.TABLE_OUT).read()
    row = next(line for line in text.splitlines() if line.startswith('| MLP'))
    page.write_text(text.replace(row, '| MLP | 0.0 ± 0.0 |'))
    runner.TABLE_OUT = str(page)
    monkeypatch.setattr(check_pages, 'load', lambda name: runner)
    problems = check_pages.node_classification()
    assert any(p.startswith(str(page)) for p in problems)  # stale page
    assert any('(the operator table) is not on' in p for p in problems)
