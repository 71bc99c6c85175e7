"""Per-episode trace of a run's final training phase: loss, accuracy, edges
of the episode's class graph, gradient norm and the size of the optimiser's
step, to diagnose what drives a spike of the training loss.

    python examples/trace_training.py --run runs/cub60-2 --episodes 4200 --out trace.csv
    python examples/trace_training.py --run runs/cub60-2 --episodes 4200 \\
        --set weight_decay=0 --out trace-wd0.csv
    python examples/trace_training.py --run runs/cub60-2 --episodes 4200 \\
        --adam-eps 1e-5 --out trace-eps.csv

It replays the final phase of the run's `apnet-zsl train` (the model, its
initialisation, the episode sampler and the optimiser of the run's
configuration and seed, on all seen classes' trainval images), so that with
no --set the per-epoch mean losses are the run's own (`metrics.json`'s
history). --set KEY=VALUE overrides a field of the configuration (values
are read as JSON, 0, 1e-3 or null, or else as text). Writes one CSV row per
episode and prints one line per epoch. Accuracies on simulated features are
SIMULATED; the trace's are training-episode accuracies, no test result.
"""
import argparse
import csv
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F

from apnet_pyg.zsl import TrainConfig, build_model
from apnet_pyg.zsl.cli import add_run_arguments, run_script
from apnet_pyg.zsl.train import (make_optimizer, make_sampler,
                                 make_scheduler, read_run_metrics,
                                 run_dataset)

COLUMNS = ('episode', 'epoch', 'loss', 'accuracy', 'episode_graph_edges',
           'grad_norm', 'step_norm')


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
        raise ValueError("the trace follows episodic training (the run's "
                         f"'training' is '{config.training}')")
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
        logits = model(data.features[sample.image_index],
                       data.attributes[classes], classes)
        loss = F.cross_entropy(logits, sample.target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = math.sqrt(sum(float(p.grad.pow(2).sum())
                                  for p in parameters if p.grad is not None))
        before = [p.detach().clone() for p in parameters]
        optimizer.step()
        step_norm = math.sqrt(sum(float((p.detach() - b).pow(2).sum())
                                  for p, b in zip(parameters, before)))
        edges = episode_graph_edges(model, data, classes, config)
        records.append({
            'episode': episode,
            'epoch': (episode - 1) // per_epoch + 1,
            'loss': float(loss.detach()),
            'accuracy': float((logits.detach().argmax(1) ==
                               sample.target).double().mean()),
            'episode_graph_edges': edges,
            'grad_norm': grad_norm,
            'step_norm': step_norm,
        })
        if episode % per_epoch == 0:
            scheduler.step()
    return records


def epoch_lines(records):
    """Per epoch: mean loss, most edges in one episode's graph, median
    gradient norm and step size."""
    lines = []
    for epoch in sorted({record['epoch'] for record in records}):
        rows = [record for record in records if record['epoch'] == epoch]
        lines.append(
            f"epoch {epoch}: loss {statistics.mean(r['loss'] for r in rows):.4f}"
            f", episode graph edges <= "
            f"{max(r['episode_graph_edges'] for r in rows)}, median gradient "
            f"norm {statistics.median(r['grad_norm'] for r in rows):.3g}, "
            f"median step {statistics.median(r['step_norm'] for r in rows):.3g}")
    return lines


def parse_overrides(items):
    overrides = {}
    for item in items:
        key, separator, value = item.partition('=')
        if not separator:
            raise SystemExit(f"error: --set expects KEY=VALUE (got '{item}')")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_run_arguments(parser)
    parser.add_argument('--episodes', type=int, required=True)
    parser.add_argument('--set', nargs='*', default=[], metavar='KEY=VALUE',
                        help='configuration fields overriding the run\'s')
    parser.add_argument('--adam-eps', type=float, default=None,
                        help="Adam's epsilon (default: PyTorch's, 1e-8, as "
                        "in training); a probe of the optimiser")
    parser.add_argument('--out', required=True, help='CSV file')
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    try:
        saved = read_run_metrics(args.run)
        config = TrainConfig.from_dict(
            {**saved['config'], **parse_overrides(args.set)})
        # The overridden configuration's attributes (--set attributes=...).
        data = run_dataset(args.run, saved, args.root, config)
    except (OSError, ValueError) as error:
        raise SystemExit(f'error: {error}') from None
    records = trace(data, config, args.episodes, args.adam_eps)
    with open(args.out, 'w', newline='') as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(records)
    print('\n'.join(epoch_lines(records)))
    print(f'wrote {args.out} ({len(records)} episodes)')
    return records


if __name__ == '__main__':
    sys.exit(run_script(main))
