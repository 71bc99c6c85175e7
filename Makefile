# The two commands of a fresh clone (see README.md):
#   make demo   prepares the environment and runs the main job (offline)
#   make test   prepares the environment and runs the test suite
#   make lint   ruff's lint and format checks (CI runs them first)
# Both are idempotent: the environment is prepared once and then reused.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
# The pinned CPU build: an unpinned or newer torch pulls GBs of CUDA packages.
TORCH := torch==2.13.0
DEMO_OUT ?= runs/awa2

.PHONY: demo test lint env clean-env

demo: env
	$(VENV)/bin/apnet-zsl pipeline --dataset AWA2 --out $(DEMO_OUT) --overwrite

# pytest's exit code 5 (no test collected) is a failure here.
test: env
	@$(PYTHON) -m pytest -q; status=$$?; \
	if [ $$status -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi; \
	exit $$status

# ruff: the linter (with import order) and the formatter, both configured in
# pyproject.toml; CI runs this before the tests.
lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

env: $(VENV)/.ready

# The Makefile too: it holds the torch pin.
$(VENV)/.ready: pyproject.toml scripts/install_wordnet.sh Makefile
	@python3 -m venv $(VENV) 2>/dev/null || { \
	    echo "error: 'python3 -m venv' failed: install Python's venv module (Debian/Ubuntu: apt-get install python3-venv) and run the make command again" >&2; \
	    rm -rf $(VENV); exit 1; }
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q $(TORCH)
	$(PYTHON) -m pip install -q -e ".[test]"
	scripts/install_wordnet.sh $(PYTHON)
	@touch $@

clean-env:
	rm -rf $(VENV)
