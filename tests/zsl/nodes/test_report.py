import pytest
import torch

from apnet_pyg.zsl.nodes.report import (
    format_nodes,
    node_metrics,
    summarise,
    summarise_gzsl,
)


def test_node_metrics_flags_a_constant_predictor():
    target = torch.tensor([4, 4, 4, 5, 6, 6])
    classes = torch.tensor([4, 5, 6])
    metrics = node_metrics(torch.full_like(target, 4), target, classes)
    assert metrics['acc'] == pytest.approx(50.0)
    assert metrics['floor'] == pytest.approx(50.0)
    assert metrics['balanced'] == pytest.approx(100 / 3)
    assert metrics['predicted_classes'] == 1
    assert node_metrics(target, target, classes)['balanced'] == 100.0


def test_published_rows_are_printed_for_cora():
    results = {
        'dataset': 'cora',
        'splits': {'I': 'split I: ...'},
        'num_unseen': {'I': 4},
        'seeds': [0],
        'selection': 'fixed in advance',
        'csds': {
            'text': {
                'rows': [],
                'floor': {'I': 28.53},
                'published': {
                    'I': {'ESZSL': (27.35, 0.0), 'DGPN': (33.78, 0.28)}
                },
            }
        },
    }
    table = format_nodes(results)
    assert '| DGPN (published) | 33.78 ± 0.28 |' in table
    assert '| ESZSL (published) | 27.35 ± 0.00 |' in table


def test_summarise_gzsl():
    runs = [
        {'seen': 60.0, 'unseen': 20.0, 'h': 30.0},
        {'seen': 70.0, 'unseen': 30.0, 'h': 42.0},
    ]
    out = summarise_gzsl(runs)
    assert (out['seen'], out['unseen'], out['h']) == (65.0, 25.0, 36.0)
    assert out['seen_std'] == pytest.approx(50**0.5)
    assert out['seeds'] == 2 and 'cal_h' not in out
    one = summarise_gzsl(
        [dict(runs[0], cal_seen=50.0, cal_unseen=40.0, cal_h=44.4)]
    )
    assert one['cal_h'] == 44.4 and one['cal_h_std'] == 0.0


def _results(**block):
    target = torch.tensor([4, 4, 5, 6])
    run = node_metrics(
        torch.tensor([4, 5, 5, 6]), target, torch.tensor([4, 5, 6])
    )
    row = {
        'method': 'APNet (chosen)',
        'setting': 'propagation=mean, graph=knn (k=2, no self-loop, over '
        'the descriptions of every class), training=episodic, k_shot=32',
        'epochs': 3,
        'val_balanced': 80.0,
        'splits': {'II': summarise([run, run])},
    }
    return {
        'dataset': 'toy',
        'splits': {'II': 'split II: ...'},
        'num_unseen': {'II': 3},
        'seeds': [0, 1],
        'selection': 'chosen on validation',
        'csds': {
            'text': {
                'rows': [row],
                'floor': {'II': 50.0},
                'published': {},
                **block,
            }
        },
    }


def test_format_says_whether_the_knn_graph_was_chosen():
    table = format_nodes(_results(knn_chosen=True))
    assert (
        'k-NN class graph chosen: yes (the chosen setting: graph=knn (k=2, '
        'no self-loop, over the descriptions of every class))'
    ) in table
    assert 'k-NN class graph chosen' not in format_nodes(_results())
    assert format_nodes({**_results(), 'quick': True}).startswith(
        'QUICK MODE (--quick): a smoke test'
    )


def test_format_prints_the_oracle_apart_and_labelled():
    oracle = {
        'label': "test-selected (oracle, as DGPN's public code selects)",
        'setting': 'graph=none',
        'epochs': 7,
        'split': 'II',
        'summary': {
            'acc': 51.25,
            'acc_std': 1.5,
            'balanced': 49.0,
            'balanced_std': 2.0,
            'seeds': 4,
        },
    }
    table = format_nodes(_results(oracle=oracle))
    main, _, diagnosis = table.partition('Diagnosis only, not a result')
    assert 'oracle' not in main
    assert (
        "| APNet, test-selected (oracle, as DGPN's public code selects) | "
        '51.25 ± 1.50 | 49.00 ± 2.00 | Split II only' in diagnosis
    )
    assert 'never used for a choice or a claim' in diagnosis


def test_format_gzsl_table():
    gzsl = [
        {
            'method': 'APNet (chosen)',
            'setting': '3 epochs, graph=none',
            'calibration': 0.25,
            'splits': {
                'II': summarise_gzsl(
                    [
                        {
                            'seen': 60.0,
                            'unseen': 20.0,
                            'h': 30.0,
                            'cal_seen': 50.0,
                            'cal_unseen': 40.0,
                            'cal_h': 44.44,
                        }
                    ]
                )
            },
        },
        {
            'method': "ESZSL (DGPN's inputs)",
            'setting': 'gamma=1, lambda=1',
            'calibration': None,
            'splits': {
                'II': summarise_gzsl([{'seen': 70.0, 'unseen': 0.0, 'h': 0.0}])
            },
        },
    ]
    table = format_nodes(_results(gzsl=gzsl))
    assert 'Generalized zero-shot (--gzsl)' in table
    assert (
        '| APNet (chosen) | II | 60.00 | 20.00 | 30.00 | 50.00 | 40.00 | '
        '44.44 | 0.25 | 3 epochs, graph=none |'
    ) in table
    assert (
        "| ESZSL (DGPN's inputs) | II | 70.00 | 0.00 | 0.00 |  |  |  |  | "
        'gamma=1, lambda=1 |'
    ) in table
