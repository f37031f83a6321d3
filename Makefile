# make run: set up and run the main demo (it ends by saving the trained model to lenet_digits.t7).
# make test: set up and run the tests.  make fuzz: the dedicated fuzz runs (100,000 cases each: .t7 readers, tensor API and storages, every nn class,
# image files, conversions of malformed modules, interrupts).  make image: the CPU runtime image (podman or docker).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test bench fuzz clean image

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# also builds luabridge._luajit21, lupa's module over a LuaJIT with LUA52COMPAT as Torch7's (setup.py)
	$(PY) -m pip install -q -e '.[test,examples]' --config-settings editable_mode=compat
	touch $(STAMP)

run: $(STAMP)
	$(PY) examples/demo.py
	$(PY) examples/train_digits.py

# -rsfE lists why each skipped test skipped (no ../shared beside the clone, no GPU, ...), then each failure and error by name
test: $(STAMP)
	$(PY) -m pytest -q -rsfE tests

fuzz: $(STAMP)
	$(PY) tests/fuzz_t7.py --cases 100000
	$(PY) tests/fuzz_tensor.py --cases 100000
	$(PY) tests/fuzz_nn.py --cases 100000
	$(PY) tests/fuzz_image.py --cases 100000
	$(PY) tests/fuzz_convert.py --cases 100000
	$(PY) tests/fuzz_interrupt.py --cases 100000

bench: $(STAMP)
	$(PY) bench/tensor_ops.py
	$(PY) bench/nn_models.py
	$(PY) bench/t7_io.py
	$(PY) bench/executor.py
	$(PY) bench/gemm_threads.py
	if $(PY) -c 'import torch' 2>/dev/null; then $(PY) bench/real_models.py && $(PY) bench/torch_bridge.py; \
	else echo 'bench/real_models.py and torch_bridge.py skipped: they run beside PyTorch (pip install torch==2.13.0)'; fi
	if $(PY) -c 'import ray' 2>/dev/null; then $(PY) bench/scale_out.py; \
	else echo "bench/scale_out.py skipped: it needs Ray (pip install 'luabridge[ray]')"; fi

# make image: the CPU runtime image `luabridge` (docker/README.md), with podman, else docker.
# PIP_CERT, where set, is the CA bundle the build's pip is given (a proxy that re-signs TLS).
image:
	engine=$$(command -v podman || command -v docker) || { echo 'make image needs podman or docker' >&2; exit 1; }; \
	$$engine build -f docker/Dockerfile $${PIP_CERT:+--secret id=ca,src=$$PIP_CERT} -t luabridge .

clean:
	rm -rf $(VENV) build *.egg-info
