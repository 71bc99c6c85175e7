r"""Evaluation of an APNet model on the benchmark's protocol (Xian et al.):

* ZSL: the test images of the unseen classes, classified among the unseen
  classes only, with the class graph built over the unseen classes;
  per-class mean accuracy.
* GZSL: the test images of the seen and of the unseen classes, classified
  among all classes, with the class graph built over all classes; seen
  accuracy :math:`S`, unseen accuracy :math:`U` (both per-class means) and
  :math:`H = 2SU / (S + U)`.

All accuracies are in percent.
"""
from typing import Callable, Dict, Optional

import torch
from torch import Tensor

from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.nn.models.apnet import APNet
from apnet_pyg.zsl.class_graph import ClassPrior
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy


@torch.no_grad()
def class_vectors(model: APNet, attributes: Tensor, classes: Tensor,
                  prior: Optional[ClassPrior] = None) -> Tensor:
    r"""Propagated class vectors of :obj:`classes`, with the class graph
    built over exactly these classes."""
    subgraph = prior.subgraph(classes) if prior is not None else None
    return model.class_vectors(attributes[classes], subgraph)


@torch.no_grad()
def predict(model: APNet, features: Tensor, image_index: Tensor,
            attributes: Tensor, classes: Tensor,
            prior: Optional[ClassPrior] = None,
            batch_size: int = 4096) -> Tensor:
    r"""Predicted class (an entry of :obj:`classes`) of every image in
    :obj:`image_index`."""
    device = attributes.device
    vectors = class_vectors(model, attributes, classes, prior)
    predictions = []
    for start in range(0, image_index.numel(), batch_size):
        index = image_index[start:start + batch_size]
        images = features[index.to(features.device)].to(device)
        predictions.append(model.head(vectors, images).argmax(dim=1))
    if not predictions:
        return classes.new_zeros(0)
    return classes[torch.cat(predictions)]


def zsl_accuracy(model: APNet, data: ZSLDataset, image_index: Tensor,
                 classes: Tensor, prior: Optional[ClassPrior] = None,
                 device: Optional[torch.device] = None) -> float:
    r"""Per-class mean accuracy (%) of :obj:`image_index` classified among
    :obj:`classes` (used for the unseen test classes and for the validation
    classes)."""
    device = device or next(model.parameters()).device
    attributes = data.attributes.to(device)
    classes = classes.to(device)
    prediction = predict(model, data.features, image_index, attributes,
                         classes, prior)
    return _accuracy(prediction, data.labels[image_index], classes)


def _accuracy(prediction: Tensor, target: Tensor, classes: Tensor) -> float:
    return 100.0 * per_class_accuracy(prediction.cpu(), target.cpu(),
                                      classes.cpu())


def evaluate_predictions(
        data: ZSLDataset,
        predict_classes: Callable[[Tensor, Tensor], Tensor],
) -> Dict[str, float]:
    r"""The protocol of the module docstring for any classifier:
    :obj:`predict_classes(image_index, classes)` returns the predicted class
    (an entry of :obj:`classes`) of every image in :obj:`image_index`.
    Returns ZSL accuracy and GZSL :math:`S`, :math:`U`, :math:`H` (%)."""
    seen, unseen = data.seen_classes, data.unseen_classes
    zsl = _accuracy(predict_classes(data.test_unseen_loc, unseen),
                    data.labels[data.test_unseen_loc], unseen)
    # Both GZSL splits in one call: the candidates (for APNet, the class
    # graph and vectors over all classes) are prepared once.
    num_seen = data.test_seen_loc.numel()
    prediction = predict_classes(
        torch.cat([data.test_seen_loc, data.test_unseen_loc]),
        torch.arange(data.num_classes))
    seen_acc = _accuracy(prediction[:num_seen],
                         data.labels[data.test_seen_loc], seen)
    unseen_acc = _accuracy(prediction[num_seen:],
                           data.labels[data.test_unseen_loc], unseen)
    return {
        'zsl_acc': zsl,
        'gzsl_seen': seen_acc,
        'gzsl_unseen': unseen_acc,
        'gzsl_h': float(harmonic_mean(seen_acc, unseen_acc)),
    }


def evaluate(model: APNet, data: ZSLDataset,
             prior: Optional[ClassPrior] = None,
             device: Optional[torch.device] = None) -> Dict[str, float]:
    r"""ZSL accuracy and GZSL :math:`S`, :math:`U`, :math:`H` (%) of
    :obj:`model` on the test splits; see the module docstring."""
    if data.features is None:
        raise ValueError("Evaluation needs image features: load the dataset "
                         "with load_features=True")
    device = device or next(model.parameters()).device
    model.eval()
    attributes = data.attributes.to(device)

    def predict_classes(image_index: Tensor, classes: Tensor) -> Tensor:
        return predict(model, data.features, image_index, attributes,
                       classes.to(device), prior)

    return evaluate_predictions(data, predict_classes)
