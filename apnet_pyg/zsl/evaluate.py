r"""The benchmark's evaluation protocol (Xian et al., TPAMI 2018), for any
classifier that scores images against candidate classes:

* ZSL: the test images of the unseen classes, classified among the unseen
  classes only (for APNet: the class graph over the unseen classes);
  per-class mean accuracy.
* GZSL: the test images of the seen and of the unseen classes, classified
  among all classes (class graph over all classes); seen accuracy
  :math:`S`, unseen accuracy :math:`U` (both per-class means) and
  :math:`H = 2SU / (S + U)`.
* Calibrated stacking (Chao et al., ECCV 2016): GZSL with a constant
  :math:`c` subtracted from every seen class's score before the argmax.
  :math:`c` is chosen on a validation task (:func:`validate`), never on
  test data; :func:`best_calibration` finds the :math:`c` of highest
  :math:`H` exactly.

A classifier is a :obj:`score_fn(image_index, classes)` returning the
scores :math:`(n, |\text{classes}|)` of the images against the classes.
All accuracies are in percent.
"""

import math
import numbers
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch
from torch import Tensor

from apnet_pyg.data.splits import ValidationSplit
from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.nn.models.apnet import APNet
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy

ScoreFn = Callable[[Tensor, Tensor], Tensor]


class APNetScores:
    r"""APNet as a :obj:`score_fn` of :obj:`data` (see the module
    docstring): the logits of images against classes, with the class graph
    built over exactly the given classes. The images' projections in the
    head (:obj:`lin_image`) are kept for the model's current weights, so a
    protocol that scores the same images against several class sets (ZSL
    and GZSL) projects them once. Scores are returned on the CPU."""

    def __init__(self, model: APNet, data: ZSLDataset, batch_size: int = 4096):
        if data.features is None:
            raise ValueError(
                'Evaluation needs image features: load the '
                'dataset with load_features=True'
            )
        self.model, self.data, self.batch_size = model, data, batch_size
        self._known = torch.zeros(0, dtype=torch.long)  # sorted image ids
        self._projected = None  # their projections, in that order

    @torch.no_grad()
    def _project(self, image_index: Tensor) -> Tensor:
        device = next(self.model.parameters()).device
        missing = image_index[~torch.isin(image_index, self._known)].unique()
        if missing.numel() > 0:
            new = torch.cat(
                [
                    self.model.head.lin_image(
                        self.data.features[index].to(device)
                    )
                    for index in missing.split(self.batch_size)
                ]
            )
            known = torch.cat([self._known, missing])
            projected = (
                new
                if self._projected is None
                else torch.cat([self._projected, new])
            )
            order = torch.argsort(known)
            self._known = known[order]
            self._projected = projected[order.to(device)]
        position = torch.searchsorted(self._known, image_index)
        return self._projected[position.to(self._projected.device)]

    @torch.no_grad()
    def __call__(self, image_index: Tensor, classes: Tensor) -> Tensor:
        model = self.model
        model.eval()
        device = next(model.parameters()).device
        classes = classes.to(device)
        vectors = model.class_vectors(
            self.data.attributes.to(device)[classes], classes
        )
        per_class = model.head.lin_class(vectors)
        scores = [
            model.logits(
                model.head.pair_scores(per_class, self._project(index))
            ).cpu()
            for index in image_index.split(self.batch_size)
        ]
        if not scores:
            return torch.zeros(0, classes.numel())
        return torch.cat(scores)


@torch.no_grad()
def class_graph_edges(model: APNet, data: ZSLDataset) -> Optional[int]:
    r"""The number of directed edges of the model's class graph over all
    classes of :obj:`data` (as in GZSL; :obj:`None` without a graph): how
    much the propagation mixes classes."""
    if model.conv is None:
        return None
    model.eval()
    device = next(model.parameters()).device
    classes = torch.arange(data.num_classes, device=device)
    x0 = model.encoder(data.attributes.to(device))
    return int(model.class_graph(x0, classes)[0].size(1))


def apnet_score_fn(model: APNet, data: ZSLDataset) -> ScoreFn:
    r"""APNet as a :obj:`score_fn` of :obj:`data`, for the model's current
    weights (see :class:`APNetScores`)."""
    return APNetScores(model, data)


def _percent(prediction: Tensor, target: Tensor, classes: Tensor) -> float:
    return 100.0 * per_class_accuracy(prediction, target, classes)


