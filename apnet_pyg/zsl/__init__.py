r"""The APNet zero-shot learning pipeline: configurations, training,
evaluation, the ESZSL baseline and the :obj:`apnet-zsl` command line."""
from apnet_pyg.zsl.config import FAST, PAPER, RECIPES, TrainConfig
from apnet_pyg.zsl.class_graph import ClassPrior
from apnet_pyg.zsl.evaluate import (
    evaluate,
    evaluate_predictions,
    zsl_accuracy,
)
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy
from apnet_pyg.zsl.train import load_model, run, train_model

__all__ = [
    'TrainConfig',
    'PAPER',
    'FAST',
    'RECIPES',
    'ClassPrior',
    'evaluate',
    'evaluate_predictions',
    'zsl_accuracy',
    'per_class_accuracy',
    'harmonic_mean',
    'train_model',
    'run',
    'load_model',
]
