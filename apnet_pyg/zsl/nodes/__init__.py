r"""Zero-shot node classification (DGPN's benchmark) with APNet, ESZSL and
SAE: the protocol (:mod:`~apnet_pyg.zsl.nodes.protocol`, what
:obj:`apnet-zsl nodes` runs), its inputs and settings
(:mod:`~apnet_pyg.zsl.nodes.inputs`), its training runs
(:mod:`~apnet_pyg.zsl.nodes.training`), how their scores are read
(:mod:`~apnet_pyg.zsl.nodes.scores`: smoothing over the node graph, seed
ensembles), the choice on validation classes
(:mod:`~apnet_pyg.zsl.nodes.selection`), the closed-form baselines
(:mod:`~apnet_pyg.zsl.nodes.closed_form`), generalized zero-shot
(:mod:`~apnet_pyg.zsl.nodes.gzsl`) and its report
(:mod:`~apnet_pyg.zsl.nodes.report`)."""

from apnet_pyg.zsl.nodes.inputs import NodeSetting, NodeTask
from apnet_pyg.zsl.nodes.protocol import run_nodes
from apnet_pyg.zsl.nodes.report import format_nodes

__all__ = ['NodeSetting', 'NodeTask', 'run_nodes', 'format_nodes']
