# The first two commands on a fresh machine: `make demo`, then `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
ORACLE  := $(VENV)/.oracle-installed
# numba's compiled kernels: one per-user cache for make, the fp16emu command, Python and notebooks
# (~/.cache/fp16emu/numba, emu/jit.py); NUMBA_CACHE_DIR, when set, is honoured by all of them

.PHONY: demo test test-fast lint format test-oracle bench reproduce reproduce-fair1 reproduce-quick fuzz design-quick clean

SRC     := emu models validation tests benchmarks

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

$(ORACLE): $(STAMP)
	$(BIN)/pip install -q 'torch==2.13.0' 'mmasim==2.1.1'
	touch $@

# `fp16emu warm` first: every kernel the commands use, compiled once in parallel with a progress
# bar (seconds when the cache already has them), so neither the demo nor the tour compiles
demo: $(STAMP)
	$(BIN)/python -m validation.warm
	$(BIN)/python -m validation.demo

# Three processes, one test file each at a time (--dist loadfile): a file's numba compiles are done
# once, by one worker. On CI's two cores two workers were busy 83 % of the time (the rest waiting on
# subprocesses, Dask workers and signals); a third fills it: 13 min 13 s against 14 min 34 s from a
# fresh clone (BENCHMARKS.md, "Session 19: compiling"). TEST_JOBS=0 runs in one process.
# `fp16emu warm` first: the kernels every command uses, compiled once in two processes, so the
# test processes and the commands they start load them instead of compiling the same kernels at
# the same time (seconds when the cache has them; the tests of a cold cache use caches of their own)
TEST_JOBS ?= 3
test: $(STAMP) lint
	$(BIN)/python -m validation.warm
	$(BIN)/python -m pytest -q -m "not oracle" -n $(TEST_JOBS) --dist loadfile

# The inner loop: the tests that need no long numba compile and no emulated convolution sweep
# (public names, layering, formats and rounding, units, configs, metrics, verifiers): 477 tests in
# 24 s on 2 cores (3 workers) with the emulator's kernels cached (session 19, idle). `make test`
# remains the gate.
FAST_TESTS ?= tests/test_public_api.py tests/test_layering.py tests/test_import_graph.py \
	tests/emu/test_formats.py tests/emu/test_rounding.py tests/emu/test_operands.py \
	tests/models/test_units.py tests/models/test_tuning.py \
	tests/validation/configs tests/validation/metrics tests/validation/verify
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not oracle and not slow" -n $(TEST_JOBS) --dist loadfile $(FAST_TESTS)

# ruff (configured in pyproject.toml): lint and the formatter's check; `make format` applies both
lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

format: $(STAMP)
	$(BIN)/ruff check --fix $(SRC)
	$(BIN)/ruff format $(SRC)

test-oracle: $(ORACLE)
	$(BIN)/python -m pytest -q -m oracle tests/oracle

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_units.py
	$(BIN)/python benchmarks/bench_formats.py
	$(BIN)/python benchmarks/bench_conv.py

# The full reproduction of the 2022 study's measured lines (needs ../shared/reference).
MEASURED ?= ../shared/reference/fp16_study_raw_results
RUN_SETS ?= fair_1,fair_2,fair_3
reproduce: $(STAMP)
	$(BIN)/fp16emu study reproduce --measured $(MEASURED) --run-set $(RUN_SETS) --jobs 2 --out out/reproduce

# The issue-5 timing target: the whole of fair_1 (both GPUs, every combination, 3,424 lines) from an
# empty cache on 2 workers.
reproduce-fair1: $(STAMP)
	rm -rf out/reproduce-fair1
	time $(BIN)/fp16emu study reproduce --measured $(MEASURED) --run-set fair_1 --jobs 2 --show mismatches --out out/reproduce-fair1

# The quick validation-design sweep (docs/design.md): the 3 smallest 2022 suite tests, MI200 xdlops, every
# validation function and bug mutant, 4 fit + 4 evaluation seeds, 2 workers (13 s of CPU; 19 s wall on the
# shared 2-core machine at load average 5, BENCHMARKS.md).
design-quick: $(STAMP)
	$(BIN)/fp16emu design rocmlir_2022:3 --hw mi200 --kernel xdlops --seeds 4 --jobs 2 --no-progress

# The quick subset that CI runs inside `make test` (20 smallest tests, every combination), timed
# from an empty cache.
reproduce-quick: $(STAMP)
	rm -rf out/reproduce-quick
	time $(BIN)/fp16emu study reproduce --measured $(MEASURED) --run-set $(RUN_SETS) --smallest 20 --show mismatches --out out/reproduce-quick

# The long fuzz campaign (issue 13): the FUZZ_TESTS' hypothesis properties with FUZZ_SCALE
# times the examples `make test` runs; the counts (inputs, answers, slowest input) go to
# out/fuzz-counts.json, quoted in RELIABILITY.md.
FUZZ_SCALE ?= 50
FUZZ_TESTS ?= tests/validation/cli/test_fuzz.py tests/validation/cli/test_fuzz_arrays.py tests/validation/cli/test_fuzz_inputs.py tests/validation/identify/test_fuzz_identify.py tests/emu/test_fuzz_threads.py
# issue 41: the one writer of every output (links, FIFOs, folders, umasks, a write failing midway)
FUZZ_TESTS += tests/validation/shared/test_fuzz_writes.py
fuzz: $(STAMP)
	mkdir -p out
	FP16EMU_FUZZ_SCALE=$(FUZZ_SCALE) FP16EMU_FUZZ_REPORT=out/fuzz-counts.json $(BIN)/python -m pytest -q $(FUZZ_TESTS)
	cat out/fuzz-counts.json

clean:
	rm -rf $(VENV) .cache build *.egg-info
