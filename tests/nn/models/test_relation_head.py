import pytest
import torch

from apnet_pyg.nn import RelationHead


@pytest.mark.parametrize('interaction', ['additive', 'multiplicative'])
@pytest.mark.parametrize('score', ['sigmoid', 'linear'])
def test_relation_head(score, interaction):
    head = RelationHead(
        6, 5, hidden_channels=7, score=score, interaction=interaction
    ).double()
    assert str(head) == (
        f'RelationHead(6, 5, hidden=7, score={score}, '
        f'interaction={interaction})'
    )
    classes = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    images = torch.randn(9, 5, dtype=torch.float64, requires_grad=True)
    scores = head(classes, images)
    assert scores.size() == (9, 4)

    # Reference: the formula pair by pair, sigma(w . ReLU(W1 x + W2 v + b1)
    # + b), or sigma(w . (W1 x * ReLU(W2 v + b1)) + b).
    sigma = torch.sigmoid if score == 'sigmoid' else (lambda t: t)
    w, b = head.lin_out.weight.view(-1), head.lin_out.bias

    def pair(x, v):
        class_term = head.lin_class.weight @ x
        image_term = head.lin_image.weight @ v + head.lin_image.bias
        if interaction == 'additive':
            return sigma(w @ torch.relu(class_term + image_term) + b[0])
        return sigma(w @ (class_term * torch.relu(image_term)) + b[0])

    expected = torch.stack(
        [
            torch.stack([pair(classes[y], images[i]) for y in range(4)])
            for i in range(9)
        ]
    )
    assert torch.allclose(scores, expected, atol=1e-12)

    grad_out = torch.randn_like(scores)
    inputs = [classes, images] + list(head.parameters())
    grads = torch.autograd.grad(scores, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-12)

    # Scoring in blocks of images changes nothing:
    assert torch.allclose(
        head(classes, images, block_size=2), scores, atol=1e-12
    )
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
    with pytest.raises(
        ValueError,
        match="'interaction' must be one of "
        "additive, multiplicative \\(got 'concat'\\)",
    ):
        RelationHead(6, 5, interaction='concat')


def test_multiplicative_head_has_no_class_offset():
    # With b1 = 0 and a zero image, every class scores the bias alone: no
    # class is preferred before an image is seen (the additive head's
    # w . ReLU(W1 x_y) is such an offset).
    torch.manual_seed(0)
    classes = torch.randn(4, 6)
    for interaction, constant in (
        ('multiplicative', True),
        ('additive', False),
    ):
        head = RelationHead(
            6, 5, hidden_channels=16, score='linear', interaction=interaction
        )
        torch.nn.init.zeros_(head.lin_image.bias)
        scores = head(classes, torch.zeros(1, 5))
        assert bool((scores == head.lin_out.bias).all()) == constant
