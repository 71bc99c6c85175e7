r"""The worker of the propagation benchmark: one (method, graph, feature
size, pass) measured in a fresh process."""

import torch

from benchmarks import common
from benchmarks.common import GB, MB
from benchmarks.propagation.grid import (
    METHODS,
    GraphSpec,
    build_edge_index,
    dense_adjacency,
)


def measure(spec: dict) -> dict:
    r"""Builds the inputs and the layer, times the pass and measures its
    peak memory. Runs inside a worker process."""
    torch.set_num_threads(spec['threads'])
    device = torch.device(spec['device'])
    memory_before = common.current_rss_bytes()
    graph = GraphSpec(**spec['graph'])
    method = METHODS[spec['method']]
    F, seed = spec['F'], spec['seed']
    dtype = getattr(torch, spec.get('dtype', 'float32'))
    backward = spec['pass'] == 'forward+backward'

    # A large graph comes from the driver's file: drawn once, not per pass.
    edge_index = (
        torch.load(spec['edges_file'], weights_only=True)
        if spec.get('edges_file')
        else None
    )
    if method.dense:
        graph_input = dense_adjacency(graph, seed, edge_index).to(device)
    else:
        graph_input = (
            build_edge_index(graph, seed) if edge_index is None else edge_index
        ).to(device)
    del edge_index
    # Drawn where they are used: a million rows of features take seconds
    # to draw on the CPU, and their values do not change the cost.
    generator = torch.Generator(device).manual_seed(seed)
    x = torch.randn(graph.num_nodes, F, generator=generator, device=device)
    x = x.to(dtype)
    torch.manual_seed(seed)
    # The layer in the features' dtype too (parameters and buffers).
    layer = method.build(F).to(device, dtype)

    if backward:
        x.requires_grad_(True)
        out_shape = (1, graph.num_nodes, F) if method.dense else x.shape
        grad = torch.randn(out_shape, generator=generator, device=device)
        grad = grad.to(dtype)

        def run_pass():
            # Input gradients too: the layer sits inside a network.
            x.grad = None
            layer.zero_grad(set_to_none=True)
            layer(x, graph_input).backward(grad)
    else:

        def run_pass():
            with torch.no_grad():
                layer(x, graph_input)

    setup = common.current_rss_bytes() - memory_before
    result = {'setup_mb': setup / MB if device.type == 'cpu' else None}
    timer = spec['timing']
    load = common.LoadMonitor()
    try:
        with load:
            common.warm_up(run_pass, device, timer['time_cap'])
            # The peak is taken over the timed calls only: the warm-up's
            # one-time costs (lazy library pages, thread pools, allocator
            # arenas) are not the pass's. Its gradients are dropped, so
            # that they count as the pass's allocation, as at a first call.
            x.grad = None
            layer.zero_grad(set_to_none=True)
            with common.PeakMemory(device) as memory:
                times = common.time_runs(
                    run_pass,
                    device,
                    timer['min_runs'],
                    timer['min_time'],
                    timer['max_runs'],
                )
    except common.TimeCapExceeded:
        result.update(
            status='skipped',
            note=(
                f'time cap: the first run took over {timer["time_cap"]:g} s'
            ),
        )
        return result
    except RuntimeError as error:
        if not common.is_out_of_memory(error):
            raise
        result.update(
            status='skipped',
            note=(
                f'memory: allocation failed under the '
                f'{spec["memory_cap_bytes"] / GB:.3g} GB cap'
            ),
        )
        return result

    result.update(
        common.summarize_times(times),
        status='ok',
        peak_mb=memory.peak_mb,
        load_start=load.load_start,
        load_end=load.load_end,
        other_cores=load.other_cores,
    )
    return result
