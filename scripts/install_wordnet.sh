#!/usr/bin/env bash
# Makes WordNet 3.0 available to apnet_pyg, offline afterwards:
#   1. already there (Debian's packages, or nltk's data dir): nothing to do;
#   2. root or password-less sudo: apt-get install wordnet-base
#      wordnet-sense-index;
#   3. otherwise: download the two Debian packages without installing them
#      (no root needed) and prepare them into ~/nltk_data, where nltk looks.
# Usage: scripts/install_wordnet.sh PYTHON   (the venv's python)
set -euo pipefail
PYTHON=${1:-python3}
PACKAGES="wordnet-base wordnet-sense-index"

found() {
    "$PYTHON" -c 'from apnet_pyg.graph.wordnet_corpus import load_wordnet; load_wordnet()' \
        >/dev/null 2>&1
}

if found; then
    exit 0
fi

# A failed step must reach the error message at the end, not stop the
# script (set -e): the installation runs as one function, its status
# ignored, and the final check decides.
install() {
    export DEBIAN_FRONTEND=noninteractive
    if [ "$(id -u)" = 0 ]; then
        SUDO=""
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        SUDO="none"
    fi

    if [ "$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing WordNet 3.0: ${SUDO:+$SUDO }apt-get install $PACKAGES"
        $SUDO apt-get install -y -q --no-install-recommends $PACKAGES >/dev/null \
            || { $SUDO apt-get update -q >/dev/null \
                 && $SUDO apt-get install -y -q --no-install-recommends \
                      $PACKAGES >/dev/null; }
    elif command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then
        echo "installing WordNet 3.0 without root: apt-get download $PACKAGES into ~/nltk_data"
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/root"
        apt_options=(-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
                     -o "Debug::NoLocking=1")
        (cd "$work" && { apt-get download $PACKAGES >/dev/null 2>&1 \
            || { apt-get "${apt_options[@]}" update -q >/dev/null \
                 && apt-get "${apt_options[@]}" download $PACKAGES >/dev/null; }; })
        for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
        "$PYTHON" -c 'import sys; from apnet_pyg.graph.wordnet_corpus import prepare_debian_wordnet; prepare_debian_wordnet(sys.argv[1], sys.argv[2])' \
            "$work/root/usr/share/wordnet" "$HOME"
    fi
}
install || echo "warning: installing WordNet 3.0 failed (see above)" >&2

if ! found; then
    cat >&2 <<'MSG'
error: WordNet 3.0 is not available and could not be installed here.
  With root:     apt-get install wordnet-base wordnet-sense-index   (Debian/Ubuntu)
  With internet: python -m nltk.downloader wordnet
Then run the make command again.
MSG
    exit 1
fi
