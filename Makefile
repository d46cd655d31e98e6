# `make test` and `make demo` work on a fresh machine: they create the virtual
# environment and install the package into it when needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: test test-slow test-extras demo check-readme bench clean install-extras

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# The optional extras (apache-beam: the Beam pipelines; keras-hub: its export format;
# tensorflow-hub + tf_keras and ai-edge-litert: the loaders of the tfhub and litert
# exports; tf2onnx + onnxruntime: the onnx export and its runtime; optuna: bert-search),
# so that their tests run too; without them those tests skip and `make test` stays lean
# (and proves that a plain install works: tests/test_plain_install.py). (torch +
# transformers, the huggingface-test extra, are gigabytes: docs/export_formats.md says
# how to run that test.)
install-extras: $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,beam,keras-hub,tfhub-test,litert-test,onnx,search]"

# -n auto: one pytest worker a CPU core (pytest-xdist), at most 4 (each worker holds its
# own TensorFlow, about 1.5 GB). On the 2-core AMD EPYC the suite took 27 minutes before the
# heaviest 29 tests (about 1,500 test-seconds) moved to `make test-slow` (2026-11-28).
# The tests run in a random order (pytest-randomly), its seed printed first: rerun a
# failing order with `make test TEST_ORDER=<seed>`.
ifndef TEST_ORDER
TEST_ORDER := $(shell $(PYTHON) -c "import random; print(random.randrange(1 << 31))")
endif
test: $(STAMP)
	@echo "test order: --randomly-seed=$(TEST_ORDER)"
	$(PY) -m pytest -q -m "not slow" -n auto --maxprocesses=4 --durations=10 \
		-p randomly --randomly-seed=$(TEST_ORDER) tests

# The tests that use an optional package (marked @pytest.mark.extras), with every extra
# installed: CI runs this after `make test` on the plain install.
test-extras: install-extras
	@echo "test order: --randomly-seed=$(TEST_ORDER)"
	$(PY) -m pytest -q -m "extras and not slow" -n auto --maxprocesses=4 \
		-p randomly --randomly-seed=$(TEST_ORDER) tests

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow tests

demo: $(STAMP)
	$(PY) demo/run_demo.py --output_dir demo_output

# Runs every command of the README on stand-ins made from the demo's output.
check-readme: install-extras
	test -f demo_output/pretraining/bert_model.ckpt.index || $(MAKE) demo
	$(PY) demo/check_readme.py --demo_dir demo_output

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
