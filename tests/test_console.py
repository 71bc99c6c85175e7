import re
from pathlib import Path

import apnet_pyg._console as console


def test_console_script_is_the_light_entry_point():
    pyproject = Path(__file__).parents[1] / 'pyproject.toml'
    scripts = re.findall(
        r'^apnet-zsl = "(.+)"$', pyproject.read_text(), re.MULTILINE
    )
    assert scripts == ['apnet_pyg._console:main']


def test_interrupt_during_import_is_one_line(monkeypatch, capsys):
    def interrupted(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(console, 'import_module', interrupted)
    assert console.main(['simulate', '--help']) == 130
    captured = capsys.readouterr()
    assert captured.err == 'interrupted\n'
    assert captured.out == ''


def test_runs_the_command_line(capsys):
    # An unknown dataset is refused by the command line itself (one line,
    # exit status 1), which shows that the arguments reach it.
    assert (
        console.main(['simulate', '--dataset', 'NOPE', '--out', 'unused']) != 0
    )
    assert 'NOPE' in capsys.readouterr().err
