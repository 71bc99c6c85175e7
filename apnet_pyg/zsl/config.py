r"""Training configurations of the APNet pipeline: every choice of a run,
declared once in :class:`TrainConfig` with its source, and named bundles of
them.

Sources: "the paper" is Liu et al., AAAI 2020 (Sec. "Implementation
Details"); "the authors' code" is their public implementation of this model
(:obj:`PPNRelationNet` in the IPN repository, with its data preparation and
AWA2 training script). Where the paper is explicit, the default follows the
paper; each departure (the authors' code, this package's version 0.1) is a
named value of an option.

* :data:`VARIANTS` name the model as read from each source
  (:obj:`"paper"`, the default; :obj:`"authors"`; :obj:`"v0.1"`, this
  package's first, seen-biased reading).
* :data:`RECIPES` name training schedules: :obj:`"paper"` (360 epochs) and
  :obj:`"fast"` (the offline demo: 20 epochs of 200 episodes).
"""

import dataclasses
import math
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from apnet_pyg.checks import check_temperature
from apnet_pyg.data.xlsa17 import ATTRIBUTE_KINDS
from apnet_pyg.graph.cosine import COS_40_DEGREES, check_threshold
from apnet_pyg.nn.models.apnet import (
    GRAPHS,
    KNN_CLASSES,
    KNN_SPACES,
    check_logit_scale,
)
from apnet_pyg.nn.models.relation_head import INTERACTIONS, SCORES

TRAININGS = ('episodic', 'minibatch')
EPOCH_LENGTHS = ('paper', 'authors')
MODEL_SELECTIONS = ('validation', 'none')
INITIALIZATIONS = ('standardized', 'pytorch')


def _option(default, help: str, choices=None):
    return field(default=default, metadata={'help': help, 'choices': choices})


#: The largest seed a configuration takes.
MAX_SEED = 2**32 - 1


