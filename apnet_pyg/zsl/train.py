r"""Training of APNet on an xlsa17 dataset, and the whole protocol of a run.

:func:`train_model` runs one training phase (episodic or mini-batch), with a
checkpoint after every epoch from which :obj:`resume=True` continues
exactly. :func:`run` is the protocol:

1. **Selection** (:obj:`model_selection="validation"`;
   :func:`select_on_validation`) on a validation task
   built from the seen classes only (:func:`~apnet_pyg.data.splits.
   seen_validation_split`): train on :obj:`trainclasses1` minus a held-out
   share of its images; after every epoch, validate ZSL on
   :obj:`valclasses1` and GZSL on the held-out images and
   :obj:`valclasses1` among both class sets. The epoch of best validation
   ZSL accuracy is the ZSL row's, the epoch of best validation :math:`H`
   the GZSL row's, and the (epoch, calibration constant) of best calibrated
   validation :math:`H` the calibrated GZSL row's.
2. **Final training** on all seen classes for the largest of those epoch
   counts (all :obj:`config.epochs` with :obj:`report_test_selected`,
   which does not change the selected epochs' models); the model of each
   selected epoch is saved
   (:obj:`model-epoch<E>.pt`) and evaluated on the test splits. The test
   images are not looked at before the selection is over, and no choice
   depends on them.
3. With :obj:`report_test_selected=True`, additionally the authors'
   protocol: the test set evaluated after every final epoch and the epoch
   of best test :math:`H` reported, labelled "test-set selected
   (optimistic)".

Runs are deterministic for a seed on CPU: the model's initialisation, the
k-means seeding, the seen-validation split and the episode sampler each
draw from their own generator, and a checkpoint stores all their states.
Bit for bit only at one thread count on one processor model: the order of
floating-point reductions, and the kernels the math library picks for the
processor, change the last bits, and training amplifies them.

**Without the host.** On a GPU, a training step (:class:`TrainStep`) runs
without a host synchronisation: the sampler, its tables and its generator
live on the device, the class graph takes its dense form
(:func:`~apnet_pyg.nn.models.apnet.use_dense_class_graph`), and the loss
and accuracy of an epoch accumulate in device tensors, read every
:data:`FINITE_CHECK_STEPS` steps to check that the loss is finite. With
:obj:`compile_step=True` the whole step (episode, forward, backward, Adam)
is one :func:`torch.compile` graph, captured as a CUDA graph on a GPU
(:obj:`mode="reduce-overhead"`). A CUDA generator draws other episodes
than the CPU's, and a compiled step computes in another order than an
eager one: such runs are deterministic for a seed on their device and
mode, but differ from CPU runs. On the CPU, the eager step is the one of
earlier versions, with their results bit for bit.
"""
import json
import math
import resource
import time
import warnings
from pathlib import Path
from typing import (Any, Callable, Dict, List, Optional, Sequence, Tuple,
                    Union)

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call, grad_and_value
from tqdm.auto import tqdm

from apnet_pyg.data.sampler import (EpisodeDraws, EpisodeSampler,
                                    MinibatchSampler)
from apnet_pyg.data.splits import ValidationSplit, seen_validation_split
from apnet_pyg.data.xlsa17 import ZSLDataset, load_xlsa17
from apnet_pyg.nn.models.apnet import (DENSE_CLASS_GRAPH_MAX_CLASSES, APNet,
                                       use_dense_class_graph)
from apnet_pyg.utils import (atomic_write_text, check_finite,
                             is_real_number, make_output_folder,
                             replace_atomically)
from apnet_pyg.zsl.class_graph import wordnet_class_prior
from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.environment import describe_environment
from apnet_pyg.zsl.evaluate import (
    apnet_score_fn,
    class_graph_edges,
    evaluate_scores,
    validate,
)
from apnet_pyg.zsl.metrics import (CALIBRATED_METRICS, METRICS,
                                   first_best_index)

SIMULATED_LABEL = ('simulated features: not a reproduction of the paper, '
                   'only a check that the pipeline works')
TEST_SELECTED_LABEL = 'test-set selected (optimistic)'

#: The rows of a run's result table, in order, and the validation metric
#: that selects each row's epoch.
ROWS = {
    'zsl': 'val_zsl_acc',
    'gzsl': 'val_gzsl_h',
    'gzsl_calibrated': 'val_gzsl_cal_h',
}


def model_from_config(config: TrainConfig, attribute_dim: int,
                      image_channels: int,
                      class_prior: Optional[Tensor] = None) -> APNet:
    r"""An :class:`APNet` with the architecture of :obj:`config`."""
    return APNet(
        attribute_dim,
        image_channels=image_channels,
        class_channels=config.class_channels,
        hidden_channels=config.hidden_channels,
        num_centroids=config.num_centroids,
        graph=config.graph,
        proj_channels=config.proj_channels,
        threshold=config.threshold,
        propagation_temperature=config.propagation_temperature,
        num_steps=config.num_steps,
        score=config.score,
        logit_scale=config.logit_scale,
        class_prior=class_prior,
    )


def build_model(config: TrainConfig, data: ZSLDataset,
                train_classes: Tensor,
                image_channels: Optional[int] = None) -> APNet:
    r"""A freshly initialised :class:`APNet` for :obj:`data` (seeded by
    :obj:`config.seed`), with the WordNet prior over all of the dataset's
    classes if :obj:`config.graph="wordnet"`, its centroids fitted to the
    attributes of :obj:`train_classes` (and, with
    :obj:`initialization="standardized"`, its scales:
    :meth:`APNet.standardize_`). :obj:`image_channels` defaults to the
    size of :obj:`data`'s features (give it for a dataset loaded
    without them)."""
    prior = wordnet_class_prior(data.name, data.class_names) \
        if config.graph == 'wordnet' else None
    if image_channels is None:
        image_channels = data.features.size(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = model_from_config(config, data.attribute_dim,
                                  image_channels, prior)
    generator = torch.Generator().manual_seed(config.seed)
    seen_attributes = data.attributes[train_classes]
    model.encoder.fit_centroids(seen_attributes, generator)
    if config.initialization == 'standardized':
        model.standardize_(seen_attributes)
    return model


def make_optimizer(model: torch.nn.Module,
                   config: TrainConfig) -> torch.optim.Optimizer:
    try:  # The fused kernel is ~6x faster on CPU (one pass, no temporaries).
        return torch.optim.Adam(model.parameters(), lr=config.lr,
                                weight_decay=config.weight_decay, fused=True)
    except (RuntimeError, TypeError):  # pragma: no cover (older torch)
        return torch.optim.Adam(model.parameters(), lr=config.lr,
                                weight_decay=config.weight_decay)


def make_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig):
    milestones = [config.lr_decay_epoch] if config.lr_decay_epoch else []
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones,
                                                gamma=config.lr_decay)


