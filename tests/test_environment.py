import builtins
import io
import platform

import numpy as np
import torch
import torch_geometric

from apnet_pyg.environment import (
    available_cores,
    cpu_capability,
    cpu_id,
    cpu_model,
    describe_environment,
)


def test_describe_environment_follows_the_thread_count():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = describe_environment('cpu')
        torch.set_num_threads(2)
        two = describe_environment(torch.device('cpu'))
    finally:
        torch.set_num_threads(threads)
    assert one['threads'] == '1' and two['threads'] == '2'
    assert {**one, 'threads': '2'} == two
    assert one['cpu'] == cpu_model() and one['cpu']
    assert int(one['cores']) == available_cores() >= 1
    assert one['gpu'] == 'none'
    assert one['torch'] == torch.__version__
    assert one['torch_geometric'] == torch_geometric.__version__
    assert one['python'] == platform.python_version()
    assert one['numpy'] == np.__version__
    assert one['cpu_id'] == cpu_id()
    assert one['cpu_capability'] == cpu_capability()
    assert all(isinstance(value, str) for value in one.values())


def fake_cpuinfo(monkeypatch, text):
    r"""Makes :obj:`/proc/cpuinfo` read :obj:`text` (missing if None)."""
    real_open = builtins.open

    def cpuinfo(path, *args, **kwargs):
        if str(path) == '/proc/cpuinfo':
            if text is None:
                raise FileNotFoundError(path)
            return io.StringIO(text)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, 'open', cpuinfo)


def test_cpu_model_without_proc_cpuinfo(monkeypatch):
    fake_cpuinfo(monkeypatch, None)
    assert cpu_model() == (platform.processor() or platform.machine())
    assert cpu_id() == ''


def test_cpu_id_tells_processors_of_one_name_apart(monkeypatch):
    # Two processors behind one masked name, as a virtual machine shows
    # them; the second processor of a listing is not read.
    def listing(family, model, stepping):
        return (
            f'processor\t: 0\nvendor_id\t: AuthenticAMD\n'
            f'cpu family\t: {family}\nmodel\t\t: {model}\n'
            f'model name\t: AMD EPYC\nstepping\t: {stepping}\n\n'
            f'processor\t: 1\ncpu family\t: 99\nmodel\t\t: 99\n'
            f'stepping\t: 99\n'
        )

    fake_cpuinfo(monkeypatch, listing(25, 17, 1))
    older = (cpu_model(), cpu_id())
    fake_cpuinfo(monkeypatch, listing(26, 2, 1))
    newer = (cpu_model(), cpu_id())
    assert older == ('AMD EPYC', 'family 25 model 17 stepping 1')
    assert newer == ('AMD EPYC', 'family 26 model 2 stepping 1')
    fake_cpuinfo(monkeypatch, 'processor\t: 0\nmodel name\t: Some CPU\n')
    assert cpu_id() == ''


def test_cpu_capability_is_torchs(monkeypatch):
    assert cpu_capability() == torch.backends.cpu.get_cpu_capability()
    assert cpu_capability()
    monkeypatch.delattr(torch.backends.cpu, 'get_cpu_capability')
    assert cpu_capability() == ''


def test_describe_environment_names_the_gpu(monkeypatch):
    monkeypatch.setattr(
        torch.cuda, 'get_device_name', lambda device=None: f'GPU of {device}'
    )
    assert describe_environment('cuda:1')['gpu'] == 'GPU of cuda:1'
    assert describe_environment('cpu')['gpu'] == 'none'
