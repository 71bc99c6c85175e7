import importlib.util
import os.path as osp

EXAMPLES = osp.join(osp.dirname(__file__), '..', '..', 'examples')


def load_example(name):
    spec = importlib.util.spec_from_file_location(
        name, osp.join(EXAMPLES, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ablation_example(tiny_root, tmp_path, capsys):
    ablation = load_example('ablation')
    out = tmp_path / 'table.md'
    ablation.main([
        '--dataset', 'TINY', '--root',
        str(tiny_root), '--out-dir',
        str(tmp_path / 'runs'), '--out',
        str(out), '--epochs', '1', '--iterations-per-epoch', '2',
        '--n-way', '4',
        '--graphs', 'none', 'learned'
    ])
    table = out.read_text()
    assert 'SIMULATED' in table
    lines = [line for line in table.splitlines() if line.startswith('| ')]
    # Header, 2 trainings x 2 graphs, and the ESZSL row:
    assert len(lines) == 1 + 4 + 1
    assert lines[-1].startswith('| ESZSL')
    assert all(line.count('|') == 12 for line in lines)  # 11 columns
    # 1 epoch chosen on the validation task, accuracy in percent:
    for line in lines[1:-1]:
        cells = [cell.strip() for cell in line.split('|')]
        assert cells[3].endswith('(1)') and cells[4].endswith('(1)')


def test_drop_in_example_model():
    import torch
    drop_in = load_example('drop_in')
    model = drop_in.Net(8, 16, 3)
    x, edge_index = torch.randn(5, 8), torch.tensor([[0, 1, 2], [1, 2, 3]])
    assert model(x, edge_index).size() == (5, 3)
    assert drop_in.Net(8, 16, 3, propagate=False).conv is None


def test_drop_in_example_runs(capsys, monkeypatch):
    drop_in = load_example('drop_in')
    monkeypatch.setattr('sys.argv', ['drop_in.py', '--epochs', '1'])
    drop_in.main()
    assert 'MLP + APNetConv: test accuracy' in capsys.readouterr().out
