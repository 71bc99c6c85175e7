r"""What the application reports: its tables and labels
(:mod:`~apnet_pyg.zsl.reporting.tables`), the published figures
(:mod:`~apnet_pyg.zsl.reporting.published`), finished runs beside them
(:mod:`~apnet_pyg.zsl.reporting.compare`) and the class-vector map
(:mod:`~apnet_pyg.zsl.reporting.plot`)."""

from apnet_pyg.zsl.reporting.compare import compare_runs
from apnet_pyg.zsl.reporting.published import published
from apnet_pyg.zsl.reporting.tables import format_comparison, format_table

__all__ = ['compare_runs', 'published', 'format_comparison', 'format_table']
