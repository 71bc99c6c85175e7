r"""The plots of the propagation benchmark: time and memory against the
number of nodes, and the sparse/dense crossover."""

import os.path as osp
from typing import List, Sequence

from apnet_pyg.files import save_figure_atomically
from benchmarks.propagation.grid import (
    METHODS,
    PASSES,
    PROJ_CHANNELS,
    grid_methods,
    random_graph_spec,
)


def degree_rows(rows: Sequence[dict], degree) -> List[dict]:
    if degree == 'complete':
        return [row for row in rows if row['graph'] == 'complete']
    # By the graph the requested degree gave at each N (its edges rounded
    # to whole pairs), not by the degree that graph has.
    return [
        row
        for row in rows
        if row['graph'] == 'random'
        and row['E'] == random_graph_spec(row['N'], degree).num_edges
    ]


def degree_label(degree) -> str:
    return 'complete (N-1)' if degree == 'complete' else f'{degree:g}'


def write_plots(
    out_dir: str, rows: Sequence[dict], crossovers: Sequence[dict], settings
) -> List[str]:
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    names = []
    for F in settings.features:
        for key, what, unit in (
            ('median_ms', 'time', 'median time (ms)'),
            ('peak_mb', 'memory', 'peak memory (MB)'),
        ):
            name = f'{what}_F{F}.png'
            _plot_grid(
                plt, osp.join(out_dir, name), rows, settings, F, key, unit
            )
            names.append(name)
    if crossovers:
        name = 'crossover.png'
        _plot_crossover(plt, osp.join(out_dir, name), crossovers, settings)
        names.append(name)
    return names


def _plot_grid(
    plt, path: str, rows: Sequence[dict], settings, F: int, key: str, unit: str
) -> None:
    degrees = list(settings.degrees)
    # Wide enough for two columns of method names under one degree.
    width, height = max(4.0 * len(degrees), 7.0), 3.4 * len(PASSES)
    figure, axes = plt.subplots(
        len(PASSES),
        len(degrees),
        squeeze=False,
        figsize=(width, height),
        sharex=True,
    )
    grid = [
        row
        for row in rows
        if row['F'] == F
        and row['source'] == 'grid'
        and row['status'] == 'ok'
        and row[key]
    ]
    for i, pass_ in enumerate(PASSES):
        for j, degree in enumerate(degrees):
            ax = axes[i][j]
            at_degree = degree_rows(
                [row for row in grid if row['pass'] == pass_], degree
            )
            for method in grid_methods(
                settings.methods, settings.defaults_on_all_graphs
            ):
                points = sorted(
                    (row['N'], row[key])
                    for row in at_degree
                    if row['method'] == method
                )
                if points:
                    ax.plot(
                        *zip(*points), marker='o', label=METHODS[method].label
                    )
            ax.set_xscale('log')
            ax.set_yscale('log')
            ax.grid(True, which='both', alpha=0.3)
            ax.set_title(
                f'{pass_}, degree {degree_label(degree)}', fontsize=10
            )
            if i == len(PASSES) - 1:
                ax.set_xlabel('nodes N')
            if j == 0:
                ax.set_ylabel(unit)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for row_axes in axes:
        for ax in row_axes:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                if label not in labels:
                    handles.append(handle)
                    labels.append(label)
    # A method's name takes about 2.6 inches at this size: wrap the legend
    # into the rows the figure's width needs.
    columns = max(1, min(len(labels), int(width // 2.6)))
    legend_rows = -(-len(labels) // columns)
    if labels:
        figure.legend(
            handles, labels, loc='lower center', ncol=columns, fontsize=9
        )
    figure.suptitle(f'F = {F} (APNet proj_channels = {PROJ_CHANNELS})')
    bottom = (0.1 + 0.22 * legend_rows) / height
    figure.tight_layout(rect=(0, bottom, 1, 1))
    save_figure_atomically(figure, path, dpi=90)
    plt.close(figure)


def _plot_crossover(
    plt, path: str, crossovers: Sequence[dict], settings
) -> None:
    features = list(settings.features)
    nodes = list(settings.nodes)
    colors = plt.rcParams['axes.prop_cycle'].by_key()['color']
    figure, axes = plt.subplots(
        1, len(PASSES), squeeze=False, figsize=(6 * len(PASSES), 4)
    )
    for j, pass_ in enumerate(PASSES):
        ax = axes[0][j]
        for c in crossovers:
            if c['pass'] != pass_:
                continue
            # Colour: N; line style: F.
            style = ('-', '--', ':', '-.')[features.index(c['F']) % 4]
            ax.plot(
                c['degrees'],
                c['ratios'],
                style,
                marker='o',
                color=colors[nodes.index(c['N']) % len(colors)],
                label=f'N={c["N"]:,}, F={c["F"]}',
            )
        ax.axhline(1.0, color='black', linewidth=0.8)
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.grid(True, which='both', alpha=0.3)
        ax.set_xlabel('average degree')
        ax.set_ylabel('t(DenseAPNetConv) / t(APNetConv sparse), min')
        ax.set_title(f'{pass_}: dense faster below the line', fontsize=10)
        ax.legend(fontsize=8)
    figure.tight_layout()
    save_figure_atomically(figure, path, dpi=90)
    plt.close(figure)