def check_k_shot(data: ZSLDataset, images: Tensor, classes: Tensor,
                 config: TrainConfig, flag: str = '--k-shot') -> None:
    r"""Checks that every class of :obj:`classes` has
    :obj:`config.k_shot` images among :obj:`images`, as an episode draws
    them; otherwise a one-line :class:`ValueError` naming :obj:`k_shot`
    and :obj:`flag`, the way the user set it (:obj:`apnet-zsl`'s
    :obj:`--k-shot`; a script that reads it otherwise passes its own).
    (The sampler would advise its :obj:`allow_replacement`, which the
    pipeline does not offer.)"""
    counts = torch.bincount(data.labels[images],
                            minlength=data.num_classes)[classes]
    fewest = int(counts.argmin())
    if int(counts[fewest]) < config.k_shot:
        raise ValueError(
            f"k_shot={config.k_shot} ({flag}) exceeds the "
            f"{int(counts[fewest])} training images of class "
            f"'{data.class_names[int(classes[fewest])]}', the fewest "
            f"among the classes trained on: use k_shot <= "
            f"{int(counts[fewest])}")


def make_sampler(data: ZSLDataset, images: Tensor, classes: Tensor,
                 config: TrainConfig,
                 device: Union[str, torch.device] = 'cpu'):
    r"""The episode (or mini-batch) sampler of :func:`train_model` over
    :obj:`images` of :obj:`classes`, seeded by :obj:`config.seed`, with
    its tables and generator on :obj:`device`."""
    generator = torch.Generator(device=device).manual_seed(config.seed + 1)
    if config.training == 'episodic':
        check_k_shot(data, images, classes, config)
        return EpisodeSampler(data.labels, classes, config.n_way,
                              config.k_shot, generator, pool=images,
                              device=device)
    return MinibatchSampler(data.labels, classes,
                            config.n_way * config.k_shot, generator,
                            pool=images, device=device)


#: Steps between two reads of the training losses on the host by a step
#: that does not synchronise (:class:`TrainStep`), which check that they
#: are finite (and update the progress bar): one host synchronisation per
#: this many steps, and a diverged run stops within as many. Other steps
#: are checked every step, as before.
FINITE_CHECK_STEPS = 50


