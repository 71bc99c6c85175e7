r"""Published accuracies on the real xlsa17 benchmark (ResNet-101 features,
the proposed split), the figures that runs are compared with
(:mod:`apnet_pyg.zsl.reporting.compare`, :obj:`apnet-zsl compare`) and that the
simulator is calibrated against (:obj:`experiments/calibrate_simulator.py`).

Each figure is a per-class mean accuracy in %, in the order of
:data:`apnet_pyg.zsl.metrics.METRICS`: ZSL (unseen test images among the
unseen classes), GZSL :math:`U` and :math:`S` (unseen and seen test images
among all classes) and their harmonic mean :math:`H`; :obj:`None` where
the source gives none.

* ESZSL and SAE: Xian, Lampert, Schiele & Akata, "Zero-Shot Learning - A
  Comprehensive Evaluation of the Good, the Bad and the Ugly", TPAMI 2018,
  Tables 3 (ZSL, top-1 on the proposed split) and 4 (GZSL).
* APNet: Liu, Zhou, Long, Jiang & Zhang, AAAI 2020 (AWA2's ZSL and GZSL,
  CUB's :math:`H`; the others are not recorded here). The authors' code
  evaluates the test set every epoch and keeps the epoch of best test
  :math:`H`, the protocol of :obj:`TrainConfig.report_test_selected`; the
  runs of this package choose their epochs on validation.
"""

from typing import Dict, Optional, Tuple

from apnet_pyg.zsl.metrics import METRICS

Figures = Tuple[
    Optional[float], Optional[float], Optional[float], Optional[float]
]

SOURCES = {
    'ESZSL': 'Xian et al., TPAMI 2018',
    'SAE': 'Xian et al., TPAMI 2018',
    'APNet': 'Liu et al., AAAI 2020',
}

PUBLISHED: Dict[str, Dict[str, Figures]] = {
    'AWA2': {
        'ESZSL': (58.6, 5.9, 77.8, 11.0),
        'SAE': (54.1, 1.1, 82.2, 2.2),
        'APNet': (68.0, 54.8, 83.9, 66.4),
    },
    'AWA1': {'ESZSL': (58.2, 6.6, 75.6, 12.1), 'SAE': (53.0, 1.8, 77.1, 3.5)},
    'CUB': {
        'ESZSL': (53.9, 12.6, 63.8, 21.0),
        'SAE': (33.3, 7.8, 54.0, 13.6),
        'APNet': (None, None, None, 51.7),
    },
    'SUN': {'ESZSL': (54.5, 11.0, 27.9, 15.8), 'SAE': (40.3, 8.8, 18.0, 11.8)},
    'APY': {'ESZSL': (38.3, 2.4, 70.1, 4.6), 'SAE': (8.3, 0.4, 80.9, 0.9)},
}


def published(dataset: str, method: str) -> Dict[str, Optional[float]]:
    r"""The published figures of :obj:`method` on :obj:`dataset` by
    :obj:`metrics.json` key (every value :obj:`None` when none are
    known)."""
    figures = PUBLISHED.get(dataset.upper(), {}).get(
        method, (None,) * len(METRICS)
    )
    return dict(zip(METRICS, figures))
