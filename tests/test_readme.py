r"""The README's Python snippet runs as written (it is what a newcomer
copies first)."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / 'README.md'


def test_readme_drop_in_snippet_runs():
    snippets = re.findall(r'```python\n(.*?)```', README.read_text(), re.S)
    assert snippets, 'the README lost its Python example'
    namespace = {}
    exec(compile(snippets[0], str(README), 'exec'), namespace)
    data, out = namespace['data'], namespace['out']
    assert out.shape == (data.num_nodes, int(data.y.max()) + 1)
    assert out.isfinite().all()
