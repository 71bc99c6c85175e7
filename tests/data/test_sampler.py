import pytest
import torch

from apnet_pyg.data import Episode, EpisodeSampler, MinibatchSampler
from apnet_pyg.data.sampler import IGNORE_TARGET
from tests.helpers.host_sync import HostSync, no_host_sync

# 6 classes; class c has 2 + c images, interleaved; images 0..3 are outside
# the pool.
LABELS = torch.tensor([c for c in range(6) for _ in range(2 + c)])
LABELS = LABELS[
    torch.randperm(LABELS.numel(), generator=torch.Generator().manual_seed(0))
]
POOL = torch.arange(4, LABELS.numel())


def generator(seed=0):
    return torch.Generator().manual_seed(seed)


def check_episode(episode, n_way, k_shot, classes, pool=POOL):
    image_index, episode_classes, target = episode
    assert image_index.shape == (n_way * k_shot,)
    assert episode_classes.shape == (n_way,)
    assert target.shape == (n_way * k_shot,)
    assert episode_classes.unique().numel() == n_way
    assert torch.isin(episode_classes, classes).all()
    assert torch.isin(image_index, pool).all()
    assert torch.equal(LABELS[image_index], episode_classes[target])
    assert torch.equal(target, torch.arange(n_way).repeat_interleave(k_shot))


def test_episodes():
    classes = torch.tensor([1, 2, 3, 4, 5])
    sampler = EpisodeSampler(
        LABELS, classes, n_way=3, k_shot=2, generator=generator(), pool=POOL
    )
    for _ in range(50):
        episode = sampler.sample()
        assert isinstance(episode, Episode)
        check_episode(episode, 3, 2, classes)
        # Distinct images within a class.
        assert episode.image_index.unique().numel() == 6


def test_fewer_classes_than_n_way_uses_all():
    classes = torch.tensor([0, 3, 5])
    sampler = EpisodeSampler(LABELS, classes, n_way=30, generator=generator())
    episode = sampler.sample()
    check_episode(episode, 3, 1, classes, pool=torch.arange(LABELS.numel()))
    assert set(episode.episode_classes.tolist()) == {0, 3, 5}


def test_k_shot_one_is_uniform_over_images():
    sampler = EpisodeSampler(
        LABELS, torch.tensor([4, 5]), n_way=2, generator=generator()
    )
    counts = torch.zeros(LABELS.numel())
    for _ in range(2000):
        counts[sampler.sample().image_index] += 1
    counts = counts[LABELS == 5]  # 7 images, expected 2000 / 7 each
    assert counts.min() > 200 and counts.max() < 380


def test_deterministic_and_resumable():
    a = EpisodeSampler(
        LABELS,
        torch.arange(6),
        n_way=4,
        k_shot=2,
        generator=generator(1),
        num_episodes=5,
    )
    b = EpisodeSampler(
        LABELS,
        torch.arange(6),
        n_way=4,
        k_shot=2,
        generator=generator(1),
        num_episodes=5,
    )
    assert len(a) == 5
    for x, y in zip(a, b):
        assert all(torch.equal(u, v) for u, v in zip(x, y))
    state = a.state_dict()
    expected = [a.sample() for _ in range(3)]
    a.load_state_dict(state)
    for episode in expected:
        assert all(torch.equal(u, v) for u, v in zip(episode, a.sample()))


def test_global_seed_applies_without_generator():
    torch.manual_seed(3)
    x = EpisodeSampler(LABELS, torch.arange(6), n_way=3).sample()
    torch.manual_seed(3)
    y = EpisodeSampler(LABELS, torch.arange(6), n_way=3).sample()
    assert torch.equal(x.image_index, y.image_index)


def test_class_with_fewer_than_k_shot_images():
    # Class 0 has 2 images.
    with pytest.raises(ValueError, match='fewer than k_shot=3.*class 0'):
        EpisodeSampler(LABELS, torch.arange(6), n_way=6, k_shot=3)
    sampler = EpisodeSampler(
        LABELS,
        torch.arange(6),
        n_way=6,
        k_shot=3,
        allow_replacement=True,
        generator=generator(),
    )
    episode = sampler.sample()
    check_episode(
        episode, 6, 3, torch.arange(6), pool=torch.arange(LABELS.numel())
    )
    row = (episode.episode_classes == 0).nonzero().item()
    shots = episode.image_index[3 * row : 3 * row + 3]
    assert set(shots.tolist()) <= set(
        (LABELS == 0).nonzero().view(-1).tolist()
    )
    # Classes with enough images still get distinct images.
    row = (episode.episode_classes == 5).nonzero().item()
    assert episode.image_index[3 * row : 3 * row + 3].unique().numel() == 3


