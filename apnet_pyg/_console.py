r"""The :obj:`apnet-zsl` console script. It lives outside
:mod:`apnet_pyg.zsl` because importing that package loads torch and PyG,
which takes seconds: a Ctrl-C in those seconds ends with one line here, as
it does once a command runs, instead of an import traceback."""

import sys
from importlib import import_module
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    r"""Imports the command line and runs it (:func:`apnet_pyg.zsl.cli.main`);
    returns the exit status, 130 when interrupted during the import."""
    try:
        cli = import_module('apnet_pyg.zsl.cli')
    except KeyboardInterrupt:
        print('interrupted', file=sys.stderr)
        return 130
    return cli.main(argv)
