r"""Offline access to the WordNet 3.0 corpus through :mod:`nltk`.

:func:`load_wordnet` returns an :class:`nltk.corpus.reader.WordNetCorpusReader`
without ever downloading anything. It looks in two places:

1. nltk's own data path (:obj:`nltk.data.path`), as filled by
   ``python -m nltk.downloader wordnet`` (plain or zipped ``corpora/wordnet``).
2. The WordNet 3.0 database that Debian/Ubuntu install under
   ``/usr/share/wordnet`` (packages ``wordnet-base`` and
   ``wordnet-sense-index``). That copy lacks the ``lexnames`` file nltk needs,
   so it is prepared once into a cache directory:
   ``<cache>/nltk_data/corpora/wordnet/`` holds copies of the Debian files
   plus a generated ``lexnames``, and ``<cache>/nltk_data`` is appended to
   :obj:`nltk.data.path`: :mod:`nltk` (>= 3.9) only opens corpus files below
   its data directories, resolves symbolic links before that check and
   refuses hard-linked files, so copies are the only form it accepts.

The cache directory is the environment variable ``APNET_PYG_CACHE`` if set,
else ``~/.cache/apnet_pyg``.
"""

import os
import os.path as osp
import shutil
import tempfile
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING, List, Optional, Tuple

if TYPE_CHECKING:  # nltk is imported when WordNet is read, not before: the
    # operators and the cosine graphs work where nltk is not installed.
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

#: Where Debian/Ubuntu's ``wordnet-base`` installs the WordNet 3.0 database.
DEBIAN_WORDNET_DIR = '/usr/share/wordnet'

#: The WordNet 3.0 lexicographer files as ``(number, name, syntactic
#: category)``, i.e. the content of WordNet's ``lexnames`` file (see the
#: ``lexnames(5WN)`` manual page). Syntactic categories: 1 noun, 2 verb,
#: 3 adjective, 4 adverb.
WORDNET30_LEXNAMES: Tuple[Tuple[int, str, int], ...] = (
    (0, 'adj.all', 3),
    (1, 'adj.pert', 3),
    (2, 'adv.all', 4),
    (3, 'noun.Tops', 1),
    (4, 'noun.act', 1),
    (5, 'noun.animal', 1),
    (6, 'noun.artifact', 1),
    (7, 'noun.attribute', 1),
    (8, 'noun.body', 1),
    (9, 'noun.cognition', 1),
    (10, 'noun.communication', 1),
    (11, 'noun.event', 1),
    (12, 'noun.feeling', 1),
    (13, 'noun.food', 1),
    (14, 'noun.group', 1),
    (15, 'noun.location', 1),
    (16, 'noun.motive', 1),
    (17, 'noun.object', 1),
    (18, 'noun.person', 1),
    (19, 'noun.phenomenon', 1),
    (20, 'noun.plant', 1),
    (21, 'noun.possession', 1),
    (22, 'noun.process', 1),
    (23, 'noun.quantity', 1),
    (24, 'noun.relation', 1),
    (25, 'noun.shape', 1),
    (26, 'noun.state', 1),
    (27, 'noun.substance', 1),
    (28, 'noun.time', 1),
    (29, 'verb.body', 2),
    (30, 'verb.change', 2),
    (31, 'verb.cognition', 2),
    (32, 'verb.communication', 2),
    (33, 'verb.competition', 2),
    (34, 'verb.consumption', 2),
    (35, 'verb.contact', 2),
    (36, 'verb.creation', 2),
    (37, 'verb.emotion', 2),
    (38, 'verb.motion', 2),
    (39, 'verb.perception', 2),
    (40, 'verb.possession', 2),
    (41, 'verb.social', 2),
    (42, 'verb.stative', 2),
    (43, 'verb.weather', 2),
    (44, 'adj.ppl', 3),
)

# Files nltk's reader opens while it is constructed (besides ``lexnames``);
# without any of them it cannot work at all.
_REQUIRED_FILES = (
    'data.noun',
    'data.verb',
    'data.adj',
    'data.adv',
    'index.noun',
    'index.verb',
    'index.adj',
    'index.adv',
    'noun.exc',
    'verb.exc',
    'adj.exc',
    'adv.exc',
)
# Files nltk only opens for some functions (sense keys, lemma counts):
# copied when present.
_OPTIONAL_FILES = ('index.sense', 'cntlist.rev', 'cntlist')