def _zsl_predictions(
    score_fn: ScoreFn, image_index: Tensor, classes: Tensor
) -> Tensor:
    # The class of highest score among 'classes' of every image (an argmax
    # over no class is an IndexError).
    if classes.numel() == 0:
        raise ValueError(
            "'classes' is empty: pass the candidate classes to "
            'classify the images among (at least one)'
        )
    return classes[score_fn(image_index, classes).argmax(dim=1)]


def zsl_accuracy(
    score_fn: ScoreFn, labels: Tensor, image_index: Tensor, classes: Tensor
) -> float:
    r"""Per-class mean accuracy (%) of :obj:`image_index` classified among
    :obj:`classes`."""
    return _percent(
        _zsl_predictions(score_fn, image_index, classes),
        labels[image_index],
        classes,
    )


def zsl_per_class(
    score_fn: ScoreFn, labels: Tensor, image_index: Tensor, classes: Tensor
) -> List[Dict[str, Any]]:
    r"""The terms of :func:`zsl_accuracy`: for every class of
    :obj:`classes` with images in :obj:`image_index`, in the order of
    :obj:`classes`, its :obj:`'class'`, number of :obj:`'images'`, their
    :obj:`'accuracy'` (%) among :obj:`classes`, and :obj:`'taken_by'`, the
    class that takes most of its misclassified images (:obj:`None` when
    none is). Their mean accuracy is :func:`zsl_accuracy`."""
    prediction = _zsl_predictions(score_fn, image_index, classes)
    target = labels[image_index]
    rows = []
    for c in classes.tolist():
        predicted = prediction[target == c]
        if predicted.numel() == 0:
            continue
        wrong = predicted[predicted != c]
        rows.append(
            {
                'class': c,
                'images': predicted.numel(),
                'accuracy': 100.0 * float((predicted == c).double().mean()),
                'taken_by': int(torch.bincount(wrong).argmax())
                if wrong.numel()
                else None,
            }
        )
    return rows


class GZSLScores:
    r"""The scores of a GZSL task, computed once: images of seen and unseen
    classes against all candidate classes, from which :meth:`accuracies`
    and :func:`best_calibration` read :math:`S`, :math:`U`, :math:`H` for
    any calibration constant. Needs at least one seen and one unseen
    class."""

    def __init__(
        self,
        score_fn: ScoreFn,
        labels: Tensor,
        seen_images: Tensor,
        unseen_images: Tensor,
        seen_classes: Tensor,
        unseen_classes: Tensor,
    ):
        for name, classes in (
            ('seen_classes', seen_classes),
            ('unseen_classes', unseen_classes),
        ):
            if classes.numel() == 0:  # Else an IndexError below.
                raise ValueError(
                    f"'{name}' is empty: GZSL classifies "
                    f'images among the seen and the unseen '
                    f'classes; pass at least one of each'
                )
        self.classes = torch.cat([seen_classes, unseen_classes])
        self.seen_classes, self.unseen_classes = seen_classes, unseen_classes
        images = torch.cat([seen_images, unseen_images])
        self.target = labels[images]
        scores = score_fn(images, self.classes)
        num_seen = seen_classes.numel()
        # Best seen and best unseen candidate of every image: a constant
        # subtracted from the seen scores only decides between these two.
        best_seen, seen_arg = scores[:, :num_seen].max(dim=1)
        best_unseen, unseen_arg = scores[:, num_seen:].max(dim=1)
        self.margin = (best_seen - best_unseen).double()
        self.seen_prediction = seen_classes[seen_arg]
        self.unseen_prediction = unseen_classes[unseen_arg]

    def predictions(self, calibration: float = 0.0) -> Tensor:
        # '>=': a tie goes to the seen class, as an argmax over the seen
        # classes followed by the unseen ones would give it.
        return torch.where(
            self.margin >= calibration,
            self.seen_prediction,
            self.unseen_prediction,
        )

    def accuracies(self, calibration: float = 0.0) -> Dict[str, float]:
        r""":math:`S`, :math:`U` and :math:`H` (%) with :obj:`calibration`
        subtracted from the seen classes' scores."""
        prediction = self.predictions(calibration)
        seen = _percent(prediction, self.target, self.seen_classes)
        unseen = _percent(prediction, self.target, self.unseen_classes)
        return {
            'seen': seen,
            'unseen': unseen,
            'h': harmonic_mean(seen, unseen),
        }