def test_bad_arguments():
    with pytest.raises(ValueError, match="'n_way' must be at least 2"):
        EpisodeSampler(LABELS, torch.arange(6), n_way=1)
    with pytest.raises(ValueError, match='at least 2 classes'):
        EpisodeSampler(LABELS, torch.tensor([1]), n_way=5)
    with pytest.raises(ValueError, match='unknown.*\\[9\\]'):
        EpisodeSampler(LABELS, torch.tensor([1, 9]))
    with pytest.raises(ValueError, match='duplicates'):
        EpisodeSampler(LABELS, torch.tensor([1, 1, 2]))
    with pytest.raises(ValueError, match="'pool'"):
        EpisodeSampler(LABELS, torch.tensor([1, 2]), pool=torch.tensor([99]))
    with pytest.raises(TypeError, match='endless'):
        len(EpisodeSampler(LABELS, torch.tensor([1, 2])))
    with pytest.raises(ValueError, match="'pool' contains duplicate"):
        EpisodeSampler(LABELS, torch.tensor([1, 2]), pool=POOL[[0, 0, 1]])
    with pytest.raises(ValueError, match="'pool' contains duplicate"):
        MinibatchSampler(LABELS, torch.tensor([1, 2]), 4, pool=POOL[[0, 0, 1]])