_INSTALL_HINT = (
    "Install it with 'apt-get install wordnet-base wordnet-sense-index' "
    "(Debian/Ubuntu), or with 'python -m nltk.downloader wordnet' on a "
    'machine with internet access.'
)


class WordNetNotFoundError(FileNotFoundError):
    r"""Raised by :func:`load_wordnet` when no WordNet 3.0 corpus exists."""


def default_cache_dir() -> str:
    r"""Returns the cache directory of :mod:`apnet_pyg`: the environment
    variable ``APNET_PYG_CACHE`` if set, else ``~/.cache/apnet_pyg``."""
    path = os.environ.get('APNET_PYG_CACHE')
    if path:
        return osp.abspath(osp.expanduser(path))
    return osp.join(osp.expanduser('~'), '.cache', 'apnet_pyg')


def lexnames_text() -> str:
    r"""Returns the content of WordNet 3.0's ``lexnames`` file: 45 lines
    ``NN<tab>name<tab>syntactic_category``."""
    return ''.join(
        f'{num:02d}\t{name}\t{category}\n'
        for num, name, category in WORDNET30_LEXNAMES
    )


def _missing_files(wordnet_dir: str) -> List[str]:
    return [
        name
        for name in _REQUIRED_FILES
        if not osp.isfile(osp.join(wordnet_dir, name))
    ]


def _is_prepared(corpus_dir: str) -> bool:
    # nltk's reader also needs `lexnames`, which Debian does not ship.
    return not _missing_files(corpus_dir) and osp.isfile(
        osp.join(corpus_dir, 'lexnames')
    )


def prepare_debian_wordnet(
    wordnet_dir: str = DEBIAN_WORDNET_DIR, cache_dir: Optional[str] = None
) -> str:
    r"""Prepares the Debian copy of WordNet 3.0 for :mod:`nltk` and returns
    the prepared corpus directory ``<cache_dir>/nltk_data/corpora/wordnet``.

    Nothing is done when that directory is already complete. Otherwise it is
    built in a temporary sibling directory and renamed into place, so that
    concurrent processes never see a half-written corpus.

    Args:
        wordnet_dir (str, optional): The directory holding the WordNet
            database files (:obj:`data.noun`, :obj:`index.noun`, ...).
            (default: :obj:`"/usr/share/wordnet"`)
        cache_dir (str, optional): The cache directory. If set to
            :obj:`None`, uses :func:`default_cache_dir`.
            (default: :obj:`None`)

    Raises:
        WordNetNotFoundError: If :obj:`wordnet_dir` lacks WordNet files.
    """
    cache_dir = default_cache_dir() if cache_dir is None else str(cache_dir)
    wordnet_dir = osp.abspath(str(wordnet_dir))
    corpora_dir = osp.join(cache_dir, 'nltk_data', 'corpora')
    target = osp.join(corpora_dir, 'wordnet')

    # A complete earlier preparation is reused (it holds copies, so it
    # outlives the Debian package).
    if _is_prepared(target):
        return target

    missing = _missing_files(wordnet_dir)
    if missing:
        raise WordNetNotFoundError(
            f"WordNet 3.0 was not found: '{wordnet_dir}' lacks "
            f'{", ".join(missing)}. {_INSTALL_HINT}'
        )

    os.makedirs(corpora_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix='.wordnet-', dir=corpora_dir)
    try:
        for name in _REQUIRED_FILES + _OPTIONAL_FILES:
            src = osp.join(wordnet_dir, name)
            if not osp.isfile(src):
                continue
            # Plain copies (36 MB): nltk (>= 3.9) resolves symbolic links
            # before checking that a file lies below its data path, refuses
            # hard-linked files, and files others may write to.
            shutil.copyfile(src, osp.join(staging, name))
        with open(osp.join(staging, 'lexnames'), 'w') as f:
            f.write(lexnames_text())
        for name in os.listdir(staging):
            os.chmod(osp.join(staging, name), 0o644)
        os.chmod(staging, 0o755)

        if not _is_prepared(target):
            if osp.lexists(target):  # A stale or broken earlier attempt.
                shutil.rmtree(target, ignore_errors=True)
            try:
                os.rename(staging, target)
            except OSError:
                # Another process finished first: keep its identical copy.
                if not _is_prepared(target):
                    raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _find_nltk_wordnet():
    nltk = _import_nltk()

    # `nltk.data.find` also looks for the zipped form
    # `corpora/wordnet.zip/wordnet/` that `nltk.downloader` leaves.
    try:
        root = nltk.data.find('corpora/wordnet')
    except LookupError:
        return None
    # A folder nltk's reader cannot open (e.g. Debian's files copied in by
    # hand, without lexnames) is passed over for the Debian copy.
    path = getattr(root, 'path', None)
    if osp.isdir(str(path)) and not _is_prepared(str(path)):
        return None
    return root


