PYTHON ?= python3

.PHONY: install test lint format quickstart bench

install:
	$(PYTHON) -m pip install -r requirements.txt

test:
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check onmt_cont

format:
	$(PYTHON) -m ruff format onmt_cont tests bench

quickstart:
	bash docs/quickstart.sh

bench:
	$(PYTHON) bench/train_speed.py -quick
	$(PYTHON) bench/embeddings_speed.py
