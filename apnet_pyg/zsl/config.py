r"""Training configurations of the APNet pipeline.

:data:`PAPER` is the recipe of the paper (Liu et al., AAAI 2020, Sec.
"Implementation details"): Adam with learning rate :math:`2 \cdot 10^{-5}`
and weight decay :math:`10^{-4}`, 360 epochs, the learning rate multiplied
by 0.1 at epoch 240, episodes of :math:`N = 30` classes :math:`\times`
:math:`K = 1` image, and :math:`|X_{train}| / (N K)` episodes per epoch.
:data:`FAST` is the short recipe of the offline demo: the paper's optimiser
(Adam, learning rate :math:`2 \cdot 10^{-5}`, weight decay
:math:`10^{-4}`) for 20 epochs of 200 episodes. On simulated AWA2 (seed 0),
the validation ZSL accuracy of the paper's optimiser stops improving after
about 4,000 episodes: 64.9% at 4,000 episodes, 65.3% +- 0.5 over episodes
4,200 to 8,000. A learning rate of :math:`10^{-4}` learns faster at first
but settles lower (60 to 64%, 63.2% with a decay after 1,600 episodes),
and :math:`3 \cdot 10^{-4}` or more diverges. See the README.
"""
import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional

from apnet_pyg.graph.cosine import COS_40_DEGREES


@dataclass
class TrainConfig:
    r"""Everything that determines a training run (saved with every run).

    Model: :obj:`graph` (:obj:`"learned"`, :obj:`"wordnet"`, :obj:`"none"`),
    :obj:`num_centroids`, :obj:`class_channels`, :obj:`hidden_channels`,
    :obj:`proj_channels`, :obj:`threshold` (:math:`\epsilon`),
    :obj:`propagation_temperature` (:math:`\gamma_1`), :obj:`num_steps`,
    :obj:`activation`, :obj:`logit_scale` (:math:`\gamma_2`).

    Optimisation: :obj:`training` (:obj:`"episodic"` or the ablation's
    :obj:`"minibatch"`), :obj:`n_way`, :obj:`k_shot` (a mini-batch holds
    :obj:`n_way * k_shot` images), :obj:`lr`, :obj:`weight_decay`,
    :obj:`epochs`, :obj:`lr_decay_epoch`, :obj:`lr_decay`,
    :obj:`iterations_per_epoch` (:obj:`None`: :math:`|X_{train}| / (N K)`),
    :obj:`seed`, :obj:`attributes` (:obj:`"att"` or :obj:`"original_att"`).

    Model selection: :obj:`model_selection` is :obj:`"validation"` (train
    on the benchmark's :obj:`trainclasses1`, pick the epoch with the best
    ZSL accuracy on :obj:`valclasses1`, retrain on all seen classes for that
    many epochs) or :obj:`"none"` (train on all seen classes for
    :obj:`epochs`).
    """
    graph: str = 'learned'
    num_centroids: int = 3
    class_channels: int = 2048
    hidden_channels: int = 2048
    proj_channels: int = 256
    threshold: float = COS_40_DEGREES
    propagation_temperature: float = 10.0
    num_steps: int = 1
    activation: str = 'relu'
    logit_scale: float = 30.0

    training: str = 'episodic'
    n_way: int = 30
    k_shot: int = 1
    lr: float = 2e-5
    weight_decay: float = 1e-4
    epochs: int = 360
    lr_decay_epoch: Optional[int] = 240
    lr_decay: float = 0.1
    iterations_per_epoch: Optional[int] = None
    seed: int = 0
    attributes: str = 'att'
    model_selection: str = 'validation'

    def __post_init__(self):
        choices = {
            'graph': ('learned', 'wordnet', 'none'),
            'training': ('episodic', 'minibatch'),
            'attributes': ('att', 'original_att'),
            'model_selection': ('validation', 'none'),
            'activation': ('relu', 'sigmoid'),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"'{name}' must be one of "
                                 f"{', '.join(allowed)} "
                                 f"(got '{getattr(self, name)}')")
        for name in ('epochs', 'n_way', 'k_shot', 'num_centroids'):
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be positive "
                                 f"(got {getattr(self, name)})")
        if self.iterations_per_epoch is not None and \
                self.iterations_per_epoch < 1:
            raise ValueError(f"'iterations_per_epoch' must be positive "
                             f"(got {self.iterations_per_epoch})")

    def replace(self, **changes) -> 'TrainConfig':
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> 'TrainConfig':
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"Unknown configuration keys: "
                             f"{', '.join(sorted(unknown))}")
        return cls(**values)


#: The paper's recipe.
PAPER = TrainConfig()

#: The offline demo's recipe: the paper's optimiser for 20 x 200 episodes
#: (a few minutes on 2 CPU cores).
FAST = TrainConfig(epochs=20, lr_decay_epoch=None, iterations_per_epoch=200)

RECIPES = {'paper': PAPER, 'fast': FAST}