def _allow_nltk_data_dir(path: str) -> None:
    nltk = _import_nltk()

    # nltk (>= 3.9) only opens corpus files below a directory of
    # `nltk.data.path`; appending keeps the user's own data dirs first.
    if path not in nltk.data.path:
        nltk.data.path.append(path)


def _import_nltk():
    try:
        import nltk
    except ImportError:
        raise ImportError(
            'WordNet is read through nltk, which is not '
            'installed: pip install nltk'
        ) from None
    return nltk


def _make_reader(root) -> 'WordNetCorpusReader':
    _import_nltk()
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    with warnings.catch_warnings():
        # Without the Open Multilingual WordNet nltk warns that multilingual
        # functions are unavailable; English WordNet is all we need.
        warnings.filterwarnings('ignore', message='.*multilingual.*')
        return WordNetCorpusReader(root, None)


@lru_cache(maxsize=None)
def _load_wordnet(
    wordnet_dir: str, cache_dir: str, search_nltk_data: bool
) -> 'WordNetCorpusReader':
    if search_nltk_data:
        root = _find_nltk_wordnet()
        if root is not None:
            return _make_reader(root)
    try:
        root = prepare_debian_wordnet(wordnet_dir, cache_dir)
    except WordNetNotFoundError as e:
        if search_nltk_data:  # Say that both places were searched.
            raise WordNetNotFoundError(
                f"{e} (nltk's data path holds no 'corpora/wordnet' either.)"
            ) from None
        raise
    _allow_nltk_data_dir(osp.join(cache_dir, 'nltk_data'))
    return _make_reader(root)


def load_wordnet(
    wordnet_dir: str = DEBIAN_WORDNET_DIR,
    cache_dir: Optional[str] = None,
    search_nltk_data: bool = True,
) -> 'WordNetCorpusReader':
    r"""Returns a :class:`nltk.corpus.reader.WordNetCorpusReader` for WordNet
    3.0, without downloading anything.

    The corpus is taken from :mod:`nltk`'s data path if it is there
    (``python -m nltk.downloader wordnet``), else from the Debian/Ubuntu
    database in :obj:`wordnet_dir`, prepared once into
    ``<cache_dir>/nltk_data/corpora/wordnet`` (see
    :func:`prepare_debian_wordnet`). Readers are cached in-process per
    argument combination, so repeated calls are free.

    Args:
        wordnet_dir (str, optional): The Debian WordNet database directory.
            (default: :obj:`"/usr/share/wordnet"`)
        cache_dir (str, optional): The cache directory. If set to
            :obj:`None`, uses ``$APNET_PYG_CACHE`` or
            ``~/.cache/apnet_pyg``. (default: :obj:`None`)
        search_nltk_data (bool, optional): If set to :obj:`False`, ignores
            :mod:`nltk`'s data path and always uses :obj:`wordnet_dir`.
            (default: :obj:`True`)

    Raises:
        WordNetNotFoundError: If neither source holds WordNet; the message
            says what to install.
    """
    cache_dir = default_cache_dir() if cache_dir is None else str(cache_dir)
    return _load_wordnet(
        osp.abspath(str(wordnet_dir)),
        osp.abspath(osp.expanduser(cache_dir)),
        bool(search_nltk_data),
    )
