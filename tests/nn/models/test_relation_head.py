import pytest
import torch

from apnet_pyg.nn import RelationHead


@pytest.mark.parametrize('score', ['sigmoid', 'linear'])
def test_relation_head(score):
    head = RelationHead(6, 5, hidden_channels=7, score=score).double()
    assert str(head) == f'RelationHead(6, 5, hidden=7, score={score})'
    classes = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    images = torch.randn(9, 5, dtype=torch.float64, requires_grad=True)
    scores = head(classes, images)
    assert scores.size() == (9, 4)

    # Reference: the formula pair by pair, sigma(w . ReLU(...) + b).
    sigma = torch.sigmoid if score == 'sigmoid' else (lambda t: t)
    w, b = head.lin_out.weight.view(-1), head.lin_out.bias
    expected = torch.stack([
        torch.stack([
            sigma(w @ torch.relu(head.lin_class.weight @ classes[y] +
                                 head.lin_image.weight @ images[i] +
                                 head.lin_image.bias) + b[0])
            for y in range(4)
        ]) for i in range(9)
    ])
    assert torch.allclose(scores, expected, atol=1e-12)

    grad_out = torch.randn_like(scores)
    inputs = [classes, images] + list(head.parameters())
    grads = torch.autograd.grad(scores, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-12)

    # Scoring in blocks of images changes nothing:
    assert torch.allclose(head(classes, images, block_size=2), scores,
                          atol=1e-12)
    assert head(classes, images[:0]).size() == (0, 4)


def test_sigmoid_score_is_bounded():
    # Large inputs drive the linear score far outside (0, 1); the paper's
    # sigmoid score stays inside, so the logits stay in (0, gamma_2).
    torch.manual_seed(0)
    classes, images = 50 * torch.randn(4, 6), 50 * torch.randn(30, 5)
    linear = RelationHead(6, 5, hidden_channels=16, score='linear')
    bounded = RelationHead(6, 5, hidden_channels=16, score='sigmoid')
    bounded.load_state_dict(linear.state_dict())
    raw = linear(classes, images)
    assert raw.abs().max() > 10
    scores = bounded(classes, images)
    assert bool(((scores >= 0) & (scores <= 1)).all())
    assert torch.allclose(scores, raw.sigmoid())


def test_relation_head_bad_input():
    head = RelationHead(6, 5, hidden_channels=7)
    with pytest.raises(ValueError, match="'images' must have 5 features"):
        head(torch.randn(4, 6), torch.randn(3, 6))
    with pytest.raises(ValueError, match="'class_vectors'"):
        head(torch.randn(4, 5), torch.randn(3, 5))
    with pytest.raises(ValueError, match="'score' must be one of"):
        RelationHead(6, 5, score='tanh')
