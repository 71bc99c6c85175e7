"""Per-episode trace of a run's final training phase: loss, accuracy, edges
of the episode's class graph, gradient norm and the size of the optimiser's
step, to diagnose what drives a spike of the training loss.

    python experiments/trace_training.py --run runs/cub60-2 --episodes 4200 \\
        --out trace.csv
    python experiments/trace_training.py --run runs/cub60-2 --episodes 4200 \\
        --set weight_decay=0 --out trace-wd0.csv
    python experiments/trace_training.py --run runs/cub60-2 --episodes 4200 \\
        --adam-eps 1e-5 --out trace-eps.csv

It replays the final phase of the run's `apnet-zsl train` (the model, its
initialisation, the episode sampler and the optimiser of the run's
configuration and seed, on all seen classes' trainval images), so that with
no --set the per-epoch mean losses are the run's own (`metrics.json`'s
history). --set KEY=VALUE overrides a field of the configuration (values
are read with the field's type, as `apnet-zsl train` reads its flags:
1e-3, 0, text, or none for an optional integer). Writes one CSV row per
episode and prints one line per epoch. Accuracies on simulated features are
SIMULATED; the trace's are training-episode accuracies, no test result.
"""

import argparse
import csv
import dataclasses
import math
import statistics
import sys

import torch
import torch.nn.functional as F

from apnet_pyg.files import check_output_file, replace_atomically
from apnet_pyg.scripting import run_script
from apnet_pyg.zsl import TrainConfig, build_model
from apnet_pyg.zsl.cli import add_run_arguments
from apnet_pyg.zsl.config import parse_option_value
from apnet_pyg.zsl.factory import (
    check_k_shot,
    make_optimizer,
    make_sampler,
    make_scheduler,
)
from apnet_pyg.zsl.reporting.tables import SIMULATED_LABEL
from apnet_pyg.zsl.rundir import read_run_metrics, run_dataset
from apnet_pyg.zsl.train import check_config_fits

COLUMNS = (
    'episode',
    'epoch',
    'loss',
    'accuracy',
    'episode_graph_edges',
    'grad_norm',
    'step_norm',
)


def episode_graph_edges(model, data, classes, config):
    """Directed edges of the class graph over an episode's classes, as the
    next forward pass would build it."""
    if config.graph == 'none':
        return 0
    with torch.no_grad():
        vectors = model.encoder(data.attributes[classes])
        return int(model.class_graph(vectors, classes)[0].size(1))


