# Two commands do all the set-up on a fresh Debian machine with Python 3.11+ (see README.md):
#   make evolve PROBLEM=fp8_gemm GENERATIONS=5     the main job (SIMULATE=1: without a GPU, made-up timings)
#   make test                                       the tests (what CI runs)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PROBLEM ?= fp8_gemm
TARGET ?= cuda
GENERATIONS ?= 5
TEST_WORKERS ?= 4

.PHONY: setup test lint evolve

$(BIN)/ksci: requirements.lock requirements-dev.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip "setuptools>=77"  # 77: the SPDX license string of pyproject.toml
	# The locks were resolved and tested together; install them exactly, without re-resolving.
	$(BIN)/pip install -q --no-deps -r requirements-dev.lock
	# torch: the CPU build for the CPU-side tests; GPU hosts use their own CUDA or ROCm build.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $@

# The embedded Prefect API's database (ksci.embedded: PREFECT_HOME defaults to data/prefect), created and migrated
# once here rather than by the first `ksci evolve` (the API answered after 8.9-9.5 s with a new database, 3.5-4.1 s
# with this one, on 2 cores); again after each install, as a new Prefect may bring migrations. A PREFECT_HOME or
# PREFECT_API_URL of the user's is left alone.
PREFECT_DB := data/prefect/prefect.db
$(PREFECT_DB): $(BIN)/ksci
	@echo "creating the embedded Prefect API's database ($@)"
	@mkdir -p $(@D) && PREFECT_HOME=$(CURDIR)/data/prefect $(BIN)/prefect server database upgrade -y >/dev/null
	@touch $@

setup: $(BIN)/ksci $(PREFECT_DB)
	@command -v hipcc >/dev/null || { echo "installing Debian's hipcc (HIP compile checks for gfx940)"; \
	  apt-get update -qq && apt-get install -y -qq hipcc >/dev/null; }
	@command -v clang++-19 >/dev/null && command -v ld.lld-19 >/dev/null && test -x /usr/lib/llvm-19/bin/llvm-as || \
	  { echo "installing Debian's clang-19, lld-19, llvm-19 (HIP compile checks for gfx942, MI300X)"; \
	  apt-get update -qq && apt-get install -y -qq clang-19 lld-19 llvm-19 >/dev/null; }
	@command -v chromium >/dev/null || { echo "installing Debian's chromium (report screenshot test)"; \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "installing Debian's postgresql (multi-worker check on PostgreSQL)"; \
	  apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; }
	@# hipify-perl where the distribution ships it (Debian 12 does not: torch's converter runs there, README.md).
	@command -v hipify-perl >/dev/null || ! apt-cache show hipify-perl >/dev/null 2>&1 || \
	  { echo "installing hipify-perl (ksci port: CUDA to HIP)"; apt-get install -y -qq hipify-perl >/dev/null; }

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# Four test processes on CI's two cores (pytest-xdist): many tests wait on servers, workers and child processes;
# a file's tests stay in one process (--dist loadfile), so its module fixtures run once.
test: setup lint
	KSCI_REQUIRE_TOOLCHAINS=$${KSCI_REQUIRE_TOOLCHAINS:-1} $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# SIMULATE=1: no GPU, made-up timings (every number the run shows is marked simulated); SIMULATE=FILE.json:
# replay the timings recorded in FILE.json (benchmarks/record_space.py). Unset: real GPUs. KSCI_VIA_MAKE=1 makes
# ksci name SIMULATE=1 rather than --simulate in its refusal. When ksci refuses (rc 2 bad input, 3 no GPU), its
# one line says why; make then adds its own "make: *** [Makefile:NN: evolve] Error N", which says only the code.
evolve: setup
	KSCI_VIA_MAKE=1 $(BIN)/ksci evolve --problem $(PROBLEM) --target $(TARGET) --generations $(GENERATIONS) \
		$(if $(SIMULATE),$(if $(filter 1 yes true,$(SIMULATE)),--simulate,--simulate $(SIMULATE)))
