"""The operator library never imports the ZSL application (apnet_pyg.zsl),
nor do the operator's examples and benchmarks; no module of the repository
imports a private name (or a private module) of another."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APPLICATION = 'apnet_pyg.zsl'

LIBRARY = sorted(
    path
    for path in (ROOT / 'apnet_pyg').rglob('*.py')
    if 'zsl' not in path.relative_to(ROOT / 'apnet_pyg').parts
)
OPERATOR_USERS = [
    ROOT / 'examples' / 'drop_in.py',
    ROOT / 'experiments' / 'node_classification.py',
    ROOT / 'examples' / 'distributed.py',
    *sorted((ROOT / 'benchmarks' / 'propagation').glob('*.py')),
    ROOT / 'benchmarks' / 'common.py',
    ROOT / 'benchmarks' / 'cuda_fork.py',
    ROOT / 'benchmarks' / '__main__.py',
]


def imported_modules(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module or ''


def test_the_library_is_found():
    names = {path.name for path in LIBRARY}
    assert {'apnet_conv.py', 'cosine.py', 'checks.py'} <= names


@pytest.mark.parametrize(
    'path',
    LIBRARY + OPERATOR_USERS,
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_does_not_import_the_application(path):
    application = [
        name
        for name in imported_modules(path)
        if name == APPLICATION or name.startswith(APPLICATION + '.')
    ]
    assert not application, f'{path.relative_to(ROOT)} imports {application}'


def test_the_check_sees_an_application_import(tmp_path):
    module = tmp_path / 'module.py'
    module.write_text('def f():\n    from apnet_pyg.zsl.cli import main\n')
    assert APPLICATION + '.cli' in set(imported_modules(module))


OWN_PACKAGES = ('apnet_pyg', 'benchmarks', 'tests')
EVERY_MODULE = sorted(
    path
    for folder in (
        'apnet_pyg',
        'benchmarks',
        'examples',
        'experiments',
        'scripts',
        'tests',
    )
    for path in (ROOT / folder).rglob('*.py')
)


def private_imports(path: Path):
    r"""The private names (and private modules) of this repository's
    packages that :obj:`path` imports."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            module = node.module or ''
            if not module.startswith(OWN_PACKAGES):
                continue
            parts = module.split('.')
            if any(
                p.startswith('_') and not p.startswith('__') for p in parts
            ):
                yield module
            for alias in node.names:
                if alias.name.startswith('_') and not alias.name.startswith(
                    '__'
                ):
                    yield f'{module}.{alias.name}'


@pytest.mark.parametrize(
    'path', EVERY_MODULE, ids=lambda path: str(path.relative_to(ROOT))
)
def test_no_private_name_crosses_a_module_boundary(path):
    crossing = list(private_imports(path))
    assert not crossing, f'{path.relative_to(ROOT)} imports {crossing}'


def test_the_private_import_check_sees_one(tmp_path):
    module = tmp_path / 'module.py'
    module.write_text('from apnet_pyg.nn.functional.csr import _inverse\n')
    assert list(private_imports(module)) == [
        'apnet_pyg.nn.functional.csr._inverse'
    ]
