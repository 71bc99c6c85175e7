import os
import os.path as osp
import shutil

import pytest

from apnet_pyg.graph.wordnet_corpus import (
    DEBIAN_WORDNET_DIR,
    WORDNET30_LEXNAMES,
    WordNetNotFoundError,
    default_cache_dir,
    lexnames_text,
    load_wordnet,
    prepare_debian_wordnet,
)

has_debian_wordnet = osp.isfile(osp.join(DEBIAN_WORDNET_DIR, 'data.noun'))
needs_debian_wordnet = pytest.mark.skipif(
    not has_debian_wordnet,
    reason=f"no WordNet database in '{DEBIAN_WORDNET_DIR}' "
    f'(apt-get install wordnet-base wordnet-sense-index)',
)

# Syntactic category of each data file, as used in the `lexnames` table.
CATEGORY_OF_DATA_FILE = {'noun': 1, 'verb': 2, 'adj': 3, 'adv': 4}


def test_lexnames_text():
    lines = lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == '00\tadj.all\t3'
    assert lines[3] == '03\tnoun.Tops\t1'
    assert lines[28] == '28\tnoun.time\t1'
    assert lines[44] == '44\tadj.ppl\t3'
    for i, line in enumerate(lines):
        num, name, category = line.split('\t')
        assert int(num) == i
        assert (
            name.split('.')[0]
            == {1: 'noun', 2: 'verb', 3: 'adj', 4: 'adv'}[int(category)]
        )


@needs_debian_wordnet
def test_lexnames_match_data_files():
    # Every lex_filenum in data.<pos> names a file of that category, and
    # every one of the 45 files is used.
    used = set()
    for pos, category in CATEGORY_OF_DATA_FILE.items():
        with open(osp.join(DEBIAN_WORDNET_DIR, f'data.{pos}'), 'rb') as f:
            for line in f:
                if line.startswith(b' '):  # License header.
                    continue
                lex_filenum = int(line.split(b' ', 2)[1])
                assert WORDNET30_LEXNAMES[lex_filenum][2] == category
                used.add(lex_filenum)
    assert used == set(range(45))


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv('APNET_PYG_CACHE', str(tmp_path))
    assert default_cache_dir() == str(tmp_path)
    monkeypatch.delenv('APNET_PYG_CACHE')
    assert default_cache_dir() == osp.join(
        osp.expanduser('~'), '.cache', 'apnet_pyg'
    )


@needs_debian_wordnet
def test_load_wordnet_from_scratch(tmp_path):
    wordnet = load_wordnet(cache_dir=tmp_path, search_nltk_data=False)
    assert load_wordnet(cache_dir=tmp_path, search_nltk_data=False) is wordnet

    corpus_dir = tmp_path / 'nltk_data' / 'corpora' / 'wordnet'
    assert (corpus_dir / 'lexnames').read_text() == lexnames_text()
    assert (corpus_dir / 'data.noun').is_file()
    assert not (corpus_dir / 'data.noun').is_symlink()

    assert wordnet.get_version() == '3.0'
    assert wordnet.synset('entity.n.01').lexname() == 'noun.Tops'
    assert wordnet.synset('dog.n.01').lexname() == 'noun.animal'
    assert wordnet.synset('run.v.01').lexname() == 'verb.motion'
    # Files only some functions need: sense index and lemma counts.
    assert (
        wordnet.lemma_from_key('dog%1:05:00::').synset().name() == 'dog.n.01'
    )
    assert wordnet.synset('dog.n.01').lemmas()[0].count() > 0

    # A second preparation reuses the copy.
    mtime = os.stat(corpus_dir / 'lexnames').st_mtime_ns
    assert prepare_debian_wordnet(cache_dir=tmp_path) == str(corpus_dir)
    assert os.stat(corpus_dir / 'lexnames').st_mtime_ns == mtime


@needs_debian_wordnet
def test_prepare_repairs_incomplete_copy(tmp_path):
    corpus_dir = tmp_path / 'nltk_data' / 'corpora' / 'wordnet'
    corpus_dir.mkdir(parents=True)
    (corpus_dir / 'data.noun').write_text('truncated')
    prepare_debian_wordnet(cache_dir=tmp_path)
    assert (corpus_dir / 'lexnames').is_file()
    assert (corpus_dir / 'index.noun').is_file()
    assert (corpus_dir / 'data.noun').stat().st_size > 10_000_000


def test_missing_wordnet_error(tmp_path):
    empty_dir = tmp_path / 'empty'
    empty_dir.mkdir()
    with pytest.raises(WordNetNotFoundError) as info:
        load_wordnet(
            wordnet_dir=empty_dir,
            cache_dir=tmp_path / 'cache',
            search_nltk_data=False,
        )
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert 'apt-get install wordnet-base wordnet-sense-index' in message
    assert 'python -m nltk.downloader wordnet' in message
    assert str(empty_dir) in message
    assert not (
        tmp_path / 'cache' / 'nltk_data' / 'corpora' / 'wordnet'
    ).exists()


def _debian_files_without_lexnames(corpus_dir):
    # Debian's files copied in by hand: everything but `lexnames`.
    corpus_dir.mkdir(parents=True)
    for name in os.listdir(DEBIAN_WORDNET_DIR):
        if osp.isfile(osp.join(DEBIAN_WORDNET_DIR, name)):
            shutil.copyfile(
                osp.join(DEBIAN_WORDNET_DIR, name), corpus_dir / name
            )


@needs_debian_wordnet
def test_prepare_repairs_copy_without_lexnames(tmp_path):
    corpus_dir = tmp_path / 'nltk_data' / 'corpora' / 'wordnet'
    _debian_files_without_lexnames(corpus_dir)
    assert prepare_debian_wordnet(cache_dir=tmp_path) == str(corpus_dir)
    assert (corpus_dir / 'lexnames').read_text() == lexnames_text()


@needs_debian_wordnet
def test_nltk_folder_without_lexnames_is_passed_over(tmp_path, monkeypatch):
    nltk = pytest.importorskip('nltk')
    _debian_files_without_lexnames(tmp_path / 'nltk' / 'corpora' / 'wordnet')
    monkeypatch.setattr(nltk.data, 'path', [str(tmp_path / 'nltk')])
    wordnet = load_wordnet(cache_dir=tmp_path / 'cache')
    assert wordnet.synset('dog.n.01').lexname() == 'noun.animal'