def best_calibration(task: GZSLScores) -> float:
    r"""The calibration constant :math:`c` of highest :math:`H` on
    :obj:`task`, found exactly: an image is predicted seen iff its margin
    (best seen score minus best unseen score) is at least :math:`c`, so
    :math:`S(c)` and :math:`U(c)` are step functions of :math:`c` with steps
    at the margins, and every step is tried. Returns the middle of the best
    interval between two margins (the one nearest :math:`0` on ties; a
    point inside, away from the infinite end, for an interval that is
    unbounded because a margin is infinite)."""
    margin, target = task.margin, task.target
    if bool(torch.isnan(margin).any()):
        raise ValueError(
            'the scores give images a NaN margin (best seen '
            'minus best unseen score, e.g. -inf for every '
            'class): a calibration needs scores that rank '
            'the classes'
        )
    seen_label = torch.isin(target, task.seen_classes)
    seen_right = seen_label & (task.seen_prediction == target)
    unseen_right = ~seen_label & (task.unseen_prediction == target)
    # Each image counts 1 / (images of its class) / (classes present).
    per_class = torch.bincount(target)[target].double()
    present_seen = target[seen_label].unique().numel()
    present_unseen = target[~seen_label].unique().numel()
    if present_seen == 0 or present_unseen == 0:
        raise ValueError(
            "'task' needs images of seen and of unseen "
            'classes to choose a calibration'
        )
    seen_gain = seen_right.double() / per_class / present_seen
    unseen_gain = unseen_right.double() / per_class / present_unseen

    order = torch.argsort(margin)
    margin, seen_gain, unseen_gain = (
        margin[order],
        seen_gain[order],
        unseen_gain[order],
    )
    # With c in (margin[k-1], margin[k]]: images 0..k-1 are predicted
    # unseen, images k.. seen (k = 0..n).
    zero = margin.new_zeros(1)
    unseen_acc = torch.cat([zero, unseen_gain.cumsum(0)])
    seen_acc = torch.cat([seen_gain.flip(0).cumsum(0).flip(0), zero])
    h = 2 * seen_acc * unseen_acc / (seen_acc + unseen_acc).clamp_min(1e-300)
    low = torch.cat([margin[:1] - 1.0, margin])
    high = torch.cat([margin, margin[-1:] + 1.0])
    middle = (low + high) / 2
    # An infinite margin bounds its interval at infinity: step inside from
    # the finite end (by at least 1, which a huge end does not absorb).
    low_inf, high_inf = torch.isinf(low), torch.isinf(high)
    middle = torch.where(
        low_inf & ~high_inf, high - high.abs().clamp_min(1.0), middle
    )
    middle = torch.where(
        ~low_inf & high_inf, low + low.abs().clamp_min(1.0), middle
    )
    middle = torch.where(low_inf & high_inf, torch.zeros_like(middle), middle)
    h = h.masked_fill(low >= high, -1.0)  # Empty intervals (tied margins).
    candidates = torch.nonzero(h == h.max()).view(-1)
    choice = candidates[middle[candidates].abs().argmin()]
    return float(middle[choice])


def _protocol(
    score_fn: ScoreFn,
    labels: Tensor,
    seen_images: Tensor,
    unseen_images: Tensor,
    seen_classes: Tensor,
    unseen_classes: Tensor,
    calibration: Union[float, str, None],
    prefix: str,
) -> Dict[str, float]:
    metrics = {
        'zsl_acc': zsl_accuracy(
            score_fn, labels, unseen_images, unseen_classes
        )
    }
    task = GZSLScores(
        score_fn,
        labels,
        seen_images,
        unseen_images,
        seen_classes,
        unseen_classes,
    )
    raw = task.accuracies()
    metrics.update(
        gzsl_seen=raw['seen'], gzsl_unseen=raw['unseen'], gzsl_h=raw['h']
    )
    if calibration == 'best':
        calibration = best_calibration(task)
    if calibration is not None:
        calibrated = task.accuracies(calibration)
        metrics.update(
            calibration=calibration,
            gzsl_cal_seen=calibrated['seen'],
            gzsl_cal_unseen=calibrated['unseen'],
            gzsl_cal_h=calibrated['h'],
        )
    return {prefix + key: value for key, value in metrics.items()}


