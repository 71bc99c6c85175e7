import pytest
import torch

from apnet_pyg.data import load_xlsa17
from apnet_pyg.nn import APNet
from apnet_pyg.zsl import evaluate, evaluate_predictions, zsl_accuracy
from apnet_pyg.zsl.evaluate import predict
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy


class Oracle(APNet):
    r"""Scores images by their true class (reads a label lookup), to check
    the protocol independently of any learning."""
    def __init__(self, labels_of, attribute_dim):
        super().__init__(attribute_dim, image_channels=2048,
                         class_channels=8, hidden_channels=8,
                         num_centroids=1, graph='none')
        self.labels_of = labels_of

    def class_vectors(self, attributes, prior=None):
        return attributes  # identifies the classes by their attributes

    @property
    def head(self):
        def score(class_vectors, images):
            truth = self.labels_of(images)
            return (class_vectors[None] == self.attributes_of(truth)[:, None]
                    ).all(-1).float()
        return score


def test_evaluate_protocol(tiny_root):
    data = load_xlsa17(tiny_root, 'TINY')
    lookup = {tuple(f.tolist()[:8]): int(y)
              for f, y in zip(data.features, data.labels)}
    model = Oracle(lambda images: torch.tensor(
        [lookup[tuple(f.tolist()[:8])] for f in images]), data.attribute_dim)
    model.attributes_of = lambda y: data.attributes[y]

    metrics = evaluate(model, data)
    assert metrics == {'zsl_acc': 100.0, 'gzsl_seen': 100.0,
                       'gzsl_unseen': 100.0, 'gzsl_h': 100.0}
    prediction = predict(model, data.features, data.test_unseen_loc,
                         data.attributes, data.unseen_classes, batch_size=7)
    assert torch.equal(prediction, data.labels[data.test_unseen_loc])


def test_zsl_accuracy_is_per_class_mean(tiny_root):
    data = load_xlsa17(tiny_root, 'TINY')
    # A model that always predicts the first candidate class:
    model = APNet(data.attribute_dim, class_channels=8, hidden_channels=8,
                  num_centroids=1, graph='none')
    with torch.no_grad():
        model.head.lin_out.weight.zero_()
    accuracy = zsl_accuracy(model, data, data.test_unseen_loc,
                            data.unseen_classes)
    # All-equal scores: argmax is the first class, so exactly one of the
    # four unseen classes is right: 25% per-class mean accuracy.
    assert accuracy == pytest.approx(25.0)
    labels = data.labels[data.test_unseen_loc]
    first = data.unseen_classes[0]
    assert per_class_accuracy(torch.full_like(labels, int(first)), labels,
                              data.unseen_classes) == pytest.approx(0.25)
    assert harmonic_mean(50.0, 25.0) == pytest.approx(100.0 / 3)


def test_evaluate_predictions_follows_the_protocol(tiny_root):
    data = load_xlsa17(tiny_root, 'TINY')
    calls = []

    def first_candidate(image_index, classes):
        calls.append((image_index.clone(), classes.clone()))
        return classes[:1].expand(image_index.numel())

    metrics = evaluate_predictions(data, first_candidate)
    # ZSL among the unseen classes; GZSL: both test splits among all.
    (zsl_index, zsl_classes), (gzsl_index, gzsl_classes) = calls
    assert torch.equal(zsl_index, data.test_unseen_loc)
    assert torch.equal(zsl_classes, data.unseen_classes)
    assert torch.equal(gzsl_index, torch.cat([data.test_seen_loc,
                                              data.test_unseen_loc]))
    assert torch.equal(gzsl_classes, torch.arange(data.num_classes))

    def accuracy(index, predicted, classes):
        labels = data.labels[index]
        return 100 * per_class_accuracy(torch.full_like(labels, predicted),
                                        labels, classes)

    seen = accuracy(data.test_seen_loc, 0, data.seen_classes)
    unseen = accuracy(data.test_unseen_loc, 0, data.unseen_classes)
    assert metrics == pytest.approx({
        'zsl_acc': accuracy(data.test_unseen_loc,
                            int(data.unseen_classes[0]),
                            data.unseen_classes),
        'gzsl_seen': seen,
        'gzsl_unseen': unseen,
        'gzsl_h': harmonic_mean(seen, unseen),
    })
    assert metrics['zsl_acc'] > 0


def test_evaluate_needs_features(tiny_root):
    data = load_xlsa17(tiny_root, 'TINY', load_features=False)
    model = APNet(data.attribute_dim, class_channels=8, hidden_channels=8,
                  num_centroids=1, graph='none')
    with pytest.raises(ValueError, match='needs image features'):
        evaluate(model, data)
