r"""Figure 2 of the APNet paper: a t-SNE map of the propagated class
vectors, seen and unseen classes in two colours, with the edges of the
learned class graph."""

from pathlib import Path
from typing import Union

import torch

from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.files import make_output_folder, save_figure_atomically
from apnet_pyg.nn.models.apnet import APNet
from apnet_pyg.zsl.reporting.tables import SIMULATED_LABEL


def check_plot_output(out: Union[str, Path]) -> None:
    r"""Checks, before any work, that the figure can be written to
    :obj:`out` and that the plotting packages are installed."""
    out = Path(out)
    if out.is_dir():
        raise IsADirectoryError(
            f"the figure's path '{out}' is a directory: name a .png file"
        )
    if out.suffix.lower() != '.png':  # ('.png' alone has no suffix.)
        raise ValueError(
            f"the figure's path '{out}' must name a .png file, "
            f"e.g. 'classes.png'"
        )
    make_output_folder(out.parent)  # Created and writable, or named.
    _plotting_modules()


def _plotting_modules():
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        from sklearn.manifold import TSNE
    except ImportError:
        raise ImportError(
            'the plot needs matplotlib and scikit-learn: '
            "pip install 'apnet_pyg[plot]'"
        ) from None
    return plt, TSNE


@torch.no_grad()
def plot_class_vectors(
    model: APNet, data: ZSLDataset, out: Union[str, Path], seed: int = 0
) -> Path:
    r"""Writes the t-SNE figure of the class vectors of all classes (graph
    over all classes, as in GZSL) to :obj:`out` (PNG) and returns the path.
    Needs :obj:`matplotlib` and :obj:`scikit-learn` (the :obj:`plot`
    extra)."""
    plt, TSNE = _plotting_modules()
    model.eval()
    device = next(model.parameters()).device
    attributes = data.attributes.to(device)
    every_class = torch.arange(data.num_classes, device=device)
    vectors = model.class_vectors(attributes, every_class)
    edge_index = torch.zeros(2, 0, dtype=torch.long)
    if model.graph != 'none':
        edge_index, edge_weight = model.class_graph(
            model.encoder(attributes), every_class
        )
        if model.graph == 'wordnet':  # Fully connected: draw d <= 2 only.
            edge_index = edge_index[:, edge_weight >= 0.5]
        edge_index = edge_index.cpu()
    vectors = vectors.cpu().numpy()

    perplexity = min(30.0, (data.num_classes - 1) / 3)
    points = TSNE(
        n_components=2, perplexity=perplexity, init='pca', random_state=seed
    ).fit_transform(vectors)

    unseen = torch.zeros(data.num_classes, dtype=torch.bool)
    unseen[data.unseen_classes] = True
    figure, axis = plt.subplots(figsize=(9, 8))
    for source, target in edge_index.t().tolist():
        if source < target:  # Undirected: draw each pair once.
            axis.plot(
                *points[[source, target]].T, color='0.75', lw=0.6, zorder=1
            )
    for mask, colour, name in [
        (~unseen, 'tab:blue', 'seen'),
        (unseen, 'tab:red', 'unseen'),
    ]:
        axis.scatter(
            *points[mask.numpy()].T, c=colour, s=22, label=name, zorder=2
        )
    if data.num_classes <= 60:
        for index, name in enumerate(data.class_names):
            axis.annotate(name, points[index], fontsize=7, alpha=0.8)
    title = f'{data.name}: propagated class vectors, {model.graph} graph'
    if model.graph == 'wordnet':
        title += ' (edges: WordNet distance <= 2)'
    if data.simulated:
        title += f' ({SIMULATED_LABEL})'
    axis.set_title(title)
    axis.legend()
    axis.set_xticks([])
    axis.set_yticks([])
    out = Path(out)
    make_output_folder(out.parent)
    save_figure_atomically(figure, out, dpi=120, bbox_inches='tight')
    plt.close(figure)
    return out
