import builtins
import platform

import torch
import torch_geometric

from apnet_pyg.zsl.environment import (available_cores, cpu_model,
                                       describe_environment)


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
    assert all(isinstance(value, str) for value in one.values())


def test_cpu_model_without_proc_cpuinfo(monkeypatch):
    real_open = builtins.open

    def no_cpuinfo(path, *args, **kwargs):
        if str(path) == '/proc/cpuinfo':
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, 'open', no_cpuinfo)
    assert cpu_model() == (platform.processor() or platform.machine())


def test_describe_environment_names_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'get_device_name',
                        lambda device=None: f'GPU of {device}')
    assert describe_environment('cuda:1')['gpu'] == 'GPU of cuda:1'
    assert describe_environment('cpu')['gpu'] == 'none'
