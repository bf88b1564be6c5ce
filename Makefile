# Two commands for a fresh machine: `make repro` (the embedded default) and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PROFILE ?=

.PHONY: repro test unit paper-smoke lint check snakemake push pull bench gpu-check gpu-wheels profile mutation clean-venv

$(STAMP): requirements.txt constraints.txt pyproject.toml
	$(PY) -m venv $(VENV)
	# One pip call with the constraints file, so nothing can pull a CUDA torch.
	$(BIN)/pip install --quiet -c constraints.txt -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

## check: validate the whole params.yaml (every problem, one line each) before anything runs, then print
## the estimated time of the run here, per study (ENGINE=snakemake for Snakemake's; a few seconds to measure)
ENGINE ?= dvc
check: $(STAMP) profile
	$(BIN)/python -m emergence check --estimate $(ENGINE)

## repro: install, check params and say the estimated time, run the whole pipeline with DVC, print where the
## report is; PROFILE=full adds what the default leaves out (binding's second seed, aid variants, LLC)
repro: check
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	@echo "Report: file://$(CURDIR)/reports/index.html"

## snakemake: the same pipeline through Snakemake (CORES=2 by default)
CORES ?= 2
snakemake: ENGINE = snakemake
snakemake: check
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/snakemake --cores $(CORES)
	@echo "Report: file://$(CURDIR)/reports/index.html"

## profile: with PROFILE=paper (or tiny), write that profile's params into params.yaml
profile: $(STAMP)
ifneq ($(PROFILE),)
	$(BIN)/python -m emergence profile $(PROFILE)
endif

## test: the unit and pipeline tests on WORKERS processes, each test file whole on one worker, in conftest.py's
## order; unit: without the pipeline tests (a few minutes); paper-smoke: the paper profile's shapes through
## every stage on this CPU, alone (profiles/paper_smoke.yaml; Snakemake on 2 cores; CI runs it after test)
## Bytecode is written whatever the shell says (PYTHONDONTWRITEBYTECODE set): pytest keeps each test module's
## rewritten asserts there, which every worker and every pytest the tests start would otherwise redo (~10 s each)
WORKERS ?= 2
TESTENV := PATH="$(CURDIR)/$(BIN):$$PATH" PYTHONDONTWRITEBYTECODE=
test: $(STAMP)
	$(TESTENV) $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder -m "not paper_smoke"
unit: $(STAMP)
	$(TESTENV) $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile -m "not pipeline"
paper-smoke: $(STAMP)
	$(TESTENV) $(BIN)/python -m pytest -q -n 1 --dist loadfile -m paper_smoke tests/pipeline/test_paper_smoke.py

## lint: ruff lint and format check (configuration in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## push / pull: share artifacts through the default DVC remote (docs/sharing.md); a missing one says how to set it
push: $(STAMP)
	$(BIN)/python -m emergence remote --for push
	$(BIN)/dvc push
pull: $(STAMP)
	$(BIN)/python -m emergence remote --for pull
	$(BIN)/dvc pull

## bench: every benchmark, one table (reports/bench.json); BENCH_ARGS="--default-run DIR" adds default minutes
bench: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench $(BENCH_ARGS)

## gpu-check: on a machine with a GPU, under that machine's own python and torch (docs/gpu.md): writes
## reports/gpu_check.json and docs/bench.md's GPU section. On a CPU: make gpu-check GPU_ARGS="--device cpu --smoke"
GPU_PYTHON ?= python3
gpu-check:
	PYTHONPATH="$(CURDIR)/src:$(CURDIR)" $(GPU_PYTHON) -m bench.gpu $(GPU_ARGS)

## gpu-wheels: here, the pinned pure-Python wheels the GPU check imports (bench/pins.py), into $(GPU_WHEELS)
## (git-ignored): a GPU call carries that folder and runs bench/with_pins.sh $(GPU_WHEELS) python3 -m bench.gpu ...
GPU_WHEELS ?= .gpu-wheels
gpu-wheels: $(STAMP)
	PYTHONPATH="$(CURDIR)/src:$(CURDIR)" $(BIN)/python -m bench.pins wheels $(GPU_WHEELS)

## mutation: which mutants of the whole package the unit suite kills (mutmut; hours on 2 cores, not in CI);
## writes the per-module table into docs/testing.md. `mutants/` keeps the results, tests/mutation_ledger.tsv keeps
## them across checkouts (after a stopped run: python tests/mutation_ledger.py save): a rerun checks what changed.
## FILES="src/emergence/core/io.py ...": only those files, against the test files that run them (tests/mutation_scope.py;
## its map of the suite is made first when mutants/ has none: ~5 min on 2 cores)
SHARED ?= $(abspath $(CURDIR)/../shared)
FILES ?=
mutation: $(STAMP)
ifeq ($(FILES),)
	mkdir -p mutants/.dvc  # mutmut copies .dvc/config (the remote tests read it), not its folder
	"$(CURDIR)/$(BIN)/python" tests/mutation_ledger.py restore
	EMERGENCE_SHARED="$(SHARED)" "$(CURDIR)/$(BIN)/mutmut" run --max-children $(WORKERS); \
	  status=$$?; "$(CURDIR)/$(BIN)/python" tests/mutation_ledger.py save && exit $$status
else
	EMERGENCE_SHARED="$(SHARED)" "$(CURDIR)/$(BIN)/python" tests/mutation_scope.py run $(FILES) --max-children $(WORKERS)
endif
	"$(CURDIR)/$(BIN)/python" tests/mutation_table.py --write docs/testing.md

clean-venv:
	rm -rf $(VENV)
