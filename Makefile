# Two commands for a fresh machine: `make repro` (the embedded default) and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PROFILE ?=

.PHONY: repro test snakemake push pull bench profile clean-venv

$(STAMP): requirements.txt constraints.txt pyproject.toml
	$(PY) -m venv $(VENV)
	# One pip call with the constraints file, so nothing can pull a CUDA torch.
	$(BIN)/pip install --quiet -c constraints.txt -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

## repro: install, run the whole pipeline with DVC, print where the report is
repro: $(STAMP) profile
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/dvc repro
	@echo "Report: file://$(CURDIR)/reports/index.html"

## snakemake: the same pipeline through Snakemake (CORES=2 by default)
CORES ?= 2
snakemake: $(STAMP) profile
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES)
	@echo "Report: file://$(CURDIR)/reports/index.html"

## profile: with PROFILE=paper (or tiny), write that profile's params into params.yaml
profile: $(STAMP)
ifneq ($(PROFILE),)
	$(BIN)/python -m emergence.core.profile $(PROFILE)
endif

## test: the whole test suite
test: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q

## push / pull: share artifacts through the DVC remote (see README)
push: $(STAMP)
	$(BIN)/dvc push
pull: $(STAMP)
	$(BIN)/dvc pull

## bench: throughput of our Transformer against Hugging Face GPT-2
bench: $(STAMP)
	$(BIN)/python bench/train_throughput.py

clean-venv:
	rm -rf $(VENV)
