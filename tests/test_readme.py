r"""The README's Python snippet runs as written (it is what a newcomer
copies first)."""
import importlib.util
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


def _readme_output():
    spec = importlib.util.spec_from_file_location(
        'readme_output', README.parent / 'scripts' / 'readme_output.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_pipeline_output_is_the_recorded_run():
    # Fails when the defaults of `make demo` or the simulator change, or the
    # README block is edited by hand: run scripts/readme_output.py again.
    assert _readme_output().check() == []


def test_readme_output_abridges_each_phase():
    module = _readme_output()
    lines = [f'selection epoch {i}/9: loss=1' for i in range(1, 10)]
    lines += [f'final epoch {i}/3: loss=1' for i in range(1, 4)]
    lines += ['x; config: {"graph": "learned", "seed": 0}']
    text = module.abridge('\n'.join(lines)).splitlines()
    assert text[:5] == ['selection epoch 1/9: loss=1',
                        'selection epoch 2/9: loss=1', '...',
                        'selection epoch 8/9: loss=1',
                        'selection epoch 9/9: loss=1']
    assert text[5:8] == [f'final epoch {i}/3: loss=1' for i in range(1, 4)]
    assert text[8:] == ['x;', 'config: graph=learned, seed=0']