class TrainStep:
    r"""The training step of :func:`train_model`: draws an episode (or
    mini-batch), computes the logits, the cross-entropy loss and its
    gradients and takes a step of the fused Adam :obj:`optimizer`;
    :obj:`losses[i]` receives the loss of step :obj:`i` of the epoch and
    :obj:`correct` counts the correct predictions, both tensors on the
    model's device.

    With :obj:`sync_free` (the default off the CPU), nothing in a step
    reads a device tensor on the host: the sampler is on the device, the
    class graph in its dense form
    (:func:`~apnet_pyg.nn.models.apnet.use_dense_class_graph`, up to its
    size limit) and the value checks are left to :func:`train_model`,
    which checks the data once. Otherwise (the CPU's eager default) the
    step is that of earlier versions, with their results bit for bit.

    With :obj:`compile_step` on a GPU, the step is :meth:`step_function`,
    one function with no graph break, compiled by :obj:`torch.compile(...,
    fullgraph=True)` as CUDA graphs (:func:`compile_train_step`; elsewhere
    the eager step without the host runs, with a warning): the episode
    from the random numbers drawn at the start of the epoch
    (:meth:`EpisodeSampler.draw`: the same episodes as the eager step; a
    mini-batch's position is set from the host), the gradients by
    :func:`torch.func.grad_and_value` and Adam by :func:`adam_update` on
    the optimizer's own state, so that a checkpoint resumes in either
    mode (the optimizer's hooks do not run). It needs the dense class
    graph: tasks of at most
    :data:`~apnet_pyg.nn.models.apnet.DENSE_CLASS_GRAPH_MAX_CLASSES`
    classes.

    Args:
        model (APNet): The model, on its device.
        sampler (EpisodeSampler or MinibatchSampler): On the same device.
        optimizer (torch.optim.Adam): Of :func:`make_optimizer`.
        features (torch.Tensor): All image features, on the device.
        attributes (torch.Tensor): All class attributes, on the device.
        classes (torch.Tensor): The training classes, on the device (the
            task of a mini-batch).
        iterations (int): Steps per epoch.
        sync_free (bool, optional): See above. (default: off the CPU or
            with :obj:`compile_step`)
        compile_step (bool, optional): See above. (default: :obj:`False`)
    """
    def __init__(self, model: APNet, sampler, optimizer: torch.optim.Optimizer,
                 features: Tensor, attributes: Tensor, classes: Tensor,
                 iterations: int, *, sync_free: Optional[bool] = None,
                 compile_step: bool = False):
        device = features.device
        if sync_free is None:
            sync_free = compile_step or device.type != 'cpu'
        self.model, self.sampler, self.optimizer = model, sampler, optimizer
        self.features, self.attributes = features, attributes
        self.sync_free = sync_free
        self.episodic = isinstance(sampler, EpisodeSampler)
        # A mini-batch's task is every training class.
        self.task_classes = classes
        self.task_attributes = attributes[classes]
        self.task_size = sampler.n_way if self.episodic else \
            classes.numel()
        self.dense = use_dense_class_graph(self.task_size, device, sync_free)
        self.iterations = iterations
        self.losses = torch.zeros(iterations, device=device,
                                  dtype=next(model.parameters()).dtype)
        self.correct = torch.zeros((), dtype=torch.long, device=device)
        self.seen = 0
        self.compiled = compile_train_step(self.step_function, device) \
            if compile_step else None
        if self.compiled is not None:
            self._prepare_step_function()

    def start_epoch(self) -> None:
        r"""Resets the epoch's counts (and, for the compiled step, draws
        the epoch's episodes and reads the learning rate)."""
        self.correct.zero_()
        self.seen = 0
        if self.compiled is not None:
            self.index.zero_()
            self.lr.fill_(self.optimizer.param_groups[0]['lr'])
            # The learning-rate scheduler's sign that the optimizer stepped
            # (set by its wrapper of step(), which this step does not call).
            self.optimizer._opt_called = True
            if self.episodic:
                self.sampler.draw(self.iterations, out=self.draws)

    def __call__(self, step: int) -> None:
        r"""Runs step :obj:`step` (0-based) of the epoch."""
        if self.compiled is not None:
            if self.episodic:
                self.seen += self.sampler.n_way * self.sampler.k_shot
            else:
                batch = self.sampler.advance()
                self.position.fill_(batch)
                self.seen += min(self.sampler.batch_size,
                                 self.sampler.num_images -
                                 batch * self.sampler.batch_size)
            if self.features.device.type == 'cuda':
                # Each call is one training step of the CUDA graph tree.
                torch.compiler.cudagraph_mark_step_begin()
            self.compiled()
            return
        # The order of operations of earlier versions: on the CPU, their
        # results bit for bit.
        batch = self.sampler.sample()
        if self.episodic:
            task = batch.episode_classes
            task_attributes = self.attributes[task]
        else:
            task, task_attributes = self.task_classes, self.task_attributes
        logits = self.model(self.features[batch.image_index],
                            task_attributes, task, dense=self.dense,
                            check_values=False)
        loss = F.cross_entropy(logits, batch.target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.losses[step] = loss.detach()
        self.correct += (logits.detach().argmax(dim=1) ==
                         batch.target).sum()
        self.seen += batch.target.numel()

    # The compiled step ######################################################

    def _prepare_step_function(self) -> None:
        r"""The state of :meth:`step_function`, on the device, at fixed
        addresses: the step's position, the epoch's draws, the learning
        rate and the optimizer's state (made now if the optimizer has not
        stepped yet, as Adam would make it)."""
        group = self.optimizer.param_groups
        if len(group) != 1 or not isinstance(self.optimizer,
                                             torch.optim.Adam) or \
                not group[0].get('fused') or group[0]['amsgrad'] or \
                group[0]['maximize'] or group[0]['differentiable'] or \
                group[0].get('decoupled_weight_decay', False):
            raise ValueError("compile_step needs the optimizer of "
                             "make_optimizer: one group of fused Adam "
                             "(fused=True), without amsgrad or maximize")
        if not self.dense and self.model.conv is not None:
            raise ValueError(f"compile_step needs the dense class graph, "
                             f"for tasks of at most "
                             f"{DENSE_CLASS_GRAPH_MAX_CLASSES} classes (this "
                             f"one has {self.task_size}): train without it")
        device = self.features.device
        self.params = {name: parameter for name, parameter in
                       self.model.named_parameters()}
        state = self.optimizer.state
        for parameter in self.params.values():
            if not state[parameter]:
                state[parameter].update(
                    step=torch.zeros((), dtype=torch.float32,
                                     device=parameter.device),
                    exp_avg=torch.zeros_like(
                        parameter, memory_format=torch.preserve_format),
                    exp_avg_sq=torch.zeros_like(
                        parameter, memory_format=torch.preserve_format))
        self.adam_state = [[state[p][key] for p in self.params.values()]
                           for key in ('exp_avg', 'exp_avg_sq', 'step')]
        # Constants of the compiled graph (read here, not in it, where
        # reading the group would make its learning rate one too).
        self.adam_options = dict(beta1=group[0]['betas'][0],
                                 beta2=group[0]['betas'][1],
                                 weight_decay=group[0]['weight_decay'],
                                 eps=group[0]['eps'])
        # A tensor, which start_epoch() sets: the scheduler changes it.
        self.lr = torch.zeros((), device=device,
                              dtype=next(iter(self.params.values())).dtype)
        self.index = torch.zeros((), dtype=torch.long, device=device)
        self.position = torch.zeros((), dtype=torch.long, device=device)
        self.draws: Optional[EpisodeDraws] = None
        if self.episodic:  # Filled by start_epoch().
            sampler = self.sampler
            shape = (self.iterations, sampler.n_way, sampler.k_shot)
            self.draws = EpisodeDraws(
                torch.empty(shape[:2], dtype=torch.long, device=device),
                torch.empty(shape, dtype=torch.float64, device=device))
        if device.type == 'cuda':
            # A CUDA graph reads its inputs where they were when it was
            # captured: none of these is ever reallocated.
            static = [self.features, self.attributes, self.task_classes,
                      self.task_attributes, self.losses, self.correct,
                      self.lr, self.index, self.position,
                      *self.model.parameters(), *self.model.buffers(),
                      *[t for ts in self.adam_state for t in ts],
                      *vars(self.sampler).values()]
            if self.draws is not None:
                static += list(self.draws)
            for tensor in static:
                if isinstance(tensor, Tensor):
                    torch._dynamo.mark_static_address(tensor)

    def step_function(self) -> None:
        r"""One whole training step in tensor operations only, with no
        graph break and no host synchronisation: what
        :obj:`torch.compile(step_function, fullgraph=True)` compiles.
        Reads the step's position from :obj:`index` (episodic) or
        :obj:`position` (mini-batches), set by :meth:`__call__`."""
        if self.episodic:
            batch = self.sampler.episode(self.draws, self.index)
            task = batch.episode_classes
            task_attributes = self.attributes.index_select(0, task)
        else:
            batch = self.sampler.batch_at(self.position)
            task, task_attributes = self.task_classes, self.task_attributes
        images = self.features.index_select(0, batch.image_index)
        target = batch.target

        def loss_and_hits(params: Dict[str, Tensor]) -> Tuple[Tensor,
                                                               Tensor]:
            logits = functional_call(
                self.model, params, (images, task_attributes, task),
                {'dense': self.dense, 'check_values': False})
            loss = F.cross_entropy(logits, target)
            return loss, (logits.argmax(dim=1) == target).sum()

        with torch.no_grad():
            grads, (loss, hits) = grad_and_value(
                loss_and_hits, has_aux=True)(self.params)
            adam_update(list(self.params.values()),
                        [grads[name] for name in self.params],
                        *self.adam_state, lr=self.lr, **self.adam_options)
            self.losses.index_copy_(0, self.index.reshape(1),
                                    loss.reshape(1))
            self.correct.add_(hits)
            self.index.add_(1)

    def epoch_correct(self) -> int:
        r"""The epoch's correct predictions (read on the host)."""
        return int(self.correct)


def adam_update(params: List[Tensor], grads: List[Tensor],
                exp_avgs: List[Tensor], exp_avg_sqs: List[Tensor],
                steps: List[Tensor], lr: Tensor, beta1: float, beta2: float,
                weight_decay: float, eps: float) -> None:
    r"""One step of Adam (with L2 weight decay, as
    :class:`torch.optim.Adam`) in place on :obj:`params` and its state, in
    tensor operations that :func:`torch.compile` traces: the update of the
    optimizer's fused kernel, which it cannot trace here (its
    functionalization refuses gradients made by :mod:`torch.func`), equal
    to it up to rounding,

    .. math::
        g \leftarrow g + \lambda \theta, \quad
        m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
        v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
        \theta \leftarrow \theta - \frac{\eta}{1 - \beta_1^t}
        \frac{m}{\sqrt{v} / \sqrt{1 - \beta_2^t} + \epsilon}.

    :obj:`steps` (:math:`t`, float32 tensors) and :obj:`lr` (:math:`\eta`)
    are tensors, so that neither is a constant of a compiled graph; a 0-d
    one leaves the parameters' dtype as it is."""
    for param, grad, exp_avg, exp_avg_sq, step in zip(
            params, grads, exp_avgs, exp_avg_sqs, steps):
        step.add_(1)
        if weight_decay != 0:
            # Not grad.add(param, alpha=...), which Inductor (torch 2.13,
            # CPU) computed as grad + param in this step.
            grad = grad + weight_decay * param
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).add_((1 - beta2) * grad * grad)
        # The bias corrections in double, as the fused kernel's on the CPU
        # (1 - 0.999 in float32 is 1.3e-5 off).
        count = step.double()
        step_size = lr / (1 - beta1**count)
        denom = (exp_avg_sq.sqrt() / (1 - beta2**count).sqrt()).add_(eps)
        param.sub_(step_size * exp_avg / denom)


