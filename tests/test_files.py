import errno
import os
import threading

import pytest

from apnet_pyg.files import (
    check_output_file,
    replace_atomically,
    save_figure_atomically,
)


def test_replace_atomically_writes_whole_and_leaves_no_temporary_file(
    tmp_path,
):
    path = tmp_path / 'table.md'
    path.write_text('old')
    replace_atomically(path, lambda tmp: tmp.write_text('new'))
    assert path.read_text() == 'new'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['table.md']


def test_replace_atomically_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / 'table.md'
    path.write_text('old')

    def fail(tmp):
        tmp.write_text('half')
        raise OSError('disk full')

    with pytest.raises(OSError, match='disk full'):
        replace_atomically(path, fail)
    assert path.read_text() == 'old'
    # The half-written temporary file is removed.
    assert sorted(p.name for p in tmp_path.iterdir()) == ['table.md']


def test_replace_atomically_gives_each_writer_its_own_temporary_file(tmp_path):
    # Two writers of the same file at once: each writes its own temporary
    # file, so neither renames the other's half-written one into place.
    path = tmp_path / 'metrics.json'
    both_writing = threading.Barrier(2)
    temporaries = []

    def write(text):
        def write_text(tmp):
            temporaries.append(tmp)
            tmp.write_text(text[:1])
            both_writing.wait(timeout=10)
            with open(tmp, 'a') as f:
                f.write(text[1:])

        return write_text

    threads = [
        threading.Thread(target=replace_atomically, args=(path, write(text)))
        for text in ('a' * 1000, 'b' * 1000)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(temporaries)) == 2
    assert all(
        tmp.parent == tmp_path and tmp.name.startswith('metrics.json.')
        for tmp in temporaries
    )
    assert path.read_text() in ('a' * 1000, 'b' * 1000)
    assert sorted(os.listdir(tmp_path)) == ['metrics.json']


def test_save_figure_atomically_uses_the_format_of_the_suffix(tmp_path):
    matplotlib = pytest.importorskip('matplotlib')
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(1, 1))
    try:
        save_figure_atomically(figure, tmp_path / 'plot.png', dpi=20)
        save_figure_atomically(figure, tmp_path / 'plot.svg')
    finally:
        plt.close(figure)
    assert (tmp_path / 'plot.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert b'<svg' in (tmp_path / 'plot.svg').read_bytes()
    assert sorted(os.listdir(tmp_path)) == ['plot.png', 'plot.svg']


def test_replace_atomically_names_the_file_it_cannot_write(tmp_path):
    # As a read-only mount answers (the tests may run as root, whom a
    # folder's mode does not stop):
    def read_only(tmp):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp))

    with pytest.raises(
        OSError,
        match=(
            r"^\[Errno 30\] cannot write '.*/table.md' \(Read-only file "
            r'system\): choose a folder you can write to$'
        ),
    ) as error:
        replace_atomically(tmp_path / 'table.md', read_only)
    assert error.value.errno == errno.EROFS


def test_check_output_file(tmp_path):
    out = check_output_file(
        tmp_path / 'new' / 'table.md', '--out', 'a markdown file name'
    )
    assert out.parent.is_dir()  # created, before any work
    with pytest.raises(
        ValueError,
        match=r"^--out '.*' is a directory: "
        r'give a markdown file name$',
    ):
        check_output_file(tmp_path, '--out', 'a markdown file name')
    (tmp_path / 'file').write_text('x')
    with pytest.raises(
        ValueError,
        match=r"^--out '.*file/table.md': "
        r"the output folder '.*file' is a file",
    ):
        check_output_file(tmp_path / 'file' / 'table.md', '--out', 'x')


def test_make_output_folder_refuses_a_folder_that_refuses_files(
    tmp_path, monkeypatch
):
    # Found here, before the work, not when its results are written.
    import tempfile

    from apnet_pyg.files import make_output_folder

    assert make_output_folder(tmp_path / 'a' / 'b') == tmp_path / 'a' / 'b'
    assert list((tmp_path / 'a' / 'b').iterdir()) == []  # Probe removed.

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, 'Read-only file system')

    monkeypatch.setattr(tempfile, 'mkstemp', refuse)
    with pytest.raises(
        OSError,
        match=f'cannot write in the output folder '
        f"'{tmp_path}' \\(Read-only file system\\)",
    ):
        make_output_folder(tmp_path)
