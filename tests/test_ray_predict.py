"""luabridge.ray.Predictor on a local Ray cluster (2 CPUs): Ray Data's results against
model.predict in one process and against numpy float64, column names, chunking, table inputs and
outputs, BLAS threads inside the actors, Lua errors from a worker, and examples/ray_inference.py."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is missing (pip install 'luabridge[ray]'): luabridge.ray needs it")

import numpy as np  # noqa: E402

import luabridge  # noqa: E402
from luabridge.ray import Predictor  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60   # a Dataset making no progress for this long fails (ExecutionTimeoutError)

CONVNET = """
torch.manualSeed(3)
local model = nn.Sequential()
model:add(nn.SpatialConvolution(1, 4, 3, 3)):add(nn.ReLU()):add(nn.SpatialMaxPooling(2, 2, 2, 2))
model:add(nn.View(4 * 3 * 3)):add(nn.Linear(4 * 3 * 3, 5))
return model
"""

# Each output row: the rows of the chunk predict saw, and torch.getnumthreads() in that runtime.
PROBE = """
local Probe, parent = torch.class('nn.RayProbe', 'nn.Module')
function Probe:updateOutput(input)
  self.output:resize(input:size(1), 2)
  self.output:select(2, 1):fill(input:size(1))
  self.output:select(2, 2):fill(torch.getnumthreads())
  return self.output
end
return nn.RayProbe()
"""

FAILING = """
local Fails, parent = torch.class('nn.RayFails', 'nn.Module')
function Fails:updateOutput(input)
  error('RayFails: no output for a batch of ' .. input:size(1))
end
return nn.RayFails()
"""


@pytest.fixture(scope="module")
def cluster():
    # OMP_NUM_THREADS=3 would be every worker's default thread count: the Predictor must override it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "3"}})
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.execution_no_progress_timeout_s = TIMEOUT_S
    yield
    ray.shutdown()


def run(ds, workers: int = 1, cpus: float = 1, rows_per_batch: int | None = None, **predictor) -> list[dict]:
    """The rows of ds mapped by Predictor(**predictor) on `workers` actors of `cpus` CPUs each."""
    out = ds.map_batches(Predictor, fn_constructor_kwargs=predictor, batch_format="numpy",
                         batch_size=rows_per_batch, num_cpus=cpus,
                         compute=ray.data.ActorPoolStrategy(size=workers))
    return sorted(out.take_all(), key=lambda row: row["id"])


def images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 8, 8))


def test_predictions_equal_one_process_with_named_columns(cluster):
    model = luabridge.Model.from_lua(CONVNET)
    x = images(60)
    ds = ray.data.from_items([{"id": i, "image": x[i], "label": f"img{i}"} for i in range(len(x))])
    rows = run(ds, workers=2, rows_per_batch=16, model=model, input="image", output="scores")
    assert set(rows[0]) == {"id", "label", "scores"}   # the input column is consumed, others pass through
    assert [r["label"] for r in rows] == [f"img{i}" for i in range(len(x))]
    np.testing.assert_allclose(np.stack([r["scores"] for r in rows]), model.predict(x), rtol=0, atol=1e-12)


def test_linear_outputs_against_numpy_float64(cluster):
    """A table output (ConcatTable) as output_1, output_2, against numpy on the model's weights."""
    model = luabridge.Model.from_lua("return nn.ConcatTable():add(nn.Linear(3, 2)):add(nn.Tanh())")
    w, b = model.state()["1.weight"], model.state()["1.bias"]
    x = np.random.default_rng(1).standard_normal((40, 3))
    ds = ray.data.from_items([{"id": i, "input": x[i]} for i in range(len(x))])
    rows = run(ds, model=model)
    assert set(rows[0]) == {"id", "output_1", "output_2"}
    np.testing.assert_allclose(np.stack([r["output_1"] for r in rows]), x @ w.T + b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.stack([r["output_2"] for r in rows]), np.tanh(x), rtol=1e-12, atol=1e-12)