def compile_train_step(step: Callable[[], None], device: torch.device
                       ) -> Optional[Callable[[], None]]:
    r""":obj:`torch.compile(step, fullgraph=True,
    mode="reduce-overhead")` on a GPU: one CUDA graph per step. Elsewhere
    :obj:`None`, with a warning: :class:`TrainStep` then runs its eager
    step without host synchronisation. On the CPU (torch 2.13, 2 cores,
    AWA2's sizes), Inductor's vectorised code computed wrong gradients for
    this step (where the :func:`torch.func` gradient reads the class
    graph's mask mirrored), its scalar code (:obj:`cpp.simdlen=0`) right
    ones in 6 times the eager step's time, and :obj:`step` uncompiled
    (its Adam unfused) took 3.7 times as long."""
    if compiles_step(device):
        return torch.compile(step, fullgraph=True, mode='reduce-overhead')
    warnings.warn(f"compile_step on {device.type}: the step runs "
                  f"uncompiled (torch.compile is used on CUDA only)",
                  CompileStepWarning, stacklevel=4)
    return None


def compiles_step(device: Union[str, torch.device]) -> bool:
    r"""Whether :obj:`compile_step` compiles the step on :obj:`device`
    (see :func:`compile_train_step`)."""
    return torch.device(device).type == 'cuda'


class CompileStepWarning(UserWarning):
    r"""Warned when :obj:`compile_step` runs the step uncompiled (off
    CUDA)."""


def atomic_save(obj: Any, path: Path) -> None:
    r""":func:`torch.save` to a temporary file renamed over :obj:`path`: a
    run killed while writing never leaves a corrupt file."""
    replace_atomically(path, lambda tmp: torch.save(obj, tmp))


def train_model(
    model: APNet,
    data: ZSLDataset,
    images: Tensor,
    classes: Tensor,
    config: TrainConfig,
    *,
    epochs: Optional[int] = None,
    device: Union[str, torch.device] = 'cpu',
    checkpoint: Optional[Union[str, Path]] = None,
    resume: bool = False,
    on_epoch_end: Optional[Callable[[int, APNet], Dict[str, Any]]] = None,
    progress: bool = True,
    description: str = 'train',
    compile_step: bool = False,
) -> List[Dict[str, Any]]:
    r"""Trains :obj:`model` on the images :obj:`images` (all of
    :obj:`classes`) and returns the per-epoch history: loss, episodes per
    second and whatever :obj:`on_epoch_end(epoch, model)` returns.
    Off the CPU, or with :obj:`compile_step`, a step does not synchronise
    with the host (:class:`TrainStep`); the losses are read and checked
    every :data:`FINITE_CHECK_STEPS` steps, and a non-finite one raises
    :class:`TrainingDiverged` naming its epoch and step.

    Args:
        model (APNet): The model (moved to :obj:`device`).
        data (ZSLDataset): The dataset, with features.
        images (torch.Tensor): Indices of the training images.
        classes (torch.Tensor): The training classes.
        config (TrainConfig): The configuration.
        epochs (int, optional): Overrides :obj:`config.epochs`.
        device (str or torch.device, optional): :obj:`"cpu"` or
            :obj:`"cuda"`. (default: :obj:`"cpu"`)
        checkpoint (str or Path, optional): File written after every epoch.
        resume (bool, optional): Continue from :obj:`checkpoint` if it
            exists. (default: :obj:`False`)
        on_epoch_end (callable, optional): Called with the epoch (1-based)
            and the model after every epoch; its dictionary is added to the
            epoch's record (e.g. validation metrics).
        progress (bool, optional): Print one line per epoch, and a progress
            bar when standard error is a terminal. (default: :obj:`True`)
        description (str, optional): Label of the progress output.
        compile_step (bool, optional): Compile the whole step into CUDA
            graphs on a GPU (:class:`TrainStep`; elsewhere the step without
            the host runs uncompiled, with a warning).
            (default: :obj:`False`)
    """
    if data.features is None:
        raise ValueError("Training needs image features: load the dataset "
                         "with load_features=True")
    device = torch.device(device)
    epochs = config.epochs if epochs is None else epochs
    model.to(device)
    features = data.features.to(device)
    attributes = data.attributes.to(device)
    # Checked once here: the steps do not read them on the host.
    check_finite(features, 'data.features')
    check_finite(attributes, 'data.attributes')
    classes = classes.to(torch.long)

    sampler = make_sampler(data, images, classes, config, device)
    iterations = config.episodes_per_epoch(images.numel())
    # Loss and accuracy of a model that has learned nothing.
    candidates = min(config.n_way, classes.numel()) \
        if config.training == 'episodic' else classes.numel()
    chance_loss = math.log(candidates)

    optimizer = make_optimizer(model, config)
    scheduler = make_scheduler(optimizer, config)
    history: List[Dict[str, Any]] = []
    start_epoch = 0
    if resume:
        state = load_checkpoint(checkpoint, config, device)
        model.load_state_dict(state['model'])
        optimizer.load_state_dict(state['optimizer'])
        scheduler.load_state_dict(state['scheduler'])
        sampler.load_state_dict(state['sampler'])
        history = state['history']
        start_epoch = state['epoch']
        if start_epoch > epochs:
            raise ValueError(f"'{checkpoint}' was saved after epoch "
                             f"{start_epoch}, past the {epochs} epochs asked "
                             f"for: resume with epochs >= {start_epoch}, or "
                             f"start over without it")
        if progress:
            print(f'{description}: resuming from {checkpoint} after epoch '
                  f'{start_epoch}/{epochs}', flush=True)

    train_step = TrainStep(model, sampler, optimizer, features, attributes,
                           classes.to(device), iterations,
                           compile_step=compile_step)

    for epoch in range(start_epoch, epochs):
        model.train()
        start = time.perf_counter()
        train_step.start_epoch()
        total_loss, checked = 0.0, 0
        bar = tqdm(range(iterations), desc=f'{description} epoch '
                   f'{epoch + 1}/{epochs}', unit='episode',
                   disable=None if progress else True, leave=False)
        # A read costs nothing to a step that synchronises anyway; the next
        # step's sparse class graph would refuse NaN class vectors.
        check_every = FINITE_CHECK_STEPS if train_step.sync_free else 1
        for step in bar:
            train_step(step)
            if (step + 1) % check_every and step + 1 < iterations:
                continue
            # One read of the steps since the last check; summed in step
            # order, as when each loss was read in its step.
            for value in train_step.losses[checked:step + 1].tolist():
                checked += 1
                if not math.isfinite(value):
                    raise TrainingDiverged(
                        f"training diverged in epoch {epoch + 1}, step "
                        f"{checked}: the loss is {value}; lower the "
                        f"learning rate (lr={config.lr:g})")
                total_loss += value
            if not bar.disable:
                bar.set_postfix(loss=f'{total_loss / (step + 1):.4f}')
        correct, seen = train_step.epoch_correct(), train_step.seen
        seconds = time.perf_counter() - start
        scheduler.step()

        record = {
            'epoch': epoch + 1,
            'loss': total_loss / iterations,
            'train_acc': 100.0 * correct / max(seen, 1),
            'episodes_per_second': iterations / seconds,
            'ms_per_episode': 1000.0 * seconds / iterations,
        }
        if on_epoch_end is not None:
            record.update(on_epoch_end(epoch + 1, model))
        history.append(record)
        if progress:
            print(f'{description} epoch {epoch + 1}/{epochs}: ' +
                  ', '.join(f'{k}={v:.4g}' for k, v in record.items()
                            if isinstance(v, float)), flush=True)
        _warn_if_not_learning(history, chance_loss, candidates, iterations,
                              description)
        if checkpoint is not None:
            atomic_save(
                {
                    'epoch': epoch + 1,
                    'config': config.to_dict(),
                    'model': model.state_dict(),
                    'optimizer': optimizer.state_dict(),
                    'scheduler': scheduler.state_dict(),
                    'sampler': sampler.state_dict(),
                    'history': history,
                }, Path(checkpoint))
    return history


