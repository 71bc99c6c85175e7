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
from typing import Dict, Optional

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


def evaluate(model: APNet, data: ZSLDataset,
             prior: Optional[ClassPrior] = None,
             device: Optional[torch.device] = None) -> Dict[str, float]:
    r"""ZSL accuracy and GZSL :math:`S`, :math:`U`, :math:`H` (%) on the
    test splits; see the module docstring."""
    if data.features is None:
        raise ValueError("Evaluation needs image features: load the dataset "
                         "with load_features=True")
    device = device or next(model.parameters()).device
    model.eval()
    seen = data.seen_classes.to(device)
    unseen = data.unseen_classes.to(device)
    all_classes = torch.arange(data.num_classes, device=device)
    attributes = data.attributes.to(device)

    zsl = zsl_accuracy(model, data, data.test_unseen_loc, unseen, prior,
                       device)

    def gzsl(image_index: Tensor, classes: Tensor) -> float:
        prediction = predict(model, data.features, image_index, attributes,
                             all_classes, prior)
        return _accuracy(prediction, data.labels[image_index], classes)

    seen_acc = gzsl(data.test_seen_loc, seen)
    unseen_acc = gzsl(data.test_unseen_loc, unseen)
    return {
        'zsl_acc': zsl,
        'gzsl_seen': seen_acc,
        'gzsl_unseen': unseen_acc,
        'gzsl_h': float(harmonic_mean(seen_acc, unseen_acc)),
    }
