r"""Zero-shot node classification (DGPN's benchmark) with APNet, ESZSL and
SAE: the protocol (:mod:`~apnet_pyg.zsl.nodes.protocol`, what
:obj:`apnet-zsl nodes` runs), its inputs and settings
(:mod:`~apnet_pyg.zsl.nodes.inputs`) and its report
(:mod:`~apnet_pyg.zsl.nodes.report`)."""

from apnet_pyg.zsl.nodes.inputs import NodeSetting, NodeTask
from apnet_pyg.zsl.nodes.protocol import run_nodes
from apnet_pyg.zsl.nodes.report import format_nodes

__all__ = ['NodeSetting', 'NodeTask', 'run_nodes', 'format_nodes']
