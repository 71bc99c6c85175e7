r"""The closed-form baselines: ESZSL (:mod:`~apnet_pyg.zsl.baselines.eszsl`)
and SAE (:mod:`~apnet_pyg.zsl.baselines.sae`), and both fitted and
evaluated on a dataset through the benchmark's protocol
(:mod:`~apnet_pyg.zsl.baselines.benchmark`)."""

from apnet_pyg.zsl.baselines.benchmark import fit_baselines
from apnet_pyg.zsl.baselines.eszsl import fit_eszsl, fit_eszsl_validated
from apnet_pyg.zsl.baselines.sae import fit_sae, fit_sae_validated

__all__ = [
    'fit_baselines',
    'fit_eszsl',
    'fit_eszsl_validated',
    'fit_sae',
    'fit_sae_validated',
]