class TrainingDiverged(RuntimeError):
    r"""Raised when the training loss becomes NaN or infinite."""


def _warn_if_not_learning(history: List[Dict[str, Any]], chance_loss: float,
                          candidates: int, iterations: int,
                          description: str) -> None:
    # Two epochs in a row at chance, in loss and accuracy, over enough steps
    # to tell: a learning rate or logit scale the model cannot learn with.
    # (A tiny logit scale, as the authors' 0.01, keeps the loss near ln N
    # while the accuracy rises: that is learning.)
    recent = history[-2:]
    if len(recent) == 2 and 2 * iterations >= 50 and all(
            record['loss'] >= 0.98 * chance_loss and
            record['train_acc'] <= 150.0 / candidates for record in recent):
        warnings.warn(
            f"{description}: the model is not learning (epochs "
            f"{recent[0]['epoch']}-{recent[1]['epoch']}: loss "
            f"{recent[1]['loss']:.3f}, about ln {candidates} = "
            f"{chance_loss:.3f}, training accuracy "
            f"{recent[1]['train_acc']:.1f}%, chance "
            f"{100 / candidates:.1f}%); check lr and logit_scale",
            NotLearningWarning, stacklevel=3)


class NotLearningWarning(UserWarning):
    r"""Warned when the training loss and accuracy stay at chance."""


class ValidationEpisodeWarning(UserWarning):
    r"""Warned when the validation task has fewer training classes than
    :obj:`n_way`, so that its episodes have fewer classes."""


CHECKPOINT_KEYS = ('epoch', 'config', 'model', 'optimizer', 'scheduler',
                   'sampler', 'history')


def _load_quietly(path: Union[str, Path],
                  device: Union[str, torch.device]) -> Any:
    r""":func:`torch.load` with :obj:`weights_only=True`, without the
    warnings it gives on some corrupt files before it fails (a second,
    confusing line before the error that names the file)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return torch.load(path, map_location=device, weights_only=True)


def _load_saved(path: Union[str, Path], device: Union[str, torch.device],
                keys: Sequence[str], what: str, remedy: str) -> Dict[str, Any]:
    r"""A dictionary saved by this module (a checkpoint or a model) with
    at least :obj:`keys`; a one-line error naming :obj:`path`, the kind of
    file (:obj:`what`) and the :obj:`remedy` otherwise."""
    try:
        saved = _load_quietly(path, device)
    except Exception as error:  # unpickling raises many types
        raise ValueError(f"'{path}' is not a readable apnet-zsl {what} "
                         f"({type(error).__name__}); {remedy}") from None
    if not isinstance(saved, dict) or any(key not in saved for key in keys):
        raise ValueError(f"'{path}' is not an apnet-zsl {what} (it lacks "
                         f"{', '.join(keys)}); {remedy}")
    return saved


def load_checkpoint(path: Optional[Union[str, Path]], config: TrainConfig,
                    device: Union[str, torch.device] = 'cpu'
                    ) -> Dict[str, Any]:
    r"""The training state saved in :obj:`path` by :func:`train_model`,
    checked to be one, of :obj:`config`; a clear error otherwise."""
    if path is None or not Path(path).is_file():
        raise FileNotFoundError(
            f"no checkpoint to resume from at '{path}': start without "
            f"--resume")
    state = _load_saved(path, device, CHECKPOINT_KEYS, 'checkpoint',
                        'delete it to start over')
    check_same_config(state['config'], config, path)
    return state


def _read_json(path: Path) -> Any:
    r"""The content of a JSON file, or :obj:`None` where it does not
    parse (which the caller's check then refuses)."""
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def data_differences(saved: Any, fingerprint: Dict[str, Any]) -> List[str]:
    r"""The entries in which a dataset's :obj:`fingerprint`
    (:meth:`ZSLDataset.fingerprint`) differs from :obj:`saved`, a recorded
    one (empty when they agree)."""
    if not isinstance(saved, dict):
        return sorted(fingerprint)
    if isinstance(saved.get('splits'), str) and 'class_splits' not in saved:
        # Recorded before each list had its own checksum (2026-11-25):
        # those lists cannot be compared, the rest can.
        fingerprint = {key: value for key, value in fingerprint.items()
                       if key not in ('splits', 'class_splits')}
    return sorted(key for key, value in fingerprint.items()
                  if saved.get(key) != value)


def check_same_data(path: Path, fingerprint: Dict[str, Any], what: str,
                    remedy: str) -> None:
    r"""Raises unless the fingerprint recorded in the JSON file :obj:`path`
    is :obj:`fingerprint` (:meth:`ZSLDataset.fingerprint`): :obj:`what`
    (a run, a tuning's setting) was started on other data otherwise."""
    changed = data_differences(_read_json(path), fingerprint)
    if changed:
        raise ValueError(f"'{path}': {what} was started on other data "
                         f"(differs in: {', '.join(changed)}); {remedy}")


def check_same_config(saved: Any, config: TrainConfig,
                      path: Union[str, Path]) -> None:
    r"""Raises unless :obj:`saved` (a configuration's :meth:`to_dict`,
    read from :obj:`path`) is :obj:`config`."""
    if saved != config.to_dict():
        changed = sorted(key for key, value in config.to_dict().items()
                         if not isinstance(saved, dict) or
                         saved.get(key) != value)
        raise ValueError(f"'{path}' was written with another configuration "
                         f"(differs in: {', '.join(changed)}); run again with "
                         f"the options it was written with, or start over "
                         f"in another output folder")


#: A finished run's record: its rows, epochs, history and configuration.
METRICS_FILE = 'metrics.json'
#: The run's configuration, written when it starts.
CONFIG_FILE = 'config.json'
#: The fingerprint of the run's data (:meth:`ZSLDataset.fingerprint`),
#: written when it starts: a resumed run must read the same data.
DATA_FILE = 'data.json'
#: The selection phase's checkpoint (:func:`select_on_validation`).
SELECTION_CHECKPOINT = 'selection.pt'
#: The final phase's checkpoint (training on all seen classes).
FINAL_CHECKPOINT = 'checkpoint.pt'
RUN_FILES = (METRICS_FILE, SELECTION_CHECKPOINT, FINAL_CHECKPOINT)


def check_run_dir(out: Union[str, Path], resume: bool,
                  overwrite: bool) -> Path:
    r"""Checks, before any work, that :obj:`out` can hold this run: a
    directory or nothing; with :obj:`resume`, an interrupted run to
    continue; else no run at all unless :obj:`overwrite`."""
    if resume and overwrite:
        raise ValueError("--resume continues the run in --out and "
                         "--overwrite starts it over: pass one of them")
    if not str(out).strip():  # Path('') is the current folder.
        raise ValueError("the run directory (--out) is empty: name a "
                         "folder")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"the run directory '{out}' is a file: "
                                 f"choose another --out")
    present = [name for name in RUN_FILES if (out / name).exists()]
    if resume:
        if METRICS_FILE in present:
            raise FileExistsError(f"'{out}' holds a finished run "
                                  f"({METRICS_FILE}): nothing to resume")
        if not present:
            raise FileNotFoundError(
                f"nothing to resume in '{out}' (no {SELECTION_CHECKPOINT} "
                f"or {FINAL_CHECKPOINT}): start without --resume")
    elif present and not overwrite:
        what = 'a finished run' if METRICS_FILE in present else \
            'an interrupted run (continue it with --resume)'
        raise FileExistsError(f"'{out}' holds {what}: choose another --out, "
                              f"or pass --overwrite to start over")
    return out


