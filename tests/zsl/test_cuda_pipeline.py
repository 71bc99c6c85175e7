r"""The APNet pipeline on CUDA (the CUDA test tier: skipped, with its
reason, where CUDA is not available; `pytest -m cuda` runs these)."""
import math

import pytest
import torch

from apnet_pyg.data import load_xlsa17
from apnet_pyg.zsl import evaluate, load_model, run, train_model
from apnet_pyg.zsl.train import build_model

# tests/zsl is on sys.path (rootdir import mode, no __init__.py).
from test_train import TINY

pytestmark = pytest.mark.filterwarnings(
    'ignore::apnet_pyg.zsl.train.NotLearningWarning')


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY', attributes='percent')


def test_pipeline_runs_on_cuda(tiny, tmp_path, cuda_device):
    # The whole protocol, 2 epochs: selection on the validation task, final
    # training, evaluation, the saved models.
    config = TINY.replace(epochs=2)
    metrics = run(tiny, config, tmp_path, device=cuda_device, progress=False)
    assert metrics['device'] == str(cuda_device)
    assert len(metrics['history']) == max(metrics['epochs'].values())
    assert all(math.isfinite(record['loss'])
               for record in metrics['history'])
    for key in ['zsl_acc', 'gzsl_seen', 'gzsl_unseen', 'gzsl_h',
                'gzsl_cal_seen', 'gzsl_cal_unseen', 'gzsl_cal_h']:
        assert 0.0 <= metrics[key] <= 100.0
    model = load_model(tmp_path, 'zsl', device=cuda_device)
    assert next(model.parameters()).device.type == 'cuda'
    # (CUDA's atomic sums may move a borderline image: one of 100.)
    assert evaluate(model, tiny)['zsl_acc'] == pytest.approx(
        metrics['zsl_acc'], abs=1.01)


@pytest.mark.parametrize('graph,training', [('learned', 'episodic'),
                                            ('none', 'minibatch'),
                                            ('learned', 'minibatch')])
def test_training_on_cuda_follows_cpu(tiny, graph, training, cuda_device):
    # The same seed trains the same model on either device, up to float32
    # rounding: the per-epoch losses of 2 epochs agree.
    config = TINY.replace(graph=graph, training=training,
                          iterations_per_epoch=5)
    losses = []
    for device in [torch.device('cpu'), cuda_device]:
        model = build_model(config, tiny, tiny.seen_classes)
        history = train_model(model, tiny, tiny.trainval_loc,
                              tiny.seen_classes, config, epochs=2,
                              device=device, progress=False)
        assert next(model.parameters()).device.type == device.type
        losses.append([record['loss'] for record in history])
    assert losses[1] == pytest.approx(losses[0], rel=1e-3)