def test_minibatches_cover_each_image_once():
    classes = torch.tensor([5, 1, 2])
    sampler = MinibatchSampler(
        LABELS, classes, batch_size=4, generator=generator(), pool=POOL
    )
    expected = POOL[torch.isin(LABELS[POOL], classes)]
    batches = list(sampler)
    assert len(batches) == len(sampler) == -(-expected.numel() // 4)
    images = torch.cat([b.image_index for b in batches])
    assert torch.equal(images.sort()[0], expected.sort()[0])
    for image_index, target in batches:
        assert torch.equal(classes[target], LABELS[image_index])
    assert (
        len(MinibatchSampler(LABELS, classes, 4, pool=POOL, drop_last=True))
        == expected.numel() // 4
    )
    # Fewer images than one batch: no pass, so nothing to sample.
    too_few = MinibatchSampler(
        LABELS, classes, expected.numel() + 1, pool=POOL, drop_last=True
    )
    assert len(too_few) == 0 and list(too_few) == []
    with pytest.raises(ValueError, match='No complete batch to sample'):
        too_few.sample()


def test_minibatches_deterministic():
    def epoch(sampler):
        return torch.cat([b.image_index for b in sampler])

    a = MinibatchSampler(LABELS, torch.arange(6), 5, generator=generator(2))
    b = MinibatchSampler(LABELS, torch.arange(6), 5, generator=generator(2))
    assert torch.equal(epoch(a), epoch(b))
    state = a.state_dict()
    first = epoch(a)
    a.load_state_dict(state)
    assert torch.equal(epoch(a), first)
    assert not torch.equal(epoch(a), first)  # the next epoch differs
    unshuffled = MinibatchSampler(
        LABELS, torch.tensor([1, 2]), 5, shuffle=False, pool=POOL
    )
    assert torch.equal(
        epoch(unshuffled),
        POOL[LABELS[POOL] <= 2][LABELS[POOL][LABELS[POOL] <= 2] >= 1],
    )
    with pytest.raises(ValueError, match='unknown'):
        MinibatchSampler(LABELS, torch.tensor([0, 7]), 5)


def test_minibatch_sample_resumes_mid_pass():
    def draw(sampler, count):
        return [sampler.sample().image_index for _ in range(count)]

    classes = torch.arange(6)
    straight = MinibatchSampler(LABELS, classes, 4, generator=generator(3))
    expected = draw(straight, 11)  # more than one pass
    interrupted = MinibatchSampler(LABELS, classes, 4, generator=generator(3))
    first = draw(interrupted, 5)
    state = interrupted.state_dict()
    resumed = MinibatchSampler(LABELS, classes, 4, generator=generator(99))
    resumed.load_state_dict(state)
    rest = draw(resumed, 6)
    for a, b in zip(expected, first + rest):
        assert torch.equal(a, b)
    # A pass covers every image once:
    one_pass = torch.cat(expected[: len(straight)])
    assert one_pass.numel() == torch.unique(one_pass).numel()


@pytest.mark.parametrize(
    'change, message',
    [
        (
            dict(pass_order=torch.zeros(LABELS.numel(), dtype=torch.long)),
            'not a permutation',
        ),
        (dict(pass_order=torch.arange(3)), 'another number of images'),
        (dict(next_batch=-1), r'batch position outside 0\.\.'),
        (dict(next_batch=2.5), r'batch position outside 0\.\.'),
        (dict(next_batch=True), r'batch position outside 0\.\.'),
    ],
)
def test_minibatch_load_state_dict_refuses_and_keeps_its_state(
    change, message
):
    classes = torch.arange(6)
    sampler = MinibatchSampler(LABELS, classes, 4, generator=generator(3))
    sampler.sample()
    before = sampler.state_dict()
    other = MinibatchSampler(LABELS, classes, 4, generator=generator(7))
    other.sample()
    state = {**other.state_dict(), **change}
    with pytest.raises(ValueError, match=message):
        sampler.load_state_dict(state)
    after = sampler.state_dict()
    assert torch.equal(after['generator'], before['generator'])
    assert torch.equal(after['pass_order'], before['pass_order'])
    assert after['next_batch'] == before['next_batch']


# Distinct images, on a device, drawn ahead ################################
def test_k_shot_draws_each_ordered_sample_equally_often():
    # Class 5 has 7 images: 2 of them in order, 42 ordered pairs, none
    # repeated; each 4000 / 42 = 95 times on average.
    sampler = EpisodeSampler(
        LABELS, torch.tensor([4, 5]), n_way=2, k_shot=2, generator=generator()
    )
    counts = {}
    for _ in range(4000):
        episode = sampler.sample()
        row = int((episode.episode_classes == 5).nonzero())
        pair = tuple(episode.image_index[2 * row : 2 * row + 2].tolist())
        assert pair[0] != pair[1]
        counts[pair] = counts.get(pair, 0) + 1
    assert len(counts) == 42
    assert min(counts.values()) > 55 and max(counts.values()) < 140
    # k_shot = all of a class's images (class 0 has 2): a permutation.
    every = EpisodeSampler(
        LABELS, torch.tensor([0, 1]), n_way=2, k_shot=2, generator=generator()
    )
    orders = set()
    for _ in range(20):
        image_index, classes, _ = every.sample()
        row = int((classes == 0).nonzero())
        shots = image_index[2 * row : 2 * row + 2]
        assert torch.equal(
            shots.sort().values, (LABELS == 0).nonzero().view(-1)
        )
        orders.add(tuple(shots.tolist()))
    assert len(orders) == 2


@pytest.mark.parametrize('k_shot', [1, 3])
def test_draw_then_episode_is_sample(k_shot):
    classes = torch.arange(6)
    drawn = EpisodeSampler(
        LABELS,
        classes,
        n_way=4,
        k_shot=k_shot,
        generator=generator(5),
        allow_replacement=True,
    )
    sampled = EpisodeSampler(
        LABELS,
        classes,
        n_way=4,
        k_shot=k_shot,
        generator=generator(5),
        allow_replacement=True,
    )
    draws = drawn.draw(6)
    assert draws.classes.shape == (6, 4)
    assert draws.picks.shape == (6, 4, k_shot)
    for i in range(6):
        expected = sampled.sample()
        for index in (i, torch.tensor(i)):
            episode = drawn.episode(draws, index)
            assert all(torch.equal(u, v) for u, v in zip(episode, expected))
    # The generators are where they would be after six sample() calls:
    assert torch.equal(
        drawn.generator.get_state(), sampled.generator.get_state()
    )
    # Again, into the same tensors:
    again = drawn.draw(6, out=draws)
    assert again.classes is draws.classes
    assert all(
        torch.equal(u, v)
        for u, v in zip(drawn.episode(draws, 0), sampled.sample())
    )
    with pytest.raises(
        ValueError, match="'out' must be the EpisodeDraws of 5 episodes"
    ):
        drawn.draw(5, out=draws)


@pytest.mark.parametrize(
    'batch_size, drop_last', [(4, False), (5, True), (7, False)]
)
def test_advance_then_batch_at_is_sample(batch_size, drop_last):
    classes = torch.tensor([5, 1, 2, 4])
    stepped = MinibatchSampler(
        LABELS,
        classes,
        batch_size,
        generator=generator(4),
        pool=POOL,
        drop_last=drop_last,
    )
    sampled = MinibatchSampler(
        LABELS,
        classes,
        batch_size,
        generator=generator(4),
        pool=POOL,
        drop_last=drop_last,
    )
    with pytest.raises(ValueError, match='call advance'):
        stepped.batch_at(torch.tensor(0))
    for _ in range(3 * len(sampled)):  # three passes
        expected = sampled.sample()
        batch = stepped.batch_at(torch.tensor(stepped.advance()))
        assert batch.image_index.shape == (batch_size,)
        valid = batch.target != IGNORE_TARGET
        assert int(valid.sum()) == expected.target.numel()
        assert torch.equal(batch.image_index[valid], expected.image_index)
        assert torch.equal(batch.target[valid], expected.target)
    state, expected_state = stepped.state_dict(), sampled.state_dict()
    assert torch.equal(state['pass_order'], expected_state['pass_order'])
    assert state['next_batch'] == expected_state['next_batch']
    # The state is a copy: a later pass does not change it.
    order = state['pass_order'].clone()
    for _ in range(len(stepped)):
        stepped.advance()
    assert torch.equal(state['pass_order'], order)


def test_padded_positions_leave_the_loss_unchanged():
    sampler = MinibatchSampler(
        LABELS, torch.arange(6), 7, generator=generator(2)
    )
    for _ in range(3):
        sampler.advance()
    last = sampler.batch_at(torch.tensor(sampler.advance()))  # 27 = 3*7+6
    assert int((last.target == IGNORE_TARGET).sum()) == 1
    logits = torch.randn(7, 6, generator=generator(0))
    valid = last.target != IGNORE_TARGET
    torch.testing.assert_close(
        torch.nn.functional.cross_entropy(logits, last.target),
        torch.nn.functional.cross_entropy(logits[valid], last.target[valid]),
    )


def test_samplers_on_a_device():
    # The 'meta' device stands for a GPU here: no values, but every table
    # must be there. A generator elsewhere is refused.
    with pytest.raises(
        ValueError,
        match="'generator' is on cpu but "
        "'device' is meta: make the generator there",
    ):
        EpisodeSampler(
            LABELS, torch.arange(6), generator=generator(), device='meta'
        )
    with pytest.raises(
        ValueError, match="'generator' is on cpu but 'device' is meta"
    ):
        MinibatchSampler(
            LABELS, torch.arange(6), 4, generator=generator(), device='meta'
        )
    with pytest.raises(
        ValueError, match="'device' must be a torch.device or its name"
    ):
        EpisodeSampler(LABELS, torch.arange(6), device='no-such-device')
    sampler = EpisodeSampler(
        LABELS, torch.arange(6), n_way=3, generator=generator(), device='cpu'
    )
    assert sampler.device == torch.device('cpu')
    assert str(sampler) == (
        'EpisodeSampler(classes=6, images=27, n_way=3, k_shot=1)'
    )


def test_sampling_reads_nothing_on_the_host():
    episodes = EpisodeSampler(
        LABELS,
        torch.arange(6),
        n_way=4,
        k_shot=2,
        generator=generator(),
        allow_replacement=True,
    )
    batches = MinibatchSampler(
        LABELS, torch.arange(6), 5, generator=generator()
    )
    draws = episodes.draw(3)
    batches.advance()
    with no_host_sync():
        episodes.sample()
        episodes.episode(draws, torch.tensor(2))
        batches.sample()
        batches.batch_at(torch.tensor(1))
    with pytest.raises(HostSync):  # The check can fail.
        with no_host_sync():
            episodes.episode(draws, torch.tensor(2)).image_index.tolist()


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason='needs a CUDA device'
)
def test_samplers_on_cuda_do_not_synchronise():
    cuda = torch.Generator(device='cuda').manual_seed(0)
    episodes = EpisodeSampler(
        LABELS,
        torch.arange(6),
        n_way=4,
        k_shot=2,
        generator=cuda,
        allow_replacement=True,
    )
    assert episodes.device.type == 'cuda'
    batches = MinibatchSampler(LABELS, torch.arange(6), 5, device='cuda')
    draws = episodes.draw(3)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        episode = episodes.sample()
        episodes.episode(
            draws, torch.zeros((), dtype=torch.long, device='cuda')
        )
        batches.sample()
    finally:
        torch.cuda.set_sync_debug_mode('default')
    check_episode(
        tuple(t.cpu() for t in episode),
        4,
        2,
        torch.arange(6),
        pool=torch.arange(LABELS.numel()),
    )
    state = episodes.state_dict()
    expected = episodes.sample()
    episodes.load_state_dict({'generator': state['generator'].cuda()})
    assert all(torch.equal(u, v) for u, v in zip(expected, episodes.sample()))