def clear_run_dir(out: Path) -> None:
    r"""Removes an earlier run from :obj:`out` (:obj:`overwrite`): only once
    every check of the new run has passed, so that a refused run loses
    nothing."""
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)
    # The earlier run's models too: metrics.json no longer names them.
    for model in out.glob(model_file('*')):
        model.unlink()


def check_config_fits(config: TrainConfig, data: ZSLDataset) -> None:
    r"""Checks that :obj:`config` can run on :obj:`data` as it says, before
    any work: an episode cannot have more classes than the seen classes.
    (The validation task's episodes are capped at its training classes:
    AWA's 27 :obj:`trainclasses1` against the paper's :math:`N = 30`; see
    :func:`run`.)"""
    if data.features is None:
        raise ValueError("Training needs image features: load the dataset "
                         "with load_features=True")
    if config.model_selection == 'validation' and (
            data.train_classes is None or data.val_classes is None):
        raise ValueError(
            f"model_selection='validation' needs the benchmark's validation "
            f"classes (trainclasses1.txt, valclasses1.txt) next to "
            f"att_splits.mat for '{data.name}'; or use "
            f"model_selection='none'")
    seen = data.seen_classes.numel()
    if config.training == 'episodic' and config.n_way > seen:
        raise ValueError(f"n_way={config.n_way} exceeds the {seen} seen "
                         f"classes of {data.name}: use n_way <= {seen}")


def select_epochs(history: List[Dict[str, Any]]) -> Dict[str, Any]:
    r"""The validation-selected epoch of every row of :data:`ROWS` (the
    earliest on ties), with its validation metrics, from the history of a
    selection phase."""
    selection = {}
    for row, metric in ROWS.items():
        record = history[first_best_index([h[metric] for h in history])]
        selection[row] = {
            'epoch': record['epoch'],
            **{key: value for key, value in record.items()
               if key.startswith('val_')}
        }
    calibrated = selection['gzsl_calibrated']
    calibrated['calibration'] = calibrated['val_calibration']
    return selection


def validation_task(data: ZSLDataset,
                    config: TrainConfig) -> ValidationSplit:
    r"""The validation task a run with :obj:`config` selects on (its share
    of held-out seen images, drawn with its seed); the run's baselines
    choose their calibration on the same one."""
    return seen_validation_split(data, config.seen_val_fraction,
                                 config.seed)


def select_on_validation(
    data: ZSLDataset,
    config: TrainConfig,
    out: Union[str, Path],
    device: Union[str, torch.device] = 'cpu',
    resume: bool = False,
    progress: bool = True,
    compile_step: bool = False,
) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    r"""The selection phase of :func:`run` (step 1 of the module
    docstring): trains on the validation task built from the seen classes,
    validates after every epoch and returns the selection (each row's
    epoch and validation metrics, the calibration constant and the
    validation task's sizes) with the phase's history. Reads no test
    image. Its checkpoint is :obj:`out/selection.pt`, from which
    :obj:`resume` continues. :obj:`compile_step`: see
    :func:`train_model`."""
    out = Path(out)
    split = validation_task(data, config)
    validation_n_way = min(config.n_way, split.train_classes.numel())
    if config.training == 'episodic' and validation_n_way < config.n_way:
        warnings.warn(
            f"the validation task of {data.name} trains on "
            f"{validation_n_way} classes (trainclasses1): its episodes "
            f"are {validation_n_way}-way, the final training's "
            f"{config.n_way}-way", ValidationEpisodeWarning)
    model = build_model(config, data, split.train_classes)

    def validate_epoch(epoch: int, model: APNet) -> Dict[str, float]:
        return validate(data, split, apnet_score_fn(model, data))

    checkpoint = out / SELECTION_CHECKPOINT
    history = train_model(model, data, split.train_images,
                          split.train_classes, config, device=device,
                          checkpoint=checkpoint,
                          resume=resume and checkpoint.exists(),
                          on_epoch_end=validate_epoch, progress=progress,
                          description='selection',
                          compile_step=compile_step)
    selection = select_epochs(history)
    selection['validation_task'] = {
        'train_classes': 'trainclasses1',
        'val_classes': 'valclasses1',
        'n_way': validation_n_way,
        'seen_val_fraction': config.seen_val_fraction,
        'train_images': split.train_images.numel(),
        'seen_val_images': split.seen_val_images.numel(),
        'unseen_val_images': split.unseen_val_images.numel(),
    }
    return selection, history


def model_file(epoch: Union[int, str]) -> str:
    r"""The file name of the model saved at :obj:`epoch` (:obj:`'*'`: the
    glob pattern of them all)."""
    return f'model-epoch{epoch}.pt'


