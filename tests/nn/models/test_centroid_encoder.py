import pytest
import torch

from apnet_pyg.nn import CentroidEncoder, kmeans


def test_kmeans():
    generator = torch.Generator().manual_seed(0)
    centers = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = centers.repeat_interleave(20, dim=0) + 0.1 * torch.randn(
        60, 2, generator=generator
    )
    centroids = kmeans(points, 3, generator=generator)
    # Every true center has a centroid within the noise:
    distance = torch.cdist(centers, centroids).min(dim=1).values
    assert bool((distance < 0.1).all())
    # Deterministic for a seed:
    again = kmeans(points, 3, generator=torch.Generator().manual_seed(0))
    first = kmeans(points, 3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again, first)

    # Coinciding points do not break the seeding:
    assert kmeans(torch.ones(5, 2), 2).size() == (2, 2)
    with pytest.raises(ValueError, match="'k' must lie in"):
        kmeans(points, 61)
    with pytest.raises(
        ValueError, match="'num_init' must be a positive integer"
    ):
        kmeans(points, 3, num_init=0)


def inertia(points, centroids):
    return float(
        torch.cdist(points.double(), centroids.double())
        .min(dim=1)
        .values.square()
        .sum()
    )


def test_kmeans_keeps_the_best_of_several_seedings():
    # Four clusters, three of them close: a single k-means++ seeding can
    # split one and merge two; the best of ten seedings finds the clusters.
    generator = torch.Generator().manual_seed(3)
    points = torch.cat(
        [
            torch.randn(30, 5, generator=generator) + shift
            for shift in (0.0, 6.0, 12.0, 30.0)
        ]
    )
    clusters = inertia(
        points,
        torch.stack(
            [points[30 * i : 30 * (i + 1)].mean(dim=0) for i in range(4)]
        ),
    )
    single = [
        inertia(
            points,
            kmeans(
                points,
                4,
                num_init=1,
                generator=torch.Generator().manual_seed(seed),
            ),
        )
        for seed in range(10)
    ]
    # A generator whose first seeding goes wrong, so that keeping only
    # the first of ten would fail:
    bad = max(range(10), key=lambda seed: single[seed])
    assert single[bad] > 2 * clusters
    best = inertia(
        points,
        kmeans(
            points,
            4,
            num_init=10,
            generator=torch.Generator().manual_seed(bad),
        ),
    )
    assert best <= clusters + 1e-9
    # The input is left as it was (k = 1 seeds with a row of it):
    x = torch.rand(6, 3, dtype=torch.float64)
    copy = x.clone()
    kmeans(x, 1)
    assert torch.equal(x, copy)
    # The centroids come in the input's dtype, not rounded to float32:
    centroid = kmeans(x, 1)
    assert centroid.dtype == torch.float64
    torch.testing.assert_close(
        centroid, x.mean(dim=0, keepdim=True), rtol=0, atol=1e-15
    )


def test_centroid_encoder():
    encoder = CentroidEncoder(5, 8, num_centroids=3).double()
    assert str(encoder) == 'CentroidEncoder(5, 8, num_centroids=3)'
    seen = torch.rand(10, 5, dtype=torch.float64)
    centroids = encoder.fit_centroids(seen, torch.Generator().manual_seed(0))
    assert centroids.size() == (3, 5)
    # The buffer holds k-means of the seen attributes (a copy, since
    # fit_centroids returns the buffer itself):
    assert torch.equal(
        centroids.clone(),
        kmeans(seen, 3, generator=torch.Generator().manual_seed(0)),
    )

    attributes = torch.rand(4, 5, dtype=torch.float64, requires_grad=True)
    out = encoder(attributes)
    assert out.size() == (4, 8)

    # Reference: k separate experts, each on the attributes minus its
    # centroid (float64, forward and gradients).
    weight = encoder.weight.view(3, 8, 5)
    bias = encoder.bias.view(3, 8)
    expected = sum(
        torch.relu((attributes - centroids[i]) @ weight[i].t() + bias[i])
        for i in range(3)
    )
    assert torch.allclose(out, expected, atol=1e-12)
    grad_out = torch.randn_like(out)
    inputs = [attributes, encoder.weight, encoder.bias]
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-12)


def test_centroid_encoder_bad_input():
    encoder = CentroidEncoder(5, 8)
    with pytest.raises(ValueError, match='5 features'):
        encoder(torch.rand(4, 6))
    with pytest.raises(ValueError, match='NaN'):
        encoder(torch.full((4, 5), float('nan')))
    with pytest.raises(ValueError, match='5 features'):
        encoder.fit_centroids(torch.rand(10, 4))
    with pytest.raises(ValueError, match='positive'):
        CentroidEncoder(5, 8, num_centroids=0)