def _check_not_empty(
    name: str, owner: Any, fields: Sequence[str], fix: str
) -> None:
    # Sizes only (no pass over the data): an empty set of classes or images
    # would fail deep inside the protocol, as an IndexError or under the
    # name of another function's argument.
    for field in fields:
        if getattr(owner, field).numel() == 0:
            raise ValueError(f"'{name}.{field}' is empty: {fix}")


def evaluate_scores(
    data: ZSLDataset, score_fn: ScoreFn, calibration: Optional[float] = None
) -> Dict[str, float]:
    r"""The test protocol of the module docstring for :obj:`score_fn`:
    ZSL accuracy and GZSL :math:`S`, :math:`U`, :math:`H` (%), and with
    :obj:`calibration` (a constant chosen on validation data) the
    calibrated :math:`S`, :math:`U`, :math:`H` too."""
    if calibration is not None and (
        isinstance(calibration, bool)
        or not isinstance(calibration, numbers.Real)
        or not math.isfinite(calibration)
    ):
        # 'best' is validate()'s: chosen on the test set it would be a
        # test-selected, optimistic result.
        raise ValueError(
            f"'calibration' must be a finite number chosen on "
            f'validation data, or None (got {calibration!r})'
        )
    _check_not_empty(
        'data',
        data,
        ('unseen_classes', 'test_unseen_loc', 'seen_classes', 'test_seen_loc'),
        'the test protocol needs unseen and seen classes with '
        'test images of each; evaluate a dataset that has them',
    )
    return _protocol(
        score_fn,
        data.labels,
        data.test_seen_loc,
        data.test_unseen_loc,
        data.seen_classes,
        data.unseen_classes,
        calibration,
        prefix='',
    )


def validate(
    data: ZSLDataset, split: ValidationSplit, score_fn: ScoreFn
) -> Dict[str, float]:
    r"""The protocol on the validation task :obj:`split` (no test image
    involved), keys prefixed :obj:`val_`: ZSL accuracy of the unseen
    validation images among the validation classes; GZSL :math:`S`,
    :math:`U`, :math:`H` of the seen and unseen validation images among the
    training and validation classes; and the calibration constant of
    highest validation :math:`H` with its :math:`S`, :math:`U`,
    :math:`H`."""
    _check_not_empty(
        'split',
        split,
        (
            'val_classes',
            'unseen_val_images',
            'train_classes',
            'seen_val_images',
        ),
        'validation needs validation and training classes with '
        'images of each; build the split with '
        'seen_validation_split',
    )
    return _protocol(
        score_fn,
        data.labels,
        split.seen_val_images,
        split.unseen_val_images,
        split.train_classes,
        split.val_classes,
        'best',
        prefix='val_',
    )


def evaluate(
    model: APNet, data: ZSLDataset, calibration: Optional[float] = None
) -> Dict[str, float]:
    r"""ZSL accuracy and GZSL :math:`S`, :math:`U`, :math:`H` (%) of
    :obj:`model` on the test splits, calibrated with :obj:`calibration`
    if given; see the module docstring."""
    return evaluate_scores(data, apnet_score_fn(model, data), calibration)


def evaluate_predictions(
    data: ZSLDataset,
    predict_classes: Callable[[Tensor, Tensor], Tensor],
) -> Dict[str, float]:
    r"""The test protocol for a classifier that only predicts:
    :obj:`predict_classes(image_index, classes)` returns the predicted class
    (an entry of :obj:`classes`) of every image. Returns ZSL accuracy and
    GZSL :math:`S`, :math:`U`, :math:`H` (%), uncalibrated."""

    def one_hot_scores(image_index: Tensor, classes: Tensor) -> Tensor:
        predicted = predict_classes(image_index, classes)
        if (
            not isinstance(predicted, Tensor)
            or predicted.numel() != image_index.numel()
        ):
            got = (
                f'{predicted.numel()} predictions'
                if isinstance(predicted, Tensor)
                else type(predicted).__name__
            )
            raise ValueError(
                f"'predict_classes' must return one class per "
                f'image ({image_index.numel()}; got {got})'
            )
        position = predicted.view(-1, 1) == classes.view(1, -1)
        # A row of zeros would otherwise count as a vote for classes[0].
        outside = ~position.any(1)
        if bool(outside.any()):
            raise ValueError(
                f"'predict_classes' returned "
                f'{predicted.view(-1)[outside][0].item()}, not '
                f'one of the {classes.numel()} candidate '
                f'classes it was given'
            )
        return position.float()

    return evaluate_scores(data, one_hot_scores)
