"""luabridge.Model: outputs against numpy float64 references on weights read back in pure Python
(luabridge.t7) or set from numpy; pickling within a process, into another thread's runtime and
into a spawned process; the per-runtime cache (built once, bounded); custom layers from files;
state / with_state; tables in and out; errors."""
from __future__ import annotations

import gc
import io
import multiprocessing
import pickle
import threading
from typing import Any, Callable

import numpy as np
import pytest

import luabridge
import luabridge.model.handle as model_module
from helpers import T7_FIXTURES, needs_t7_fixtures
from luabridge import LuaError, Model, t7
from luabridge.core.runtime import _thread as runtime_thread, bridge

MLP = "return nn.Sequential():add(nn.Linear(4, 5)):add(nn.Tanh()):add(nn.Linear(5, 3))"
# A custom layer with a parameter: y = x * scale (scale: one weight per feature).
SCALE_LAYER = (
    "local Scale, parent = torch.class('nn.TestScale', 'nn.Module')\n"
    "function Scale:__init(n)\n  parent.__init(self)\n  self.weight = torch.Tensor(n):fill(2)\n"
    "  self.gradWeight = torch.Tensor(n):zero()\nend\n"
    "function Scale:updateOutput(input)\n"
    "  if input:dim() ~= 2 then error('nn.TestScale: expected a 2D input, got ' .. input:dim() .. 'D') end\n"
    "  self.output:resizeAs(input):copy(input):cmul(self.weight:view(1, -1):expandAs(input))\n"
    "  return self.output\nend\n")
SCALE_FILES = {"TestScale.lua": SCALE_LAYER}


def in_thread(fn: Callable[[], Any]) -> Any:
    """fn() run in a new thread (a runtime of its own): its result, or its exception raised here."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=120)
    assert not t.is_alive(), "the thread did not finish"
    if "error" in out:
        raise out["error"]
    return out["value"]


def weights_of(model: Model) -> Any:
    """The model's module as the pure-Python .t7 reader sees its bytes (no Lua involved)."""
    return t7.read(io.BytesIO(model.to_bytes()))


def mlp_reference(m: Any, x: np.ndarray) -> np.ndarray:
    l1, l3 = m.modules[0], m.modules[2]
    return np.tanh(x @ l1.weight.T + l1.bias) @ l3.weight.T + l3.bias


@pytest.fixture(scope="module")
def mlp() -> Model:
    return Model.from_lua(MLP)


def test_predict_equals_numpy_and_the_lua_module(mlp: Model) -> None:
    x = np.random.default_rng(0).standard_normal((6, 4))
    expected = mlp_reference(weights_of(mlp), x)
    y = mlp.predict(x)
    assert y.dtype == np.float64 and y.shape == (6, 3)
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(y, np.array(mlp.module().forward(x)))
    m = weights_of(mlp)
    state = mlp.state()
    assert list(state) == ["1.weight", "1.bias", "3.weight", "3.bias"]
    np.testing.assert_array_equal(state["3.weight"], m.modules[2].weight)


def test_outputs_are_copies_and_inputs_are_not_written() -> None:
    relu = Model.from_lua("return nn.Sequential():add(nn.ReLU(true))")   # in place: writes its input
    x = np.array([[-1.0, 2.0]])
    y = relu.predict(x)
    np.testing.assert_array_equal(x, [[-1.0, 2.0]])
    np.testing.assert_array_equal(y, [[0.0, 2.0]])
    relu.predict(np.array([[5.0, -5.0]]))   # reuses the module's output buffer
    np.testing.assert_array_equal(y, [[0.0, 2.0]])
    ro = np.array([[3.0, -3.0]])
    ro.flags.writeable = False                # as Ray Data's Arrow-backed batches are
    np.testing.assert_array_equal(relu.predict(ro), [[3.0, 0.0]])


def test_floating_inputs_take_the_modules_type(mlp: Model) -> None:
    x = np.random.default_rng(1).standard_normal((2, 4))
    np.testing.assert_allclose(mlp.predict(x.astype(np.float32)), mlp_reference(weights_of(mlp), x.astype(np.float32)),
                               rtol=0, atol=1e-12)
    single = Model.from_lua("return nn.Linear(4, 2):float()")
    w = weights_of(single)
    y = single.predict(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, x.astype(np.float32) @ w.weight.T + w.bias, rtol=1e-6)