@dataclass
class TrainConfig:
    r"""Everything that determines a training run (saved with every run).
    Each field's :obj:`metadata['help']` says what it is and where its
    default comes from; the command line's flags are derived from them."""

    # Model.
    graph: str = _option(
        'learned',
        "class graph: 'learned' (cosine >= threshold between the "
        "projected class vectors; the paper), 'wordnet' (WordNet, weights "
        "1/hops; the paper's alternative), 'knn' (each class joined to its "
        "knn_k nearest classes by cosine; DBiGCN's) or 'none' (no "
        'propagation)',
        GRAPHS,
    )
    knn_k: int = _option(
        2, "with graph 'knn': the neighbours of each class (DBiGCN: 2)"
    )
    knn_loop: bool = _option(
        False,
        "with graph 'knn': a class keeps its own vector in the "
        'propagation (a self-loop); without, it is composed from its '
        "neighbours alone (DBiGCN's)",
    )
    knn_space: str = _option(
        'descriptions',
        "with graph 'knn': the neighbours by cosine between the class "
        "descriptions ('descriptions', fixed) or between the encoded "
        "class vectors ('encoded', trained with the encoder)",
        KNN_SPACES,
    )
    knn_classes: str = _option(
        'task',
        "with graph 'knn': the graph over the task's classes ('task', "
        "as the other graphs) or over every class of the dataset ('all', "
        "DBiGCN's: an unseen class composed from the seen classes it "
        "resembles; reads every class's description in training, never "
        'an unseen image)',
        KNN_CLASSES,
    )
    learn_propagation_temperature: bool = _option(
        False,
        'train gamma_1, the propagation temperature, from its value '
        '(the paper: fixed)',
    )
    num_centroids: int = _option(
        3, 'centroid experts of the class encoder (the paper: 3 for AWA)'
    )
    class_channels: int = _option(
        2048, "size of the class vectors (the authors' code: 2048)"
    )
    hidden_channels: int = _option(
        2048, "hidden size of the relation head (the authors' code: 2048)"
    )
    proj_channels: int = _option(
        256,
        'size of the projection f in which class cosines are measured '
        "(the authors' code: 256)",
    )
    threshold: float = _option(
        COS_40_DEGREES,
        'edge threshold of the learned graph (the paper: cos 40 degrees)',
    )
    propagation_temperature: float = _option(
        10.0,
        'gamma_1, the temperature of the propagation softmax (the paper: 10)',
    )
    num_steps: int = _option(1, 'propagation steps (the paper: 1)')
    score: str = _option(
        'sigmoid',
        "the relation head's score: 'sigmoid', bounded in (0, 1) "
        "(the paper: 'sigma ... implemented using Sigmoid to map the result "
        "between 0 and 1'), or 'linear', unbounded (the authors' code)",
        SCORES,
    )
    interaction: str = _option(
        'additive',
        'how the relation head joins a class vector and a '
        "sample: 'additive', w^T ReLU(W1 x_y + W2 v + b1) (the paper), or "
        "'multiplicative', w^T (W1 x_y * ReLU(W2 v + b1)), a bilinear form "
        'with no per-class offset',
        INTERACTIONS,
    )
    logit_scale: float = _option(
        30.0,
        'gamma_2, the logits are gamma_2 times the scores (the paper: '
        "30; the authors' code divides by T = 100, i.e. 0.01)",
    )
    initialization: str = _option(
        'standardized',
        "'standardized': the encoder's experts scaled to "
        'unit pre-activation spread over the training classes and the '
        "head's output layer zeroed (needed to train the paper's sigmoid "
        "score on the authors' percentage attributes, which saturate it "
        "at PyTorch's default initialisation); 'pytorch': PyTorch's default "
        "initialisation of every layer (the authors' code) but the "
        'projection f, Glorot in both. The paper says nothing of it',
        INITIALIZATIONS,
    )
    attributes: str = _option(
        'percent',
        "class attributes the model reads: 'percent' "
        "(original_att on a 0-100 scale, SUN's and APY's fractions x 100: "
        "the authors' code), 'original_att' (raw) or 'att' (L2-normalised, "
        "the benchmark's; v0.1)",
        ATTRIBUTE_KINDS,
    )

    # Optimisation.
    training: str = _option(
        'episodic',
        "'episodic' (N-way K-shot tasks; the paper) or "
        "'minibatch' (every image against all training classes; the "
        "paper's ablation)",
        TRAININGS,
    )
    n_way: int = _option(30, 'classes per episode, N (the paper: 30)')
    k_shot: int = _option(1, 'images per class per episode, K (the paper: 1)')
    lr: float = _option(2e-5, 'Adam learning rate (the paper: 2e-5)')
    weight_decay: float = _option(1e-4, 'Adam weight decay (the paper: 1e-4)')
    epochs: int = _option(360, 'epochs (the paper: 360)')
    lr_decay_epoch: Optional[int] = _option(
        240,
        'epoch after which the learning rate is multiplied by lr_decay '
        "(the paper: 240; 'none': never)",
    )
    lr_decay: float = _option(
        0.1, 'learning-rate decay factor (the paper: 0.1)'
    )
    epoch_length: str = _option(
        'paper',
        "episodes per epoch: 'paper', |X_train| / (N K), or "
        "'authors', ((|X_train| / (N K)) // 100 + 1) * 100 (the authors' "
        'code)',
        EPOCH_LENGTHS,
    )
    iterations_per_epoch: Optional[int] = _option(
        None, 'episodes (or mini-batches) per epoch; overrides epoch_length'
    )
    seed: int = _option(
        0,
        'random seed of the model, k-means, sampler '
        'and seen-validation split, 0 to 2^32 - 1',
    )

    # Model selection and evaluation.
    model_selection: str = _option(
        'validation',
        "'validation': train on trainclasses1 (minus a held-"
        'out share of its images), choose the epochs (and the GZSL '
        'calibration) on valclasses1 and the held-out images, retrain on '
        "all seen classes; 'none': train for 'epochs' on all seen classes",
        MODEL_SELECTIONS,
    )
    seen_val_fraction: float = _option(
        0.2,
        "share of each trainclasses1 class's images held out as "
        "seen-class validation for GZSL selection (the benchmark's own "
        'trainval : test_seen ratio is about 80 : 20)',
    )
    report_test_selected: bool = _option(
        False,
        "also report the authors' protocol, the epoch of best TEST "
        "H, labelled 'test-set selected (optimistic)'; never used for any "
        'choice',
    )

    def __post_init__(self):
        for option in dataclasses.fields(self):
            _check_type(
                option.name,
                getattr(self, option.name),
                _FIELD_TYPES[option.name],
            )
            choices = option.metadata.get('choices')
            value = getattr(self, option.name)
            if choices is not None and value not in choices:
                raise ValueError(
                    f"'{option.name}' must be one of "
                    f"{', '.join(choices)} (got '{value}')"
                )
        for name in (
            'epochs',
            'n_way',
            'k_shot',
            'num_centroids',
            'class_channels',
            'hidden_channels',
            'proj_channels',
            'num_steps',
            'knn_k',
        ):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"'{name}' must be positive (got {getattr(self, name)})"
                )
        # The sampler seeds itself with seed + 1: bounded well inside
        # torch.manual_seed's range.
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(
                f"'seed' must lie in [0, 2^32 - 1] (got {self.seed})"
            )
        if self.n_way < 2:
            raise ValueError(f"'n_way' must be at least 2 (got {self.n_way})")
        for name in ('iterations_per_epoch', 'lr_decay_epoch'):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(
                    f"'{name}' must be positive or None (got {value})"
                )
        if not 0.0 < self.seen_val_fraction < 1.0:
            raise ValueError(
                f"'seen_val_fraction' must lie in (0, 1) "
                f'(got {self.seen_val_fraction})'
            )
        check_logit_scale(self.logit_scale)
        # Checked here, before any data is read (Adam and the model would
        # refuse them only once training starts, or not at all).
        for name in ('lr', 'lr_decay'):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"'{name}' must be positive (got {getattr(self, name)})"
                )
        if self.weight_decay < 0:
            raise ValueError(
                f"'weight_decay' must be at least 0 (got {self.weight_decay})"
            )
        # The library's own checks, here before any data is read.
        check_threshold(self.threshold)
        check_temperature(
            self.propagation_temperature, 'propagation_temperature'
        )

    def replace(self, **changes) -> 'TrainConfig':
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> 'TrainConfig':
        known = {option.name for option in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(
                f'Unknown configuration keys: '
                f'{", ".join(map(repr, sorted(unknown)))}'
            )
        return cls(**values)

    def episodes_per_epoch(self, num_train_images: int) -> int:
        r"""Episodes (or mini-batches) per epoch for :obj:`num_train_images`
        training images (see :obj:`epoch_length`)."""
        if self.iterations_per_epoch is not None:
            return self.iterations_per_epoch
        per_image_set = num_train_images // (self.n_way * self.k_shot)
        if self.epoch_length == 'authors':
            return (per_image_set // 100 + 1) * 100
        return max(1, per_image_set)


_FIELD_TYPES = typing.get_type_hints(TrainConfig)


def _optional_int(text: str) -> Optional[int]:
    return None if text.lower() == 'none' else int(text)


def option_parser(name: str) -> Callable[[str], Any]:
    r"""How the value of option :obj:`name` is read from text (a command-line
    flag, a tuning grid): with the option's type, :obj:`'none'` for an
    optional integer; raises :obj:`ValueError` on text of another type. The
    boolean option is a switch, never read from text."""
    kind = _FIELD_TYPES[name]
    if kind is bool:
        raise TypeError(f"'{name}' is a switch: it is not read from text")
    return _optional_int if kind == Optional[int] else kind


def parse_option_value(name: str, text: str, flag: str, item: str) -> Any:
    r"""The value of option :obj:`name` read from :obj:`text`
    (:func:`option_parser`), given in :obj:`item` of the command-line flag
    :obj:`flag` (e.g. :obj:`--grid`); a one-line :class:`ValueError` naming
    both otherwise."""
    parse = option_parser(name)
    try:
        return parse(text)
    except ValueError:
        # Text options never fail; the rest are the optional integers.
        what = {int: 'an integer', float: 'a number'}.get(
            parse, "an integer or 'none'"
        )
        raise ValueError(
            f"{flag} '{item}': '{text}' is not {what} (the type of '{name}')"
        ) from None


def _check_type(name: str, value: Any, kind: Any) -> None:
    r"""Checks that :obj:`value` has the declared type of field
    :obj:`name` (a bool is no number here; a float must be finite)."""
    optional = kind == Optional[int]
    if optional and value is None:
        return
    if kind in (int, Optional[int]):
        ok = isinstance(value, numbers.Integral) and not isinstance(
            value, bool
        )
        what = 'an integer or None' if optional else 'an integer'
    elif kind is float:
        ok = (
            isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and math.isfinite(value)
        )
        what = 'a finite number'
    elif kind is bool:
        ok, what = isinstance(value, bool), 'True or False'
    else:
        ok, what = isinstance(value, str), 'a string'
    if not ok:
        raise ValueError(
            f"'{name}' must be {what} (got {type(value).__name__} {value!r})"
        )


#: The model as read from each source (see the module docstring).
VARIANTS: Dict[str, Dict[str, Any]] = {
    'paper': dict(
        score='sigmoid',
        logit_scale=30.0,
        attributes='percent',
        epoch_length='paper',
        initialization='standardized',
    ),
    'authors': dict(
        score='linear',
        logit_scale=0.01,
        attributes='percent',
        epoch_length='authors',
        initialization='pytorch',
    ),
    'v0.1': dict(
        score='linear',
        logit_scale=30.0,
        attributes='att',
        epoch_length='paper',
        initialization='pytorch',
    ),
}

#: The paper's recipe: Adam, learning rate 2e-5, weight decay 1e-4, 360
#: epochs, decay x 0.1 at epoch 240, 30-way 1-shot episodes.
PAPER = TrainConfig()

#: The offline demo's schedule: the paper's optimiser for 20 epochs of 200
#: episodes, no decay (a few minutes on 2 CPU cores).
FAST = TrainConfig(epochs=20, lr_decay_epoch=None, iterations_per_epoch=200)

RECIPES = {'paper': PAPER, 'fast': FAST}
