"""Writing results: output folders whose errors name the folder
(:func:`make_output_folder`, :func:`check_output_file`), and files written
whole or not at all (:func:`replace_atomically`, :func:`atomic_write_text`,
:func:`save_figure_atomically`)."""

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable, Union


def make_output_folder(folder: Union[str, Path]) -> Path:
    r"""Creates :obj:`folder` and its parents if they do not exist,
    checks that a file can be written in it, and returns it; where that
    fails (a parent is a file, a read-only place), the error names the
    folder and says what to do, instead of the system's bare "[Errno 2] No
    such file or directory" after the work."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(
            f"the output folder '{folder}' is a file: choose another folder"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise type(error)(
            f"cannot create the output folder '{folder}' "
            f'({error.strerror or error}): choose a folder '
            f'you can write to'
        ) from error
    try:
        # An existing folder may still refuse files (permissions, a
        # read-only or virtual file system, which root's access() misses).
        handle, probe = tempfile.mkstemp(dir=folder, prefix='.write-test-')
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise type(error)(
            f"cannot write in the output folder '{folder}' "
            f'({error.strerror or error}): choose a folder '
            f'you can write to'
        ) from error
    return folder


def check_output_file(path: Union[str, Path], flag: str, what: str) -> Path:
    r"""Checks, before any work, that :obj:`path` (given as :obj:`flag`)
    can be written as :obj:`what` (e.g. :obj:`"a markdown file name"`):
    not a directory, in a folder that exists or is created here; a
    one-line :class:`ValueError` naming the flag otherwise."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{flag} '{path}' is a directory: give {what}")
    try:
        make_output_folder(path.absolute().parent)
    except OSError as error:
        raise ValueError(f"{flag} '{path}': {error}") from None
    return path


def replace_atomically(
    path: Union[str, Path], write: Callable[[Path], Any]
) -> None:
    r"""Runs :obj:`write` on a temporary file beside :obj:`path` and renames
    it over :obj:`path`: a process killed while writing never leaves a
    truncated file, and the previous one stays whole.

    The temporary name is unique per call (process id and a random part),
    so two processes writing the same file never write into each other's
    temporary file: the last rename wins, whole. A failed :obj:`write`
    removes its temporary file."""
    path = Path(path)
    tmp = path.with_name(
        f'{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp'
    )
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as error:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:  # The folder itself is not writable.
            pass
        if isinstance(error, OSError) and error.errno is not None:
            # "[Errno 30] Read-only file system: '<file>.<pid>-<id>.tmp'"
            # names neither the file meant nor what to do.
            raise type(error)(
                error.errno,
                f"cannot write '{path}' "
                f'({error.strerror}): choose a folder you can '
                f'write to',
            ) from error
        raise


def atomic_write_text(text: str, path: Union[str, Path]) -> None:
    r"""Writes :obj:`text` to :obj:`path` atomically
    (:func:`replace_atomically`), creating its folder
    (:func:`make_output_folder`)."""
    path = Path(path)
    make_output_folder(path.parent)
    replace_atomically(path, lambda tmp: tmp.write_text(text))


def save_figure_atomically(
    figure: Any, path: Union[str, Path], **kwargs: Any
) -> None:
    r"""Saves a matplotlib :obj:`figure` to :obj:`path` atomically
    (:func:`replace_atomically`), in the format its suffix names (the
    temporary file's suffix is :obj:`.tmp`); :obj:`kwargs` go to
    :meth:`savefig`."""
    path = Path(path)
    kwargs.setdefault('format', path.suffix[1:] or None)
    replace_atomically(path, lambda tmp: figure.savefig(tmp, **kwargs))
