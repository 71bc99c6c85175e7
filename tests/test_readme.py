r"""The README is a short reference whose snippet runs and whose links
resolve; the results it links (docs/results.md) are generated, and a stale
generated block fails here."""

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / 'README.md'
# The pages whose links are checked: the README and the pages made from it.
LINKED_PAGES = [README] + [
    ROOT / 'docs' / name
    for name in ('results.md', 'pipeline.md', 'install.md', 'operator.md')
]
MAX_README_LINES = 200
# [text](target) and ![alt](target), with no URL scheme.
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')


def test_readme_drop_in_snippet_runs():
    snippets = re.findall(r'```python\n(.*?)```', README.read_text(), re.S)
    assert snippets, 'the README lost its Python example'
    namespace = {}
    exec(compile(snippets[0], str(README), 'exec'), namespace)
    data, out = namespace['data'], namespace['out']
    assert out.shape == (data.num_nodes, int(data.y.max()) + 1)
    assert out.isfinite().all()


def test_readme_is_short():
    # A reference, not the results: those belong in docs/results.md.
    num_lines = len(README.read_text().splitlines())
    assert num_lines <= MAX_README_LINES, (
        f'README.md has {num_lines} lines (at most {MAX_README_LINES})'
    )


def _anchors(page: Path) -> set:
    r"""GitHub's anchors of the page's headings."""
    anchors = set()
    for heading in re.findall(r'^#+ (.*)$', page.read_text(), re.M):
        slug = re.sub(r'[^\w\- ]', '', heading.strip().lower())
        anchors.add(slug.replace(' ', '-'))
    return anchors


def _broken_links(page: Path) -> list:
    text = re.sub(r'```.*?```', '', page.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r'^[a-z]+:', target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition('#')
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == '.md' and anchor not in _anchors(file):
            broken.append(target)
    return broken


def test_relative_links_resolve():
    broken = {
        str(page.relative_to(ROOT)): _broken_links(page)
        for page in LINKED_PAGES
    }
    assert {page: links for page, links in broken.items() if links} == {}


def test_links_are_checked(tmp_path):
    page = tmp_path / 'page.md'
    (tmp_path / 'there.md').write_text('# A heading, here\n')
    page.write_text(
        '[a](there.md) [b](there.md#a-heading-here) '
        '[c](missing.md) [d](there.md#nowhere) '
        '[e](https://example.org/x)\n```text\n[f](gone.md)\n```\n'
    )
    assert _broken_links(page) == ['missing.md', 'there.md#nowhere']


def _results_output():
    spec = importlib.util.spec_from_file_location(
        'results_output', ROOT / 'scripts' / 'results_output.py'
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_pipeline_output_is_the_recorded_run():
    # Fails when the defaults of `make demo` or the simulator change, or the
    # block of docs/results.md is edited by hand: run
    # scripts/results_output.py again.
    assert _results_output().check() == []


def test_results_output_abridges_each_phase():
    module = _results_output()
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
    module = _results_output()
    page = tmp_path / 'results.md'
    text = module.PAGE.read_text()
    start = text.index(module.START)
    record = json.loads(module.RECORD_JSON.read_text())
    shown = f'{record["zsl_acc"]:.1f}'
    assert shown in text[start:]
    page.write_text(text[:start] + text[start:].replace(shown, '99.9', 1))
    monkeypatch.setattr(module, 'PAGE', page)
    assert module.check() == [f'{page.name} differs from the record']


def test_results_table_quotes_the_recorded_demo():
    # The summary table's AWA2 rows are the demo's run on the Intel Xeon of
    # the table's other rows: they must be its record (the other rows'
    # records are linked beside the table).
    module = _results_output()
    record = json.loads(
        (
            module.RECORD_JSON.parent / 'pipeline-AWA2-intel-xeon.json'
        ).read_text()
    )
    rows = {}
    for line in module.PAGE.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip('|').split('|')]
        if len(cells) == 9 and cells[0] == 'AWA2':
            rows[cells[1]] = cells[2:]
    keys = ('zsl_acc', 'gzsl_seen', 'gzsl_unseen', 'gzsl_h')
    apnet = [
        record[key]
        for key in keys + ('gzsl_cal_seen', 'gzsl_cal_unseen', 'gzsl_cal_h')
    ]
    assert rows["APNet (paper's reading)"] == [f'{v:.1f}' for v in apnet]
    for name in ('ESZSL', 'SAE'):
        raw = [record['baselines'][name][key] for key in keys]
        assert rows[name][:4] == [f'{v:.1f}' for v in raw]


def test_results_record_checks_the_configuration(tmp_path, monkeypatch):
    # A changed default of the demo's command is stale; an option the
    # record predates is not, where its default is what ran then.
    module = _results_output()
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
