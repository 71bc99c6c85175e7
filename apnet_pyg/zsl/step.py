r"""The training step of APNet: an episode (or mini-batch), the loss, its
gradients and Adam, with no host synchronisation off the CPU, and its
compiled form (see ``docs/training.md``)."""

import warnings
from typing import Callable, Dict, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call, grad_and_value

from apnet_pyg.data.sampler import EpisodeDraws, EpisodeSampler
from apnet_pyg.nn.models.apnet import (
    DENSE_CLASS_GRAPH_MAX_CLASSES,
    APNet,
    use_dense_class_graph,
)

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
        negative_classes (torch.Tensor, optional): Classes, on the device,
            scored in every step after the task's own, as a wrong answer
            for every sample (their samples are never drawn): DGPN's
            training, which scores the seen nodes against every class's
            description. (default: none)
        sync_free (bool, optional): See above. (default: off the CPU or
            with :obj:`compile_step`)
        compile_step (bool, optional): See above. (default: :obj:`False`)
    """

    def __init__(
        self,
        model: APNet,
        sampler,
        optimizer: torch.optim.Optimizer,
        features: Tensor,
        attributes: Tensor,
        classes: Tensor,
        iterations: int,
        *,
        negative_classes: Optional[Tensor] = None,
        sync_free: Optional[bool] = None,
        compile_step: bool = False,
    ):
        device = features.device
        if sync_free is None:
            sync_free = compile_step or device.type != 'cpu'
        self.model, self.sampler, self.optimizer = model, sampler, optimizer
        self.features, self.attributes = features, attributes
        self.sync_free = sync_free
        self.episodic = isinstance(sampler, EpisodeSampler)
        # Appended to every task: a sample's target, its class's position
        # among the task's own classes, is unchanged.
        self.negative_classes = negative_classes
        # A mini-batch's task is every training class.
        self.task_classes = self._with_negatives(classes)
        self.task_attributes = attributes[self.task_classes]
        # The classes a step scores.
        own = sampler.n_way if self.episodic else classes.numel()
        self.task_size = own + (
            0 if negative_classes is None else negative_classes.numel()
        )
        self.dense = use_dense_class_graph(self.task_size, device, sync_free)
        self.iterations = iterations
        self.losses = torch.zeros(
            iterations, device=device, dtype=next(model.parameters()).dtype
        )
        self.correct = torch.zeros((), dtype=torch.long, device=device)
        self.seen = 0
        self.compiled = (
            compile_train_step(self.step_function, device)
            if compile_step
            else None
        )
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
                self.seen += min(
                    self.sampler.batch_size,
                    self.sampler.num_images - batch * self.sampler.batch_size,
                )
            if self.features.device.type == 'cuda':
                # Each call is one training step of the CUDA graph tree.
                torch.compiler.cudagraph_mark_step_begin()
            self.compiled()
            return
        # The order of operations of earlier versions: on the CPU, their
        # results bit for bit.
        batch = self.sampler.sample()
        if self.episodic:
            task = self._with_negatives(batch.episode_classes)
            task_attributes = self.attributes[task]
        else:
            task, task_attributes = self.task_classes, self.task_attributes
        logits = self.model(
            self.features[batch.image_index],
            task_attributes,
            task,
            dense=self.dense,
            check_values=False,
        )
        loss = F.cross_entropy(logits, batch.target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.losses[step] = loss.detach()
        self.correct += (logits.detach().argmax(dim=1) == batch.target).sum()
        self.seen += batch.target.numel()

    def _with_negatives(self, classes: Tensor) -> Tensor:
        if self.negative_classes is None:
            return classes
        return torch.cat([classes, self.negative_classes])

    # The compiled step ######################################################

    def _prepare_step_function(self) -> None:
        r"""The state of :meth:`step_function`, on the device, at fixed
        addresses: the step's position, the epoch's draws, the learning
        rate and the optimizer's state (made now if the optimizer has not
        stepped yet, as Adam would make it)."""
        group = self.optimizer.param_groups
        if (
            len(group) != 1
            or not isinstance(self.optimizer, torch.optim.Adam)
            or not group[0].get('fused')
            or group[0]['amsgrad']
            or group[0]['maximize']
            or group[0]['differentiable']
            or group[0].get('decoupled_weight_decay', False)
        ):
            raise ValueError(
                'compile_step needs the optimizer of '
                'make_optimizer: one group of fused Adam '
                '(fused=True), without amsgrad or maximize'
            )
        if not self.dense and self.model.conv is not None:
            raise ValueError(
                f'compile_step needs the dense class graph, '
                f'for tasks of at most '
                f'{DENSE_CLASS_GRAPH_MAX_CLASSES} classes (this '
                f'one has {self.task_size}): train without it'
            )
        device = self.features.device
        self.params = {
            name: parameter
            for name, parameter in self.model.named_parameters()
        }
        state = self.optimizer.state
        for parameter in self.params.values():
            if not state[parameter]:
                state[parameter].update(
                    step=torch.zeros(
                        (), dtype=torch.float32, device=parameter.device
                    ),
                    exp_avg=torch.zeros_like(
                        parameter, memory_format=torch.preserve_format
                    ),
                    exp_avg_sq=torch.zeros_like(
                        parameter, memory_format=torch.preserve_format
                    ),
                )
        self.adam_state = [
            [state[p][key] for p in self.params.values()]
            for key in ('exp_avg', 'exp_avg_sq', 'step')
        ]
        # Constants of the compiled graph (read here, not in it, where
        # reading the group would make its learning rate one too).
        self.adam_options = dict(
            beta1=group[0]['betas'][0],
            beta2=group[0]['betas'][1],
            weight_decay=group[0]['weight_decay'],
            eps=group[0]['eps'],
        )
        # A tensor, which start_epoch() sets: the scheduler changes it.
        self.lr = torch.zeros(
            (), device=device, dtype=next(iter(self.params.values())).dtype
        )
        self.index = torch.zeros((), dtype=torch.long, device=device)
        self.position = torch.zeros((), dtype=torch.long, device=device)
        self.draws: Optional[EpisodeDraws] = None
        if self.episodic:  # Filled by start_epoch().
            sampler = self.sampler
            shape = (self.iterations, sampler.n_way, sampler.k_shot)
            self.draws = EpisodeDraws(
                torch.empty(shape[:2], dtype=torch.long, device=device),
                torch.empty(shape, dtype=torch.float64, device=device),
            )
        if device.type == 'cuda':
            # A CUDA graph reads its inputs where they were when it was
            # captured: none of these is ever reallocated.
            static = [
                self.features,
                self.attributes,
                self.task_classes,
                self.negative_classes,
                self.task_attributes,
                self.losses,
                self.correct,
                self.lr,
                self.index,
                self.position,
                *self.model.parameters(),
                *self.model.buffers(),
                *[t for ts in self.adam_state for t in ts],
                *vars(self.sampler).values(),
            ]
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
            task = self._with_negatives(batch.episode_classes)
            task_attributes = self.attributes.index_select(0, task)
        else:
            batch = self.sampler.batch_at(self.position)
            task, task_attributes = self.task_classes, self.task_attributes
        images = self.features.index_select(0, batch.image_index)
        target = batch.target

        def loss_and_hits(params: Dict[str, Tensor]) -> Tuple[Tensor, Tensor]:
            logits = functional_call(
                self.model,
                params,
                (images, task_attributes, task),
                {'dense': self.dense, 'check_values': False},
            )
            loss = F.cross_entropy(logits, target)
            return loss, (logits.argmax(dim=1) == target).sum()

        with torch.no_grad():
            grads, (loss, hits) = grad_and_value(loss_and_hits, has_aux=True)(
                self.params
            )
            adam_update(
                list(self.params.values()),
                [grads[name] for name in self.params],
                *self.adam_state,
                lr=self.lr,
                **self.adam_options,
            )
            self.losses.index_copy_(0, self.index.reshape(1), loss.reshape(1))
            self.correct.add_(hits)
            self.index.add_(1)

    def epoch_correct(self) -> int:
        r"""The epoch's correct predictions (read on the host)."""
        return int(self.correct)


def adam_update(
    params: List[Tensor],
    grads: List[Tensor],
    exp_avgs: List[Tensor],
    exp_avg_sqs: List[Tensor],
    steps: List[Tensor],
    lr: Tensor,
    beta1: float,
    beta2: float,
    weight_decay: float,
    eps: float,
) -> None:
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
        params, grads, exp_avgs, exp_avg_sqs, steps
    ):
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


def compile_train_step(
    step: Callable[[], None], device: torch.device
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
    warnings.warn(
        f'compile_step on {device.type}: the step runs '
        f'uncompiled (torch.compile is used on CUDA only)',
        CompileStepWarning,
        stacklevel=4,
    )
    return None


def compiles_step(device: Union[str, torch.device]) -> bool:
    r"""Whether :obj:`compile_step` compiles the step on :obj:`device`
    (see :func:`compile_train_step`)."""
    return torch.device(device).type == 'cuda'


class CompileStepWarning(UserWarning):
    r"""Warned when :obj:`compile_step` runs the step uncompiled (off
    CUDA)."""
