r"""What every command-line entry point of the package shares: an error
prints one line, not a traceback, unless :obj:`--debug` is given."""

import sys
from typing import Any, Callable, List, Optional


def error_line(error: Exception) -> str:
    r"""The one line an error prints on the command line: its message on
    one line; for an error of an unexpected type, also its type and how to
    see the traceback."""
    message = ' '.join(str(error).split()) or type(error).__name__
    if not isinstance(error, (ValueError, OSError, RuntimeError)):
        message = (
            f'{type(error).__name__}: {message} (--debug shows the traceback)'
        )
    return f'error: {message}'


def run_script(
    main: Callable[[List[str]], Any], argv: Optional[List[str]] = None
) -> int:
    r"""Runs the :obj:`main(argv)` of an example or benchmark script as
    :obj:`apnet-zsl` runs its commands, and returns the exit status: an
    error prints one line (:func:`error_line`) and gives 1, unless
    :obj:`--debug` is among the arguments (it is removed before
    :obj:`main` sees them), which shows the traceback. Usage errors
    (:class:`SystemExit`) pass through."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = '--debug' in argv
    try:
        main([arg for arg in argv if arg != '--debug'])
    except KeyboardInterrupt:
        print('interrupted', file=sys.stderr)
        return 130
    except Exception as error:
        if debug:
            raise
        print(error_line(error), file=sys.stderr)
        return 1
    return 0
