"""luabridge.ray.fit (data-parallel training on Ray actors) against a single-process Lua loop over
the same batches with the same optim, against a hand-derived SGD step, and its error reports."""
from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'luabridge[ray]')")

import luabridge  # noqa: E402
from luabridge import LuaError  # noqa: E402
from luabridge.model.handle import Model  # noqa: E402
from luabridge.ray import fit  # noqa: E402
from helpers import lua_fn  # noqa: E402

TIMEOUT = 300.0   # seconds a step may wait on the workers before fit gives up: only a hung one takes that long

# The single-process run fit must equal: optim[method] over the batches of `batch` rows in order.
_SINGLE_PROCESS = lua_fn("""function(module, criterion, method, config, inputs, targets, batch, epochs)
  require 'nn'; require 'optim'
  criterion = loadstring('return ' .. criterion)()
  config = loadstring('return ' .. config)()
  module:training()
  local params, grads = module:getParameters()
  local state, n = {}, inputs:size(1)
  for _ = 1, epochs do
    for first = 1, n, batch do
      local rows = {first, math.min(first + batch - 1, n)}
      local x, y = inputs[{rows}], targets[{rows}]
      optim[method](function()
        module:zeroGradParameters()
        local output = module:forward(x)
        local loss = criterion:forward(output, y)
        module:backward(x, criterion:backward(output, y))
        return loss, grads
      end, params, config, state)
    end
  end
  return module
end""")