def test_chunks_and_threads_inside_the_actor(cluster):
    """batch_size=4 on batches of 10 rows: chunks of 4, 4, 2; an actor given 2 CPUs runs 2 BLAS
    threads, not the 3 that OMP_NUM_THREADS would give it."""
    model = luabridge.Model.from_lua(PROBE)
    ds = ray.data.from_items([{"id": i, "input": np.zeros(3)} for i in range(20)])
    rows = run(ds, cpus=2, rows_per_batch=10, model=model, batch_size=4)
    probe = np.stack([r["output"] for r in rows])
    assert sorted(probe[:, 0].tolist()) == sorted([4.0] * 8 + [2.0] * 2 + [4.0] * 8 + [2.0] * 2)
    assert set(probe[:, 1].tolist()) == {2.0}


def test_lua_error_in_a_worker_is_a_lua_error(cluster):
    model = luabridge.Model.from_lua(FAILING)
    ds = ray.data.from_items([{"id": i, "input": np.zeros(2)} for i in range(6)])
    with pytest.raises(luabridge.LuaError) as caught:
        run(ds, rows_per_batch=6, model=model)
    assert "RayFails: no output for a batch of 6" in caught.value.message
    assert "(model source):4: in function" in caught.value.traceback   # the Lua stack, from the worker


def test_a_file_holding_a_function_runs_no_code_on_the_workers(cluster, tmp_path):
    """A .t7 whose Linear carries its own updateOutput (tests/test_safe_reading.py's file): every
    worker refuses the function, so no worker runs the file's code."""
    from test_safe_reading import Hostile

    hostile = Hostile(tmp_path)
    ds = ray.data.from_items([{"id": i, "input": np.zeros(3)} for i in range(4)])
    with pytest.raises(luabridge.LuaError, match=r"updateOutput is a Lua function .*not loaded"):
        run(ds, rows_per_batch=4, model=luabridge.Model(hostile.bytes()))
    assert not hostile.ran()


def test_table_input_and_named_outputs_in_process():
    """Called as Ray Data calls it: columns a and b as a Lua table, outputs named by a tuple."""
    model = luabridge.Model.from_lua("return nn.ConcatTable():add(nn.CAddTable()):add(nn.CMulTable())")
    a, b = np.arange(6.0).reshape(3, 2), np.full((3, 2), 2.0)
    out = Predictor(model, input=("a", "b"), output=("sum", "product"), batch_size=2)({"a": a, "b": b, "id": np.arange(3)})
    assert set(out) == {"id", "sum", "product"}
    np.testing.assert_array_equal(out["sum"], a + b)
    np.testing.assert_array_equal(out["product"], a * b)
    with pytest.raises(ValueError, match=r"output names \['sum'\] for a model returning 2 outputs"):
        Predictor(model, input=("a", "b"), output=("sum",))({"a": a, "b": b})


def test_a_one_row_chunk_keeps_its_batch_dimension():
    """The convnet's nn.View(36) takes a 1 x 1 x 8 x 8 input as one sample and drops the batch
    dimension; chunks of 2, 2, 1 rows still give 5 rows, those of predict on all 5."""
    model = luabridge.Model.from_lua(CONVNET)
    x = images(5, seed=2)
    out = Predictor(model, batch_size=2)({"input": x})["output"]
    np.testing.assert_allclose(out, model.predict(x), rtol=0, atol=1e-12)


def test_bad_arguments_are_named():
    model = luabridge.Model.from_lua("return nn.Identity()")
    with pytest.raises(KeyError, match=r"no column 'image' in the batch \(columns: \['input'\]\)"):
        Predictor(model, input="image")({"input": np.zeros((2, 3))})
    with pytest.raises(ValueError, match="batch_size must be a positive integer or None, got 0"):
        Predictor(model, batch_size=0)


def test_luabridge_alone_never_imports_ray_and_luabridge_ray_names_the_extra():
    code = ("import sys\n"
            "import luabridge\n"
            "assert 'ray' not in sys.modules\n"
            "sys.modules['ray'] = None\n"   # as if Ray were not installed
            "try:\n"
            "    import luabridge.ray\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "luabridge.ray needs Ray Data: pip install 'luabridge[ray]'" in done.stdout


def test_example_runs():
    env = {**os.environ, "RAY_ADDRESS": ""}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "ray_inference.py"), "--images", "600"],
                          capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "equal to model.predict in one process" in done.stdout