def run(
    data: ZSLDataset,
    config: TrainConfig,
    out: Union[str, Path],
    device: Union[str, torch.device] = 'cpu',
    resume: bool = False,
    progress: bool = True,
    data_root: Optional[str] = None,
    overwrite: bool = False,
    compile_step: bool = False,
) -> Dict[str, Any]:
    r"""The whole protocol (see the module docstring); writes
    :obj:`out/config.json`, :obj:`out/data.json` (the data's
    :meth:`~apnet_pyg.data.ZSLDataset.fingerprint`), the selected epochs'
    models :obj:`out/model-epoch<E>.pt` and :obj:`out/metrics.json` (which
    records :obj:`data_root`, the folder the dataset was read from, and the
    fingerprint) and returns the metrics. :obj:`resume` continues an
    interrupted run in :obj:`out`, on the same configuration and data;
    a run directory that holds a run is otherwise only written over with
    :obj:`overwrite`. Evaluating a finished run (:func:`run_dataset`) checks
    the fingerprint too. :obj:`compile_step`: see :func:`train_model`."""
    start = time.perf_counter()
    out = check_run_dir(out, resume, overwrite)
    check_config_fits(config, data)
    make_output_folder(out)
    if overwrite and not resume:
        clear_run_dir(out)
    # Both checked before they are rewritten: they describe the checkpoints.
    config_path = out / CONFIG_FILE
    if resume and config_path.is_file():
        check_same_config(_read_json(config_path), config, config_path)
    fingerprint = data.fingerprint()
    data_path = out / DATA_FILE
    if resume and data_path.is_file():
        check_same_data(data_path, fingerprint, 'the run',
                        'resume with the --root it was started with, or '
                        'start over in another output folder')
    atomic_write_text(json.dumps(config.to_dict(), indent=2), config_path)
    atomic_write_text(json.dumps(fingerprint, indent=2), data_path)

    selection = None
    if config.model_selection == 'validation':
        selection, _ = select_on_validation(data, config, out, device,
                                            resume, progress, compile_step)
        row_epochs = {row: selection[row]['epoch'] for row in ROWS}
        calibration = selection['gzsl_calibrated']['calibration']
    else:
        row_epochs = {'zsl': config.epochs, 'gzsl': config.epochs}
        calibration = None

    # Final training: test evaluation only at the selected epochs; for the
    # opt-in test-selected report, at every epoch of the whole schedule.
    epochs = config.epochs if config.report_test_selected else \
        max(row_epochs.values())
    evaluate_at = set(row_epochs.values())

    def evaluate_epoch(epoch: int, model: APNet) -> Dict[str, Any]:
        # The class graph's size every epoch (one encoder pass): whether
        # training keeps the propagation mixing classes.
        record = {'class_graph_edges': class_graph_edges(model, data)}
        if epoch not in evaluate_at and not config.report_test_selected:
            return record
        if epoch in evaluate_at:
            atomic_save(_model_state(config, data, model, epoch),
                        out / model_file(epoch))
        cal = calibration if row_epochs.get('gzsl_calibrated') == epoch \
            else None
        record['test'] = evaluate_scores(data, apnet_score_fn(model, data),
                                         cal)
        return record

    model = build_model(config, data, data.seen_classes)
    initial_edges = class_graph_edges(model, data)
    history = train_model(model, data, data.trainval_loc, data.seen_classes,
                          config, epochs=epochs, device=device,
                          checkpoint=out / FINAL_CHECKPOINT,
                          resume=resume and (out / FINAL_CHECKPOINT).exists(),
                          on_epoch_end=evaluate_epoch, progress=progress,
                          description='final', compile_step=compile_step)

    result = {
        'dataset': data.name,
        'data_root': data_root,
        'data': fingerprint,
        'simulated': data.simulated,
        'label': SIMULATED_LABEL if data.simulated else 'real features',
        'simulation': data.simulation,
        **result_rows(history, row_epochs, config.report_test_selected),
        'class_graph_edges_initial': initial_edges,
        'model_selection': selection or
        'none (trained for config.epochs, no calibration)',
        'models': {row: model_file(epoch)
                   for row, epoch in row_epochs.items()},
        'ms_per_episode': sum(r['ms_per_episode'] for r in history) /
        max(len(history), 1),
        'history': history,
        'config': config.to_dict(),
        'device': str(device),
        'compiled_step': compile_step and compiles_step(device),
        # Bit-for-bit repeatable only on the same processor and threads.
        'environment': describe_environment(device),
        # This process's: a resumed run's covers the part after the resume.
        'wall_seconds': time.perf_counter() - start,
        'resumed': resume,
        # The process's high-water mark (data loading included), Linux: KB.
        'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss /
        1024,
    }
    atomic_write_text(json.dumps(result, indent=2), out / METRICS_FILE)
    return result


def result_rows(history: List[Dict[str, Any]], row_epochs: Dict[str, int],
                report_test_selected: bool) -> Dict[str, Any]:
    r"""The result table of a run from the final phase's history: the
    test metrics of each row at its selected epoch (flat keys
    :obj:`zsl_acc`, :obj:`gzsl_seen`, ... for the validation-selected rows)
    and, if asked for, the test-selected rows."""
    test = {record['epoch']: record['test'] for record in history
            if 'test' in record}
    rows = {'zsl_acc': test[row_epochs['zsl']]['zsl_acc']}
    gzsl = test[row_epochs['gzsl']]
    rows.update(gzsl_seen=gzsl['gzsl_seen'], gzsl_unseen=gzsl['gzsl_unseen'],
                gzsl_h=gzsl['gzsl_h'])
    if 'gzsl_calibrated' in row_epochs:
        calibrated = test[row_epochs['gzsl_calibrated']]
        rows.update(calibration=calibrated['calibration'],
                    gzsl_cal_seen=calibrated['gzsl_cal_seen'],
                    gzsl_cal_unseen=calibrated['gzsl_cal_unseen'],
                    gzsl_cal_h=calibrated['gzsl_cal_h'])
    rows['epochs'] = dict(row_epochs)
    # Edges of the GZSL model's class graph over all classes.
    rows['class_graph_edges'] = next(
        (record.get('class_graph_edges') for record in history
         if record['epoch'] == row_epochs['gzsl']), None)
    rows['selection'] = 'validation' if 'gzsl_calibrated' in row_epochs \
        else 'none'
    if report_test_selected:
        best_h = max(test, key=lambda e: (test[e]['gzsl_h'], -e))
        best_zsl = max(test, key=lambda e: (test[e]['zsl_acc'], -e))
        rows['test_selected'] = {
            'label': TEST_SELECTED_LABEL,
            'zsl_acc': test[best_zsl]['zsl_acc'],
            'zsl_epoch': best_zsl,
            'gzsl_seen': test[best_h]['gzsl_seen'],
            'gzsl_unseen': test[best_h]['gzsl_unseen'],
            'gzsl_h': test[best_h]['gzsl_h'],
            'gzsl_epoch': best_h,
        }
    return rows


def _model_state(config: TrainConfig, data: ZSLDataset, model: APNet,
                 epoch: int) -> Dict[str, Any]:
    return {
        'config': config.to_dict(),
        'dataset': data.name,
        'epoch': epoch,
        'attribute_dim': data.attribute_dim,
        'image_channels': data.features.size(1),
        'num_classes': data.num_classes,
        'state_dict': {key: value.cpu() for key, value in
                       model.state_dict().items()},
    }


#: What a :obj:`model-epoch<E>.pt` holds (see :func:`_model_state`).
MODEL_KEYS = ('config', 'dataset', 'epoch', 'attribute_dim',
              'image_channels', 'num_classes', 'state_dict')

_TRAIN_AGAIN = "train the run again ('apnet-zsl train ... --overwrite')"


