PYTHON ?= python3

.PHONY: install test test-all lint format quickstart bench

install:
	$(PYTHON) -m pip install -r requirements.txt

test:
	$(PYTHON) -m pytest -q -m "not slow"

test-all:
	$(PYTHON) -m pytest -q -m "not slow"
	$(PYTHON) -m pytest -q -m slow

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy

format:
	$(PYTHON) -m ruff format .

quickstart:
	bash docs/quickstart.sh

bench:
	$(PYTHON) lab/bench/train_speed.py -quick
	$(PYTHON) lab/bench/embeddings_speed.py