def trace(data, config, episodes, adam_eps=None):
    """The final phase of :func:`apnet_pyg.zsl.train.run` for
    :obj:`episodes` episodes (episodic training), one record per episode."""
    if config.training != 'episodic':
        raise ValueError(
            "the trace follows episodic training (the run's "
            f"'training' is '{config.training}')"
        )
    model = build_model(config, data, data.seen_classes)
    optimizer = make_optimizer(model, config)
    if adam_eps is not None:  # A probe only: not an option of training.
        for group in optimizer.param_groups:
            group['eps'] = adam_eps
    scheduler = make_scheduler(optimizer, config)
    sampler = make_sampler(data, data.trainval_loc, data.seen_classes, config)
    per_epoch = config.episodes_per_epoch(data.trainval_loc.numel())
    parameters = list(model.parameters())
    records = []
    model.train()
    for episode in range(1, episodes + 1):
        sample = sampler.sample()
        classes = sample.episode_classes
        logits = model(
            data.features[sample.image_index],
            data.attributes[classes],
            classes,
        )
        loss = F.cross_entropy(logits, sample.target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = math.sqrt(
            sum(
                float(p.grad.pow(2).sum())
                for p in parameters
                if p.grad is not None
            )
        )
        before = [p.detach().clone() for p in parameters]
        optimizer.step()
        step_norm = math.sqrt(
            sum(
                float((p.detach() - b).pow(2).sum())
                for p, b in zip(parameters, before)
            )
        )
        edges = episode_graph_edges(model, data, classes, config)
        records.append(
            {
                'episode': episode,
                'epoch': (episode - 1) // per_epoch + 1,
                'loss': float(loss.detach()),
                'accuracy': float(
                    (logits.detach().argmax(1) == sample.target)
                    .double()
                    .mean()
                ),
                'episode_graph_edges': edges,
                'grad_norm': grad_norm,
                'step_norm': step_norm,
            }
        )
        if episode % per_epoch == 0:
            scheduler.step()
    return records


def epoch_lines(records):
    """Per epoch: mean loss, most edges in one episode's graph, median
    gradient norm and step size."""
    lines = []
    for epoch in sorted({record['epoch'] for record in records}):
        rows = [record for record in records if record['epoch'] == epoch]
        loss = statistics.mean(r['loss'] for r in rows)
        edges = max(r['episode_graph_edges'] for r in rows)
        grad_norm = statistics.median(r['grad_norm'] for r in rows)
        step_norm = statistics.median(r['step_norm'] for r in rows)
        lines.append(
            f'epoch {epoch}: loss {loss:.4f}, episode graph edges <= '
            f'{edges}, median gradient norm {grad_norm:.3g}, median step '
            f'{step_norm:.3g}'
        )
    return lines


def parse_overrides(items):
    """The --set KEY=VALUE items as configuration fields, each value read
    with its field's own parser (as `apnet-zsl train` reads its flags);
    a one-line error naming --set otherwise."""
    fields = {option.name for option in dataclasses.fields(TrainConfig)}
    overrides = {}
    for item in items:
        key, separator, text = item.partition('=')
        name = key.strip().replace('-', '_')
        if not separator or not text.strip():
            raise ValueError(f"--set expects KEY=VALUE (got '{item}')")
        if name not in fields:
            raise ValueError(
                f"--set '{item}': '{key}' is not a training "
                f'option (see apnet-zsl train --help)'
            )
        if name in overrides:
            raise ValueError(f"--set '{item}': '{key}' is given twice")
        try:
            overrides[name] = parse_option_value(
                name, text.strip(), '--set', item
            )
        except TypeError:
            raise ValueError(
                f"--set '{item}': '{key}' is a switch of "
                f'reporting, not of training: the trace does '
                f'not use it'
            ) from None
    return overrides


def check_arguments(args):
    """Refuses bad flags with a one-line error before the run is read or
    any episode trained."""
    if args.episodes < 1:
        raise ValueError(
            f'--episodes must be a positive integer (got {args.episodes})'
        )
    if args.adam_eps is not None and not (
        math.isfinite(args.adam_eps) and args.adam_eps > 0
    ):
        raise ValueError(
            f'--adam-eps must be a positive finite number (got '
            f'{args.adam_eps})'
        )
    check_output_file(args.out, '--out', 'a CSV file name')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_run_arguments(parser)
    parser.add_argument('--episodes', type=int, required=True)
    parser.add_argument(
        '--set',
        nargs='*',
        default=[],
        metavar='KEY=VALUE',
        help="configuration fields overriding the run's",
    )
    parser.add_argument(
        '--adam-eps',
        type=float,
        default=None,
        help="Adam's epsilon (default: PyTorch's, 1e-8, as "
        'in training); a probe of the optimiser',
    )
    parser.add_argument('--out', required=True, help='CSV file')
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    check_arguments(args)

    overrides = parse_overrides(args.set)
    saved = read_run_metrics(args.run)
    try:
        config = TrainConfig.from_dict({**saved['config'], **overrides})
    except ValueError as error:  # The saved one is valid: --set's value.
        raise ValueError(f'--set: {error}') from None
    # The overridden configuration's attributes (--set attributes=...).
    data = run_dataset(args.run, saved, args.root, config)
    try:
        # The trace replays the final phase only: no validation classes.
        check_config_fits(config.replace(model_selection='none'), data)
    except ValueError as error:
        raise ValueError(
            f'--set: {error}'
            if overrides
            else f"{error}: the run's configuration does not fit "
            f'this data (--root)'
        ) from None
    if config.training == 'episodic':
        # Before the model is built; named as this script takes k_shot.
        check_k_shot(
            data,
            data.trainval_loc,
            data.seen_classes,
            config,
            f'--set k_shot={config.k_shot}'
            if 'k_shot' in overrides
            else "the run's; --set k_shot=K overrides it",
        )
    records = trace(data, config, args.episodes, args.adam_eps)

    def write(path):
        with open(path, 'w', newline='') as file:
            writer = csv.DictWriter(file, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(records)

    replace_atomically(args.out, write)
    if data.simulated:
        print(f'{data.name}: {SIMULATED_LABEL}')
    print('\n'.join(epoch_lines(records)))
    print(f'wrote {args.out} ({len(records)} episodes)')
    return records


if __name__ == '__main__':
    sys.exit(run_script(main))
