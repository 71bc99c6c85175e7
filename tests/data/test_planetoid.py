import pytest
import torch
from torch_geometric.io import read_planetoid_data

from apnet_pyg.data.planetoid import RAW_PARTS, raw_folder, read_raw_planetoid
from tests.helpers.planetoid_toy import write_raw_cora


def test_reads_what_planetoid_reads(tmp_path):
    folder = write_raw_cora(tmp_path)
    assert raw_folder(str(tmp_path), 'Cora') == str(folder)
    data = read_raw_planetoid(str(tmp_path), 'Cora')
    expected = read_planetoid_data(str(folder), 'Cora')
    assert data.num_nodes == expected.num_nodes == 504
    for key in ('x', 'y', 'edge_index', 'train_mask', 'val_mask', 'test_mask'):
        assert torch.equal(data[key], expected[key])
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f'ind.cora.{part}' for part in RAW_PARTS
    )


def test_missing_folder_and_file(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=f"no folder '{tmp_path}/Cora/raw' of raw Planetoid Cora files",
    ):
        read_raw_planetoid(str(tmp_path))
    folder = write_raw_cora(tmp_path)
    (folder / 'ind.cora.ty').unlink()
    with pytest.raises(
        FileNotFoundError, match=f"^'{folder}/ind.cora.ty' is missing$"
    ):
        read_raw_planetoid(str(tmp_path))


@pytest.mark.parametrize(
    'part, content, error',
    [
        ('allx', 'truncated', 'UnpicklingError'),
        ('graph', b'\x80\x04garbled', 'UnpicklingError'),
        ('test.index', b'502\ngarbage\n', 'ValueError'),
    ],
)
def test_names_the_file_that_does_not_read(tmp_path, part, content, error):
    folder = write_raw_cora(tmp_path)
    path = folder / f'ind.cora.{part}'
    path.write_bytes(
        path.read_bytes()[:20] if content == 'truncated' else content
    )
    with pytest.raises(ValueError) as info:
        read_raw_planetoid(str(tmp_path))
    message = str(info.value)
    assert message.startswith(f"cannot read '{path}' ({error}: ")
    assert message.endswith('): it is truncated or garbled')
    assert '\n' not in message


def test_files_that_do_not_fit_together(tmp_path):
    # Each file reads, but a test index points past the nodes there are.
    folder = write_raw_cora(tmp_path)
    (folder / 'ind.cora.test.index').write_text('502\n9999\n')
    with pytest.raises(
        ValueError,
        match=f"^the raw Cora files in '{folder}' do not fit "
        f'together \\(IndexError: ',
    ):
        read_raw_planetoid(str(tmp_path))
