r"""The APNet zero-shot learning pipeline: configurations, training,
evaluation, the ESZSL and SAE baselines, the comparison with published
figures and the :obj:`apnet-zsl` command line."""

from apnet_pyg.zsl.class_graph import wordnet_class_prior
from apnet_pyg.zsl.config import (
    FAST,
    PAPER,
    RECIPES,
    VARIANTS,
    TrainConfig,
)
from apnet_pyg.zsl.evaluate import (
    apnet_score_fn,
    best_calibration,
    evaluate,
    evaluate_predictions,
    evaluate_scores,
    validate,
    zsl_accuracy,
    zsl_per_class,
)
from apnet_pyg.zsl.factory import build_model
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy
from apnet_pyg.zsl.reporting.compare import compare_runs
from apnet_pyg.zsl.reporting.tables import format_comparison
from apnet_pyg.zsl.rundir import load_model
from apnet_pyg.zsl.train import run, select_on_validation, train_model

__all__ = [
    'TrainConfig',
    'PAPER',
    'FAST',
    'RECIPES',
    'VARIANTS',
    'wordnet_class_prior',
    'apnet_score_fn',
    'best_calibration',
    'evaluate',
    'evaluate_predictions',
    'evaluate_scores',
    'validate',
    'zsl_accuracy',
    'zsl_per_class',
    'per_class_accuracy',
    'harmonic_mean',
    'build_model',
    'train_model',
    'run',
    'select_on_validation',
    'load_model',
    'compare_runs',
    'format_comparison',
]
