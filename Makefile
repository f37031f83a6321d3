# make run: set up and run the demo.  make test: set up and run the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	touch $(STAMP)

run: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest -q tests

bench: $(STAMP)
	$(PY) bench/tensor_ops.py

clean:
	rm -rf $(VENV) build *.egg-info