MLP = "torch.manualSeed(7); return nn.Sequential():add(nn.Linear(4, 6)):add(nn.Tanh()):add(nn.Linear(6, 3))"
CLASSIFIER = MLP.replace("nn.Linear(6, 3))", "nn.Linear(6, 3)):add(nn.LogSoftMax())")
ROWS = 10


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _data(classes: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((ROWS, 4))
    y = rng.integers(1, 4, ROWS).astype(np.float64) if classes else rng.standard_normal((ROWS, 3))
    return x, y


def _dataset(x: np.ndarray, y: np.ndarray, input: str = "input", target: str = "target") -> "ray.data.Dataset":
    return ray.data.from_items([{input: x[i], target: y[i]} for i in range(len(x))], override_num_blocks=2)


def _lua_table(config: dict) -> str:
    return "{" + ", ".join(f"{k} = {v}" for k, v in config.items()) + "}"


def _single_process(model: Model, criterion: str, method: str, config: dict, x: np.ndarray,
                    y: np.ndarray, batch: int, epochs: int) -> dict[str, np.ndarray]:
    module = _SINGLE_PROCESS(luabridge.unwrap(model.build()), criterion, method, _lua_table(config),
                             x, y, batch, epochs)
    return Model.from_module(luabridge.wrap(module)).state()


def _assert_same_state(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)


OPTIMS = [("sgd", {"learningRate": 0.1, "momentum": 0.9}),
          ("adam", {"learningRate": 0.05})]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("method,config", OPTIMS, ids=[m for m, _ in OPTIMS])
def test_equals_single_process_run(workers: int, method: str, config: dict) -> None:
    """Two epochs of batches of 4 over 10 rows: the last batch of each epoch has 2 rows."""
    model, (x, y) = Model.from_lua(MLP), _data()
    trained = fit(model, "nn.MSECriterion()", _dataset(x, y), workers=workers, epochs=2,
                  batch_size=4, optim=method, config=config, timeout=TIMEOUT)
    want = _single_process(model, "nn.MSECriterion()", method, config, x, y, 4, 2)
    _assert_same_state(trained.state(), want)
    assert not np.allclose(want["1.weight"], model.state()["1.weight"])   # it did train


@pytest.mark.parametrize("criterion", ["nn.MSECriterion()", "nn.MSECriterion(false)"])
def test_one_sgd_step_by_hand(criterion: str) -> None:
    """A linear layer, one batch of 5 rows on 2 workers (shards of 3 and 2): the step is
    W - lr * dL/dW with L the batch's mean (or sum) of squared errors, derived in numpy."""
    model = Model.from_lua("torch.manualSeed(1); return nn.Linear(4, 3)")
    x, y = (a[:5] for a in _data())
    losses: list[float] = []
    trained = fit(model, criterion, _dataset(x, y), workers=2, batch_size=5, optim="sgd",
                  config={"learningRate": 0.1}, timeout=TIMEOUT, on_step=lambda e, s, loss: losses.append(loss))
    w, b = model.state()["weight"], model.state()["bias"]
    error = x @ w.T + b - y
    scale = 1.0 / error.size if criterion == "nn.MSECriterion()" else 1.0
    np.testing.assert_allclose(losses, [scale * np.sum(error ** 2)], rtol=1e-12)
    state = trained.state()
    np.testing.assert_allclose(state["weight"], w - 0.1 * scale * 2 * error.T @ x, rtol=1e-12)
    np.testing.assert_allclose(state["bias"], b - 0.1 * scale * 2 * error.sum(0), rtol=1e-12)


def test_empty_shards_order_and_column_names() -> None:
    """Batches of 3 over 10 rows on 2 workers: the last batch (1 row) leaves worker 1 nothing;
    ClassNLLCriterion over 1-based class targets; columns x and y taken beside an id column. The
    rows stay in order although each block goes through its own column-selecting task (this test
    failed, by chance of those tasks' timing, before fit asked Ray Data to keep the order)."""
    model, (x, y) = Model.from_lua(CLASSIFIER), _data(classes=True)
    config = {"learningRate": 0.2, "momentum": 0.5}
    rows = [{"id": i, "x": x[i], "y": y[i]} for i in range(ROWS)]
    trained = fit(model, "nn.ClassNLLCriterion()", ray.data.from_items(rows, override_num_blocks=2),
                  workers=2, batch_size=3, config=config, input="x", target="y", timeout=TIMEOUT)
    _assert_same_state(trained.state(),
                       _single_process(model, "nn.ClassNLLCriterion()", "sgd", config, x, y, 3, 1))


def test_criterion_as_a_model() -> None:
    """A criterion given as a Model: the same run as with its constructor."""
    criterion = Model.from_module(luabridge.nn.MSECriterion())
    model, (x, y) = Model.from_lua(MLP), _data()
    trained = fit(model, criterion, _dataset(x, y), workers=2, batch_size=4,
                  config={"learningRate": 0.1}, timeout=TIMEOUT)
    _assert_same_state(trained.state(), _single_process(model, "nn.MSECriterion()", "sgd",
                                                        {"learningRate": 0.1}, x, y, 4, 1))


def _fails_fast(error: type[Exception], match: str, *args, **kwargs) -> pytest.ExceptionInfo:
    """fit raises `error` (not the TimeoutError of waiting on a worker that will never answer)."""
    with pytest.raises(error, match=match) as info:
        fit(*args, timeout=TIMEOUT, **kwargs)
    return info


def test_lua_error_in_a_worker_is_a_lua_error() -> None:
    """Inputs of 5 features for a model taking 4: the Lua message, as the model gives it here."""
    model = Model.from_lua(MLP)
    x, y = np.ones((4, 5)), np.ones((4, 3))
    with pytest.raises(LuaError) as here:
        model.predict(x[:2])   # a worker's shard
    info = _fails_fast(LuaError, "worker [01] ", model, "nn.MSECriterion()", _dataset(x, y), workers=2, batch_size=4)
    (mismatch,) = [line for line in here.value.message.splitlines() if "size mismatch" in line]
    assert mismatch in info.value.message.splitlines()


# A layer passing its input on that, on an input above 100, exits its process ('exit': a worker
# that dies) or spins for ever ('spin': a worker that hangs).
_FAIL_LAYER = """local FailOn, parent = torch.class('nn.FailOn', 'nn.Module')
function FailOn:__init(how)
  parent.__init(self)
  self.how = how
end
function FailOn:updateOutput(input)
  if input:max() > 100 then
    if self.how == 'exit' then os.exit(3) end
    while true do end
  end
  self.output = input
  return self.output
end
function FailOn:updateGradInput(input, gradOutput)
  self.gradInput = gradOutput
  return self.gradInput
end"""


def _failing_on_row_7(how: str, **kwargs) -> pytest.ExceptionInfo:
    """fit with workers=2, batch_size=4 where row 7 (worker 1's shard of step 1) fails `how`."""
    model = Model.from_lua(f"require 'FailOn'; return nn.Sequential():add(nn.FailOn('{how}')):add(nn.Linear(4, 3))",
                           files={"FailOn.lua": _FAIL_LAYER})
    x, y = _data()
    x[7, 0] = 1000.0
    with pytest.raises(Exception) as info:
        fit(model, "nn.MSECriterion()", _dataset(x, y), workers=2, batch_size=4, **kwargs)
    return info


def test_a_worker_that_dies_is_reported() -> None:
    info = _failing_on_row_7("exit", timeout=TIMEOUT)
    assert info.type is RuntimeError and "worker 1 died (epoch 0, step 1)" in str(info.value)


def test_a_worker_that_hangs_times_out() -> None:
    info = _failing_on_row_7("spin", timeout=3.0)
    assert info.type is TimeoutError and "gave no result within 3.0 s" in str(info.value)


def test_a_python_error_in_a_worker_is_reported() -> None:
    x, y = _data()
    strings = ray.data.from_items([{"input": x[i], "target": "abc"} for i in range(ROWS)],
                                 override_num_blocks=2)
    _fails_fast(RuntimeError, "worker [01] .*TypeError.*unsupported dtype", Model.from_lua(MLP),
                "nn.MSECriterion()", strings, workers=2, batch_size=4)


def test_bad_arguments() -> None:
    model, (x, y) = Model.from_lua(MLP), _data()
    with pytest.raises(KeyError, match="no column 'target'"):
        fit(model, "nn.MSECriterion()", _dataset(x, y, target="label"))
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        fit(model, "nn.MSECriterion()", _dataset(x, y), workers=0)
    with pytest.raises(TypeError, match="must be a luabridge.Model"):
        fit(model.module(), "nn.MSECriterion()", _dataset(x, y))
    _fails_fast(LuaError, "optim.nosuch is not an optim method", model, "nn.MSECriterion()",
                _dataset(x, y), optim="nosuch")