def test_evaluate_mode_by_default() -> None:
    """BatchNormalization uses its running statistics and Dropout is the identity (evaluate)."""
    model = Model.from_lua("return nn.Sequential():add(nn.BatchNormalization(3)):add(nn.Dropout(0.5))")
    rng = np.random.default_rng(2)
    state = {"1.weight": rng.standard_normal(3), "1.bias": rng.standard_normal(3),
             "1.running_mean": rng.standard_normal(3), "1.running_var": rng.uniform(0.5, 2, 3)}
    set_ = model.with_state(state)
    x = rng.standard_normal((5, 3))
    normalized = (x - state["1.running_mean"]) / np.sqrt(state["1.running_var"] + 1e-5)
    expected = normalized * state["1.weight"] + state["1.bias"]
    np.testing.assert_allclose(set_.predict(x), expected, rtol=0, atol=1e-12)
    assert set_.module().train is False


def test_tables_in_and_out() -> None:
    model = Model.from_lua("local p = nn.ParallelTable():add(nn.Linear(2, 3)):add(nn.Identity())\n"
                           "return nn.Sequential():add(p):add(nn.ConcatTable()"
                           ":add(nn.CAddTable()):add(nn.ConcatTable():add(nn.SelectTable(1)):add(nn.SelectTable(2))))")
    w = weights_of(model).modules[0].modules[0]
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 2)), rng.standard_normal((4, 3))
    total, (first, second) = model.predict((a, b))
    np.testing.assert_allclose(first, a @ w.weight.T + w.bias, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(second, b)
    np.testing.assert_allclose(total, first + b, rtol=0, atol=1e-12)
    listed = model.predict([a, b])
    np.testing.assert_array_equal(listed[0], total)


def test_pickle_round_trip_in_this_process(mlp: Model) -> None:
    data = pickle.dumps(mlp)
    assert len(data) < len(mlp.to_bytes()) + 500   # the bytes and sources, nothing more
    again = pickle.loads(data)
    assert again == mlp and hash(again) == hash(mlp) and again is not mlp
    g = bridge().lua.globals()
    assert g.rawequal(again.module()._lua, mlp.module()._lua)   # equal Models share the built module
    x = np.ones((1, 4))
    np.testing.assert_array_equal(again.predict(x), mlp.predict(x))
    assert Model.from_bytes(mlp.to_bytes()) != mlp   # no source: another content


def test_unpickling_builds_nothing_and_first_use_builds_once(mlp: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    builds = []
    real_build = model_module._build
    monkeypatch.setattr(model_module, "_build", lambda b, m: builds.append(m) or real_build(b, m))
    data = pickle.dumps(mlp)
    x = np.random.default_rng(4).standard_normal((3, 4))

    def use() -> Any:
        model = pickle.loads(data)
        assert getattr(runtime_thread, "bridge", None) is None, "unpickling made a runtime"
        outputs = [model.predict(x) for _ in range(3)]
        return outputs, len(builds)

    outputs, n = in_thread(use)
    assert n == 1
    for y in outputs:
        np.testing.assert_allclose(y, mlp_reference(weights_of(mlp), x), rtol=0, atol=1e-12)


def test_module_belongs_to_the_calling_threads_runtime(mlp: Model) -> None:
    here = mlp.module()
    there = in_thread(lambda: mlp.module())
    with pytest.raises(LuaError, match="another thread's runtime"):
        there.forward(np.ones((1, 4)))
    assert here is not there


def test_pickled_into_a_spawned_process(mlp: Model) -> None:
    """A spawned process unpickles the Model and runs it: the plain MLP, and a custom layer
    whose class the source (a require of a file) defines there."""
    custom = Model.from_lua("require 'TestScale'\nreturn nn.Sequential():add(nn.TestScale(3))", files=SCALE_FILES)
    x = np.random.default_rng(5).standard_normal((2, 4))
    # leaving the block terminates the worker, pass or fail (an executor would wait for it)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        y = pool.apply_async(mlp.predict, (x,)).get(timeout=300)
        scaled = pool.apply_async(custom.predict, (x[:, :3],)).get(timeout=120)
    np.testing.assert_allclose(y, mlp_reference(weights_of(mlp), x), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(scaled, 2 * x[:, :3])


def test_the_cache_keeps_no_modules_of_gone_models() -> None:
    def use() -> tuple[int, int]:
        models = [Model.from_lua(f"return nn.Linear(2, {n})") for n in range(1, 7)]
        for m in models:
            m.predict(np.ones((1, 2)))
        cache = bridge().model_cache
        alive = len(cache.built)
        del models, m
        gc.collect()
        return alive, len(cache.built)

    alive, after = in_thread(use)
    assert alive == 6 and after == model_module.RECENT


@needs_t7_fixtures
def test_from_t7_of_a_real_torch7_file() -> None:
    """nngraph's gModule written by Torch7: inputs {a, b}, output Linear(1 -> 2)(a) + b."""
    path = T7_FIXTURES / "gmodule_with_linear_identity.t7"
    model = Model.from_t7(path)
    linear = next(m for m in t7.read(path).modules if m.typename == "nn.Linear")
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 1)), rng.standard_normal((3, 2))
    expected = a @ linear.weight.T + linear.bias + b
    np.testing.assert_allclose(model.predict((a, b)), expected, rtol=0, atol=1e-12)
    assert set(model.state()) == {"3.weight", "3.bias"}
    np.testing.assert_allclose(in_thread(lambda: pickle.loads(pickle.dumps(model)).predict((a, b))), expected,
                               rtol=0, atol=1e-12)


def test_from_t7_of_files_and_bytes_luabridge_wrote(tmp_path: Any) -> None:
    luabridge.require("nn")
    module = luabridge.wrap(luabridge.eval("nn.Sequential():add(nn.Linear(3, 2)):add(nn.Sigmoid())"))
    rng = np.random.default_rng(7)
    w, bias = rng.standard_normal((2, 3)), rng.standard_normal(2)
    linear = module.modules[0]
    luabridge.to_numpy(linear.weight)[...] = w
    luabridge.to_numpy(linear.bias)[...] = bias
    luabridge.save(tmp_path / "m.t7", module)
    luabridge.save(tmp_path / "m_ascii.t7", module, format="ascii")
    from_path = Model.from_t7(tmp_path / "m.t7")
    x = rng.standard_normal((4, 3))
    expected = 1 / (1 + np.exp(-(x @ w.T + bias)))
    assert Model.from_t7((tmp_path / "m.t7").read_bytes()) == from_path
    for model in (from_path, Model.from_t7(tmp_path / "m_ascii.t7", format="ascii"), Model.from_module(module)):
        np.testing.assert_allclose(model.predict(x), expected, rtol=0, atol=1e-12)


def test_from_module_is_a_snapshot() -> None:
    luabridge.require("nn")
    module = luabridge.wrap(luabridge.eval("nn.Linear(2, 2)"))
    model = Model.from_module(module)
    before = model.state()["weight"]
    luabridge.to_numpy(module.weight)[...] = 7.0
    np.testing.assert_array_equal(model.state()["weight"], before)


def test_from_lua_custom_layer_by_require_and_dofile() -> None:
    x = np.random.default_rng(8).standard_normal((2, 3))
    required = Model.from_lua("require 'TestScale'\nlocal m = nn.Sequential():add(nn.TestScale(3))",
                              entry="return m", files=SCALE_FILES)
    by_dofile = Model.from_lua("dofile('TestScale.lua')\nreturn nn.TestScale(3)", files=SCALE_FILES)
    np.testing.assert_array_equal(required.predict(x), 2 * x)
    np.testing.assert_array_equal(by_dofile.predict(x), 2 * x)
    assert list(by_dofile.state()) == ["weight"]
    tripled = by_dofile.with_state({"weight": np.full(3, 3.0)})
    np.testing.assert_array_equal(tripled.predict(x), 3 * x)

    def twice_in_a_new_runtime() -> tuple:
        # each Model runs its source here, so the class is defined by two builds of one runtime
        outputs = (by_dofile.predict(x), pickle.loads(pickle.dumps(tripled)).predict(x), required.predict(x))
        with pytest.raises(LuaError, match="already assigned"):   # torch.class is torch7's outside builds
            luabridge.execute("torch.class('nn.TestScale', 'nn.Module')")
        with pytest.raises(LuaError, match="module 'TestScale' not found"):   # files only while building
            luabridge.execute("package.loaded.TestScale = nil; require 'TestScale'")
        return outputs

    for y, k in zip(in_thread(twice_in_a_new_runtime), (2, 3, 2)):
        np.testing.assert_array_equal(y, k * x)


def test_custom_classes_of_t7_bytes_come_from_source() -> None:
    b = bridge()
    defined = Model.from_lua("require 'TestScale'\nreturn nn.TestScale(2)", files=SCALE_FILES)
    proxy = defined.module()
    bare = Model.from_module(proxy)
    with_source = Model.from_module(proxy, source="require 'TestScale'", files=SCALE_FILES)
    assert b.lua.globals().torch.getmetatable("nn.TestScale") is not None
    with pytest.raises(LuaError, match=r"unknown Torch class <nn.TestScale>"):
        in_thread(lambda: bare.predict(np.ones((1, 2))))
    np.testing.assert_array_equal(in_thread(lambda: with_source.predict(np.ones((1, 2)))), [[2.0, 2.0]])


def test_state_round_trip_and_with_state_leaves_the_model(mlp: Model) -> None:
    rng = np.random.default_rng(9)
    state = {k: rng.standard_normal(v.shape) for k, v in mlp.state().items()}
    original = mlp.state()
    changed = mlp.with_state(state)
    for k in state:
        np.testing.assert_array_equal(changed.state()[k], state[k])
        np.testing.assert_array_equal(mlp.state()[k], original[k])
    x = rng.standard_normal((3, 4))
    expected = np.tanh(x @ state["1.weight"].T + state["1.bias"]) @ state["3.weight"].T + state["3.bias"]
    np.testing.assert_allclose(changed.predict(x), expected, rtol=0, atol=1e-12)
    got = changed.state()
    got["1.bias"][...] = 0.0   # a copy
    np.testing.assert_array_equal(changed.state()["1.bias"], state["1.bias"])
    np.testing.assert_array_equal(in_thread(lambda: pickle.loads(pickle.dumps(changed)).predict(x)),
                                  changed.predict(x))


def test_with_state_errors_name_the_key(mlp: Model) -> None:
    state = mlp.state()
    with pytest.raises(KeyError, match=r"missing keys \['3.bias'\], unexpected keys \['4.bias'\]"):
        mlp.with_state({**{k: v for k, v in state.items() if k != "3.bias"}, "4.bias": state["3.bias"]})
    with pytest.raises(ValueError, match=r"1.weight has shape \(4, 5\), the module's \(5, 4\)"):
        mlp.with_state({**state, "1.weight": state["1.weight"].T})
    with pytest.raises(TypeError, match="3.bias is float32, the module's is float64"):
        mlp.with_state({**state, "3.bias": state["3.bias"].astype(np.float32)})


def test_lua_errors_and_bad_arguments(mlp: Model) -> None:
    with pytest.raises(LuaError, match="nn.Linear: size mismatch") as e:
        mlp.predict(np.ones((2, 7)))
    assert "size mismatch" in e.value.message
    with pytest.raises(LuaError, match="not a .t7 file"):
        Model.from_t7(b"hello, not a t7 file").predict(np.ones(3))
    with pytest.raises(ValueError, match="unknown .t7 format 'b16'"):
        Model.from_t7(b"", format="b16")
    with pytest.raises(TypeError, match="the source returned number, not an nn module"):
        Model.from_lua("return 3")
    with pytest.raises(LuaError, match=r"\(model source\):1:"):
        Model.from_lua("return nn.Linear(3,")
    with pytest.raises(TypeError, match="expects a Lua nn module"):
        Model.from_module(luabridge.eval("torch.Tensor(2)"))
    with pytest.raises(TypeError, match="expects a Lua nn module"):
        Model.from_module("nn.Linear(2, 2)")   # type: ignore[arg-type]
    custom = Model.from_lua("require 'TestScale'\nreturn nn.TestScale(3)", files=SCALE_FILES)
    with pytest.raises(LuaError, match=r"TestScale.lua:\d+: nn.TestScale: expected a 2D input, got 1D"):
        custom.predict(np.ones(3))
    with pytest.raises(AttributeError, match="immutable"):
        mlp._t7 = b""


def test_a_criterion_as_a_model() -> None:
    """A criterion pickles and runs like a module: predict((input, target)) is its loss."""
    criterion = Model.from_module(luabridge.nn.MSECriterion())
    rng = np.random.default_rng(10)
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    assert criterion.predict((x, t)) == pytest.approx(np.mean((x - t) ** 2), rel=1e-12)
    assert in_thread(lambda: pickle.loads(pickle.dumps(criterion)).predict((x, t))) == \
        pytest.approx(np.mean((x - t) ** 2), rel=1e-12)
    assert criterion.state() == {} and criterion.with_state({}).predict((x, t)) == criterion.predict((x, t))
    nll = Model.from_lua("return nn.ClassNLLCriterion()")
    log_probs = np.log(np.full((2, 3), 1 / 3))
    assert nll.predict((log_probs, np.array([1, 3]))) == pytest.approx(np.log(3), rel=1e-12)
    with pytest.raises(TypeError, match="nn.MSECriterion is a criterion: pass \\(input, target\\)"):
        criterion.predict(x)


def test_building_leaves_the_random_generator_alone() -> None:
    """A runtime that runs the source only to define a class (random initialisation included)
    draws the same numbers after the build as without it: a seed set before build() holds."""
    custom = Model.from_lua("require 'TestScale'\nreturn nn.Sequential():add(nn.TestScale(3)):add(nn.Linear(3, 50))",
                            files=SCALE_FILES)

    def draws(build: bool) -> np.ndarray:
        luabridge.require("torch")
        luabridge.execute("torch.manualSeed(5)")
        if build:
            custom.build()
        return np.array(luabridge.wrap(luabridge.eval("torch.rand(4)")))

    np.testing.assert_array_equal(in_thread(lambda: draws(True)), in_thread(lambda: draws(False)))
