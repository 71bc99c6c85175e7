r"""The README is a short reference whose snippet runs and whose links
resolve; the results it links (experiments/results.md) are generated, and a
stale generated block fails here."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / 'README.md'
# The pages whose links are checked: every markdown page of the repository
# (but the recorded runs, whose links are the runs').
LINKED_PAGES = [README] + sorted(
    page
    for folder in ('docs', 'experiments', 'benchmarks', 'apnet_pyg')
    for page in (ROOT / folder).rglob('*.md')
    if 'results' not in page.relative_to(ROOT).parts[1:-1]
)
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
    # A reference, not the results: those belong in experiments/results.md.
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