def load_model(run_dir: Union[str, Path], row: str = 'gzsl',
               device: Union[str, torch.device] = 'cpu') -> APNet:
    r"""The trained model of a run directory for the result row
    :obj:`row` (:obj:`"zsl"`, :obj:`"gzsl"` or :obj:`"gzsl_calibrated"`),
    read from the :obj:`model-epoch<E>.pt` that :obj:`metrics.json` names
    for it; a clear error, naming the file, for a missing, corrupt or
    foreign one."""
    run_dir = Path(run_dir)
    metrics_path, metrics = _read_metrics(run_dir)
    try:
        models = metrics['models']
        if not isinstance(models, dict) or \
                not all(isinstance(name, str) for name in models.values()):
            raise TypeError("'models' is not a dictionary of file names")
    except (KeyError, TypeError) as error:
        raise _not_a_run(metrics_path, error) from None
    if row not in models:
        raise ValueError(f"Run '{run_dir}' has no model for row '{row}' "
                         f"(it has: {', '.join(models)})")
    path = run_dir / models[row]
    if not path.is_file():
        raise FileNotFoundError(f"No trained model at '{path}': "
                                f"{_TRAIN_AGAIN}")
    saved = _load_saved(path, 'cpu', MODEL_KEYS, 'model', _TRAIN_AGAIN)
    try:
        config = TrainConfig.from_dict(saved['config'])
        prior = torch.zeros(saved['num_classes'], saved['num_classes']) \
            if config.graph == 'wordnet' else None
        model = model_from_config(config, saved['attribute_dim'],
                                  saved['image_channels'], prior)
        model.load_state_dict(saved['state_dict'])
    except (ValueError, TypeError, RuntimeError) as error:
        raise ValueError(f"'{path}' holds no model of its configuration "
                         f"({type(error).__name__}: {_one_line(error)}); "
                         f"{_TRAIN_AGAIN}") from None
    return model.to(device)


def load_dataset(root: Union[str, Path], dataset: str,
                 config: TrainConfig) -> ZSLDataset:
    r"""The dataset of a run, with the attributes its model reads."""
    return load_xlsa17(root, dataset, attributes=config.attributes)


def read_run_metrics(run_dir: Union[str, Path]) -> Dict[str, Any]:
    r"""A finished run's :obj:`metrics.json`, checked to hold what the
    readers of a run use (its configuration, dataset, selected epochs and
    test figures); a clear error, naming the file, when it does not."""
    metrics_path, saved = _read_metrics(run_dir)
    try:
        TrainConfig.from_dict(saved['config'])
        if not isinstance(saved['dataset'], str):
            raise TypeError("'dataset' is not a name")
        epochs = saved['epochs']  # what evaluate reads
        if not isinstance(epochs, dict):
            raise TypeError("'epochs' is not a dictionary")
        calibrated = 'gzsl_calibrated' in epochs
        for row in ('zsl', 'gzsl') + ('gzsl_calibrated', ) * calibrated:
            epoch = epochs.get(row)
            if not (is_real_number(epoch) and isinstance(epoch, int) and
                    epoch >= 1):
                raise TypeError(f"'epochs' has no epoch for the {row} row")
        numbers = METRICS + (CALIBRATED_METRICS if calibrated else ())
        for key in numbers:
            if not is_real_number(saved[key]):
                raise TypeError(f"'{key}' is not a number")
        for name, figures in (saved.get('baselines') or {}).items():
            # Runs recorded before the baselines were calibrated have only
            # the raw figures.
            keys = METRICS + (CALIBRATED_METRICS if isinstance(figures, dict)
                              and any(key in figures for key in
                                      CALIBRATED_METRICS) else ())
            if not isinstance(figures, dict) or not all(
                    is_real_number(figures.get(key)) for key in keys):
                raise TypeError(f"baseline {name!r} lacks a figure")
    except (ValueError, KeyError, TypeError) as error:
        raise _not_a_run(metrics_path, error) from None
    return saved


def load_run(run_dir: Union[str, Path],
             root: Optional[Union[str, Path]] = None,
             ) -> Tuple[Dict[str, Any], ZSLDataset]:
    r"""A finished run's :obj:`metrics.json` (:func:`read_run_metrics`) and
    its dataset (:func:`run_dataset`)."""
    saved = read_run_metrics(run_dir)
    return saved, run_dataset(run_dir, saved, root)


def run_dataset(run_dir: Union[str, Path], saved: Dict[str, Any],
                root: Optional[Union[str, Path]] = None,
                config: Optional[TrainConfig] = None) -> ZSLDataset:
    r"""The dataset of the run in :obj:`run_dir`, whose :obj:`metrics.json`
    reads :obj:`saved`, with the attributes its model reads (or those
    :obj:`config` reads, for a variant of the run): from :obj:`root`, or
    else from the folder the run was trained on; a clear error, naming the
    file, when neither is known."""
    root = root or saved.get('data_root')
    if root is None:
        raise ValueError(f"'{Path(run_dir) / METRICS_FILE}' does not say "
                         f"where the data was read from: pass its folder as "
                         f"root (--root)")
    own = config is None
    if own:
        config = TrainConfig.from_dict(saved['config'])
    data = load_dataset(root, saved['dataset'], config)
    # The run's own attributes: the whole fingerprint must agree (runs
    # from before it was recorded have none).
    if own and 'data' in saved:
        changed = data_differences(saved['data'], data.fingerprint())
        if changed:
            raise ValueError(f"the data in '{root}' is not the data the run "
                             f"in '{run_dir}' was trained on (differs in: "
                             f"{', '.join(changed)}): pass the folder it was "
                             f"trained on as root (--root)")
    return data


def _read_metrics(run_dir: Union[str, Path]) -> Tuple[Path, Any]:
    r"""The path and parsed content of a run's :obj:`metrics.json` (its
    fields unchecked); a clear error when it is missing or not JSON."""
    metrics_path = Path(run_dir) / METRICS_FILE
    if not metrics_path.is_file():
        checkpoints = [name for name in (FINAL_CHECKPOINT,
                                         SELECTION_CHECKPOINT)
                       if (Path(run_dir) / name).is_file()]
        if checkpoints:
            raise FileNotFoundError(
                f"'{run_dir}' holds an unfinished run (last checkpoint "
                f"{checkpoints[0]}, no {METRICS_FILE}): finish it with "
                f"'apnet-zsl train ... --out {run_dir} --resume' and the "
                f"options it was started with")
        raise FileNotFoundError(f"No {METRICS_FILE} in '{run_dir}': is it a "
                                f"finished 'apnet-zsl train' run?")
    try:
        return metrics_path, json.loads(metrics_path.read_text())
    except ValueError as error:  # JSON, Unicode too
        raise _not_a_run(metrics_path, error) from None


def _not_a_run(metrics_path: Path, error: BaseException) -> ValueError:
    return ValueError(f"'{metrics_path}' is not the {METRICS_FILE} of an "
                      f"apnet-zsl run ({type(error).__name__}: "
                      f"{_one_line(error)}); {_TRAIN_AGAIN}")


def _one_line(error: BaseException, limit: int = 160) -> str:
    text = ' '.join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'
