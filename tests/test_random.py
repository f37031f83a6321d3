"""torch's random numbers: the MT19937 stream against numpy's (legacy RandomState seeds with the
same init_genrand), torch7's formulas rebuilt in numpy from that raw stream, and statistics of
large samples checked against the distributions' moments."""
from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import pytest

import luabridge
from luabridge import LuaError
from helpers import N, assert_lua_error, lua_fn

TWO32 = 2.0**32


def raw(seed: int, n: int) -> np.ndarray:
    """The first n 32-bit MT19937 outputs for an integer seed, as float64 (numpy's reference)."""
    return np.random.RandomState(seed).randint(0, 2**32, size=n, dtype=np.uint64).astype(np.float64)


def ev(src: str) -> Any:
    """Evaluates a Lua expression (a Lua error raises LuaError)."""
    return luabridge.eval(src)


def seeded(seed: int, expr: str) -> np.ndarray:
    """The tensor expr evaluates to right after torch.manualSeed(seed), as a numpy array."""
    return N(ev(f"(function() torch.manualSeed({seed}); return {expr} end)()"))


def within(sample: np.ndarray, mean: float, var: float, k: float = 5.0) -> bool:
    """The sample mean lies within k standard errors of the expected mean."""
    return abs(sample.mean() - mean) <= k * math.sqrt(var / sample.size)


# ---------------------------------------------------------------------------------------------
# the generator


def test_reference_values_for_seed_5489(lua):
    got = ev("(function() torch.manualSeed(5489); return torch.random() .. ' ' .. torch.random() .. ' ' .. "
              "torch.random() end)()")
    assert got == "3499211612 581869302 3890346734"


@pytest.mark.parametrize("seed", [0, 1, 5489, 123456789, 2**32 - 1])
def test_raw_stream_matches_numpy(lua, seed):
    # 2000 draws cross the 624-word twist three times
    got = seeded(seed, "torch.DoubleTensor(2000):apply(function() return torch.random() end)")
    np.testing.assert_array_equal(got, raw(seed, 2000))


def test_seed_keeps_low_32_bits_and_initial_seed(lua):
    a = seeded(2**32 + 7, "torch.DoubleTensor(5):apply(function() return torch.random() end)")
    np.testing.assert_array_equal(a, raw(7, 5))
    neg = seeded(-1, "torch.DoubleTensor(3):apply(function() return torch.random() end)")
    np.testing.assert_array_equal(neg, raw(2**32 - 1, 3))
    assert ev("(function() torch.manualSeed(-5); return torch.initialSeed() end)()") == -5
    assert ev("(function() torch.manualSeed(42.9); return torch.initialSeed() end)()") == 42


def test_uniform_matches_torch7_documentation(lua):
    # doc/random.md: torch.manualSeed(123); torch.uniform() x3
    got = ev("(function() torch.manualSeed(123); return {torch.uniform(), torch.uniform(), torch.uniform()} end)()")
    values = [got[i] for i in (1, 2, 3)]
    np.testing.assert_allclose(values, [0.69646918727085, 0.71295532141812, 0.28613933874294], atol=5e-15)
    np.testing.assert_array_equal(values, raw(123, 3) / TWO32)


def test_seed_returns_the_seed_and_replays(lua):
    s, first, initial = ev("(function() local s = torch.seed(); return s, torch.random(), torch.initialSeed() end)()")
    assert s == initial and s == int(s) and 0 <= s < 2**53
    again = ev("(function() torch.manualSeed(torch.initialSeed()); return torch.random() end)()")
    assert again == first == raw(int(s) % 2**32, 1)[0]


def test_generators_are_independent(lua):
    out = ev("""(function()
      local g1, g2 = torch.Generator(), torch.Generator()
      torch.manualSeed(g1, 11); torch.manualSeed(g2, 22); torch.manualSeed(33)
      local a, b, c = {}, {}, {}
      for i = 1, 700 do
        a[i] = torch.random(g1); b[i] = torch.random(g2); c[i] = torch.random()
        torch.rand(g2, 3)      -- extra use of g2 must not disturb g1 nor the default
      end
      return torch.DoubleTensor(a), torch.DoubleTensor(b), torch.DoubleTensor(c)
    end)()""")
    np.testing.assert_array_equal(N(out[0]), raw(11, 700))
    np.testing.assert_array_equal(N(out[2]), raw(33, 700))
    b = raw(22, 700 * 4).reshape(700, 4)[:, 0]
    np.testing.assert_array_equal(N(out[1]), b)
    assert ev("torch.typename(torch.Generator())") == "torch.Generator"
    assert ev("torch.typename(torch._gen)") == "torch.Generator"


def test_same_seed_same_numbers_in_another_thread(lua):
    seen = {}

    def work():
        luabridge.require("torch")
        seen["x"] = seeded(99, "torch.randn(50)")

    th = threading.Thread(target=work)
    th.start()
    th.join()
    np.testing.assert_array_equal(seen["x"], seeded(99, "torch.randn(50)"))


# ---------------------------------------------------------------------------------------------
# RNG state


def _layout(state: np.ndarray) -> dict:
    """torch7's THGenerator struct (64-bit Linux) read from getRNGState's bytes."""
    b = state.tobytes()
    return {
        "seed": np.frombuffer(b, np.uint64, 1, 0)[0],
        "left": np.frombuffer(b, np.int32, 1, 8)[0],
        "seeded": np.frombuffer(b, np.int32, 1, 12)[0],
        "next": np.frombuffer(b, np.uint64, 1, 16)[0],
        "state": np.frombuffer(b, np.uint64, 624, 24),
        "normal_valid": np.frombuffer(b, np.int32, 1, 5040)[0],
    }


def test_state_is_torch7_thgenerator_layout(lua):
    state = seeded(77, "(function() for i = 1, 10 do torch.random() end; torch.normal(); return torch.getRNGState() end)()")
    assert state.dtype == np.uint8 and state.shape == (5048,)
    f = _layout(state)
    ref = np.random.RandomState(77)
    ref.randint(0, 2**32, size=12, dtype=np.uint64)
    _, key, pos, *_ = ref.get_state()
    assert f["seed"] == 77 and f["seeded"] == 1 and f["normal_valid"] == 1
    assert f["next"] == pos == 12 and f["left"] == 624 - 12 + 1
    np.testing.assert_array_equal(f["state"], key.astype(np.uint64))


def test_get_set_state_replays_including_cached_normal(lua):
    before, after, again = ev("""(function()
      torch.manualSeed(5)
      torch.randn(101)                       -- odd: the sine half is cached in the state
      local s = torch.getRNGState()
      local copy = s:clone()
      local a = torch.randn(33)
      torch.rand(1000)
      torch.setRNGState(s)
      local b = torch.randn(33)
      local c = torch.Tensor(33)
      torch.setRNGState(copy)
      c:normal()
      return a, b, c
    end)()""")
    np.testing.assert_array_equal(N(before), N(after))
    np.testing.assert_array_equal(N(before), N(again))


def test_forked_state_in_another_generator(lua):
    # torch7's RNGStateAliasing: a Generator set to the default's state continues its stream
    target, forked = ev("""(function()
      torch.manualSeed(1); torch.uniform()
      local gen = torch.Generator()
      assert(torch.setRNGState(gen, torch.getRNGState()) ~= nil)
      local target = torch.rand(1000)
      torch.rand(100000)
      return target, torch.rand(gen, 1000)
    end)()""")
    np.testing.assert_array_equal(N(target), N(forked))
    np.testing.assert_array_equal(N(target), raw(1, 1001)[1:] / TWO32)


def test_get_state_into_given_tensor(lua):
    same = ev("(function() local r = torch.ByteTensor(3); return torch.getRNGState(r) == r, r:nElement() end)()")
    assert same == (True, 5048)


def test_set_state_errors(lua):
    set_state = lua_fn("function(s) torch.setRNGState(s) end")
    with pytest.raises(LuaError, match="wrong size"):
        set_state(ev("torch.ByteTensor(10)"))
    with pytest.raises(LuaError, match="ByteTensor"):
        set_state(ev("torch.getRNGState():double()"))
    with pytest.raises(LuaError, match="contiguous"):
        set_state(ev("torch.ByteTensor(5048, 2):select(2, 1)"))
    state = N(ev("torch.getRNGState()"))
    bad = state.copy()
    bad[8:12] = np.frombuffer(np.int32(1000).tobytes(), np.uint8)   # left > 624
    with pytest.raises(LuaError, match="Invalid RNG state"):
        set_state(luabridge.from_numpy(bad))
    bad = state.copy()
    bad[24 + 8 * 3: 24 + 8 * 4] = np.frombuffer(np.uint64(2**40).tobytes(), np.uint8)  # not a 32-bit word
    with pytest.raises(LuaError, match="Invalid RNG state"):
        set_state(luabridge.from_numpy(bad))


def test_manual_seed_errors(lua):
    assert_lua_error("torch.manualSeed('x')", "manualSeed: seed must be a number")
    assert_lua_error("torch.manualSeed(0/0)", "seed out of range")


# ---------------------------------------------------------------------------------------------
# torch7's formulas, rebuilt from the raw stream


def box_muller(u: np.ndarray, n: int) -> np.ndarray:
    """torch7's normals: pairs (x, y) give rho*cos(2 pi x), then rho*sin(2 pi x)."""
    out = []
    for k in range(n):
        x, y = u[2 * (k // 2)], u[2 * (k // 2) + 1]
        rho = math.sqrt(-2.0 * math.log(1.0 - y))
        out.append(rho * (math.cos if k % 2 == 0 else math.sin)(2.0 * math.pi * x))
    return np.array(out)


def test_normal_is_box_muller_with_cached_half(lua):
    a, b = ev("(function() torch.manualSeed(31); return torch.randn(3), torch.randn(4) end)()")
    got = np.concatenate([N(a), N(b)])
    np.testing.assert_allclose(got, box_muller(raw(31, 8) / TWO32, 7), rtol=1e-14, atol=1e-15)
    mean_std = seeded(31, "torch.Tensor(7):normal(2, 0.5)")
    np.testing.assert_allclose(mean_std, box_muller(raw(31, 8) / TWO32, 7) * 0.5 + 2, rtol=1e-14)


@pytest.mark.parametrize("expr, formula", [
    ("x:uniform(-2, 3)", lambda u: u * 5 - 2),
    ("x:exponential(2.5)", lambda u: -1 / 2.5 * np.log(1 - u)),
    ("x:cauchy(1, 3)", lambda u: 1 + 3 * np.tan(np.pi * (u - 0.5))),
    ("x:geometric(0.3)", lambda u: np.floor(np.log(1 - u) / np.log(0.3)) + 1),
    ("x:bernoulli(0.25)", lambda u: (u <= 0.25).astype(float)),
])
def test_fill_formulas_on_strided_views(lua, expr, formula):
    # a transposed view is filled in its own row-major order, as TH_TENSOR_APPLY does
    got = seeded(8, f"(function() local x = torch.DoubleTensor(6, 9):t(); {expr}; return x end)()")
    want = formula(raw(8, 54) / TWO32).reshape(9, 6)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_float_tensor_rounds_the_double_draw(lua):
    got = seeded(3, "torch.FloatTensor(4, 5):uniform(0, 10)")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, (raw(3, 20) / TWO32 * 10).astype(np.float32).reshape(4, 5))
    half = seeded(3, "torch.HalfTensor(20):uniform(0, 10)")
    np.testing.assert_array_equal(half, (raw(3, 20) / TWO32 * 10).astype(np.float32).astype(np.float16))


@pytest.mark.parametrize("type_name, modulus", [("Byte", 256), ("Char", 128), ("Short", 32768), ("Int", 2**31),
                                                ("Long", 2**63), ("Float", 2**24 + 1), ("Double", 2**53 + 1)])
def test_random_per_type(lua, type_name, modulus):
    got = seeded(4, f"torch.{type_name}Tensor(300):random()")
    np.testing.assert_array_equal(got.astype(np.float64), np.fmod(raw(4, 300), modulus))


def test_random_bounds(lua):
    np.testing.assert_array_equal(seeded(6, "torch.LongTensor(200):random(7)"), np.fmod(raw(6, 200), 7) + 1)
    np.testing.assert_array_equal(seeded(6, "torch.IntTensor(200):random(-3, 4)"), np.fmod(raw(6, 200), 8) - 3)
    nums = ev("(function() torch.manualSeed(6); return {torch.random(10), torch.random(-5, 5), torch.random(2.7)} end)()")
    r = raw(6, 3)
    assert [nums[1], nums[2], nums[3]] == [r[0] % 10 + 1, r[1] % 11 - 5, r[2] % 2 + 1]
    assert_lua_error("torch.random(0)", "upper bound must be strictly positive")
    assert_lua_error("torch.LongTensor(3):random(5, 4)", "upper bound must be larger than lower bound")


def test_number_forms_and_generator_argument(lua):
    vals = ev("""(function()
      local g = torch.Generator(); torch.manualSeed(g, 12)
      return {torch.uniform(g), torch.uniform(g, 2, 4), torch.exponential(g, 2), torch.cauchy(g, 0, 1),
              torch.bernoulli(g), torch.bernoulli(g, 0.9), torch.geometric(g, 0.5), torch.random(g)}
    end)()""")
    u = raw(12, 8) / TWO32
    want = [u[0], u[1] * 2 + 2, -0.5 * math.log(1 - u[2]), math.tan(math.pi * (u[3] - 0.5)),
            float(u[4] <= 0.5), float(u[5] <= 0.9), math.floor(math.log(1 - u[6]) / math.log(0.5)) + 1, u[7] * TWO32]
    np.testing.assert_allclose([vals[i] for i in range(1, 9)], want, rtol=1e-14)
    norm = ev("(function() local g = torch.Generator(); torch.manualSeed(g, 12); "
               "return {torch.normal(g), torch.normal(g, 1, 2), torch.logNormal(g, 0, 1)} end)()")
    bm = box_muller(u, 3)
    np.testing.assert_allclose([norm[1], norm[2], norm[3]], [bm[0], bm[1] * 2 + 1, math.exp(bm[2])], rtol=1e-13)


def test_torch_function_form_with_tensor(lua):
    t = seeded(2, "torch.uniform(torch.Tensor(5), 1, 2)")
    np.testing.assert_array_equal(t, raw(2, 5) / TWO32 + 1)
    t = seeded(2, "torch.bernoulli(torch.ByteTensor(5), 0.5)")
    np.testing.assert_array_equal(t, raw(2, 5) / TWO32 <= 0.5)


def test_bernoulli_with_probability_tensor(lua):
    p = np.random.default_rng(0).random((4, 6))
    pt = luabridge.from_numpy(p.T.copy().T)                    # a strided DoubleTensor
    got = N(lua_fn("function(p) torch.manualSeed(9); return torch.ByteTensor(4, 6):bernoulli(p) end")(pt))
    np.testing.assert_array_equal(got, (raw(9, 24) / TWO32 <= p.ravel()).reshape(4, 6))
    f = lua_fn("function(p) torch.manualSeed(9); return torch.DoubleTensor(24):bernoulli(p:float():view(-1)) end")(pt)
    np.testing.assert_array_equal(N(f), raw(9, 24) / TWO32 <= p.astype(np.float32).ravel())


def test_bernoulli_tensor_errors_leave_output_unchanged(lua):
    out = np.full(3, 7.0)
    t = luabridge.from_numpy(out)
    with pytest.raises(LuaError, match="p must be >= 0 and <= 1"):
        lua_fn("function(t) t:bernoulli(torch.Tensor({0.5, 1.5, 0.2})) end")(t)
    with pytest.raises(LuaError, match="inconsistent tensor size"):
        lua_fn("function(t) t:bernoulli(torch.Tensor(4):fill(0.5)) end")(t)
    np.testing.assert_array_equal(out, 7.0)


@pytest.mark.parametrize("code, message", [
    ("torch.Tensor(3):normal(0, 0)", "standard deviation must be strictly positive"),
    ("torch.normal(1, -1)", "standard deviation must be strictly positive"),
    ("torch.Tensor(3):logNormal(1, 0)", "standard deviation must be strictly positive"),
    ("torch.Tensor(3):geometric(1)", "p must be > 0 and < 1"),
    ("torch.geometric()", "geometric: p must be a number"),
    ("torch.Tensor(3):bernoulli(1.5)", "p must be >= 0 and <= 1"),
    ("torch.Tensor(3):exponential()", "exponential: lambda must be a number"),
    ("torch.Tensor(3):exponential(-1)", "lambda must be strictly positive"),
    ("torch.LongTensor(3):uniform()", "uniform: expected a floating-point tensor"),
    ("torch.rand(torch.IntTensor(), 3)", "rand: expected a floating-point tensor"),
    ("torch.Tensor(3):uniform('a')", "uniform: a must be a number"),
    ("torch.rand(2, -1)", "rand: sizes must be non-negative"),
])
def test_argument_errors(lua, code, message):
    assert_lua_error(code, message)


def test_empty_tensors_draw_nothing(lua):
    got = ev("(function() torch.manualSeed(1); torch.Tensor():uniform(); torch.Tensor(0, 3):normal(); "
              "return torch.random() end)()")
    assert got == raw(1, 1)[0]


# ---------------------------------------------------------------------------------------------
# statistics of large samples

SAMPLES = 200_000


@pytest.mark.parametrize("expr, mean, var", [
    ("uniform(-1, 3)", 1.0, 16 / 12),
    ("normal(2, 3)", 2.0, 9.0),
    ("exponential(4)", 0.25, 1 / 16),
    ("bernoulli(0.3)", 0.3, 0.21),
    ("geometric(0.6)", 1 / 0.4, 0.6 / 0.16),      # P(k) = 0.4 * 0.6^(k-1)
])
def test_sample_moments(lua, expr, mean, var):
    x = seeded(2024, f"torch.DoubleTensor({SAMPLES}):{expr}")
    assert within(x, mean, var)
    assert abs(x.var() - var) <= 0.05 * var


def test_normal_tails_and_lognormal(lua):
    x = seeded(17, f"torch.randn({SAMPLES})")
    assert abs(np.mean(np.abs(x) < 1) - 0.682689) < 0.005
    assert abs(np.mean(np.abs(x) < 2) - 0.954500) < 0.003
    y = seeded(17, f"torch.Tensor({SAMPLES}):logNormal(0.5, 0.25)")
    logs = np.log(y)
    assert within(logs, 0.5, 0.0625) and abs(logs.std() - 0.25) < 0.005


def test_cauchy_quartiles(lua):
    x = seeded(5, f"torch.Tensor({SAMPLES}):cauchy(3, 2)")
    q1, median, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert abs(median - 3) < 0.05 and abs(q1 - 1) < 0.06 and abs(q3 - 5) < 0.06


def test_uniform_range_and_random_frequencies(lua):
    u = seeded(1, f"torch.rand({SAMPLES})")
    assert u.min() >= 0 and u.max() < 1
    counts = np.bincount(seeded(1, f"torch.LongTensor({SAMPLES}):random(1, 10)").astype(int), minlength=11)[1:]
    chi2 = ((counts - SAMPLES / 10) ** 2 / (SAMPLES / 10)).sum()
    assert counts.sum() == SAMPLES and chi2 < 35        # 9 degrees of freedom: p ~ 1e-4


# ---------------------------------------------------------------------------------------------
# rand, randn, randperm


def test_rand_randn_forms(lua):
    assert ev("torch.typename(torch.rand(2, 3))") == "torch.DoubleTensor"
    assert list(seeded(1, "torch.rand(torch.LongStorage({2, 3, 4}))").shape) == [2, 3, 4]
    np.testing.assert_array_equal(seeded(1, "torch.rand(2, 3)"), (raw(1, 6) / TWO32).reshape(2, 3))
    res = ev("(function() local r = torch.FloatTensor(9); local g = torch.Generator(); torch.manualSeed(g, 1); "
              "return torch.rand(r, g, 3, 2) == r, r end)()")
    assert res[0] is True
    np.testing.assert_array_equal(N(res[1]), (raw(1, 6) / TWO32).astype(np.float32).reshape(3, 2))
    np.testing.assert_allclose(seeded(1, "torch.randn(5)"), box_muller(raw(1, 6) / TWO32, 5), rtol=1e-14)
    np.testing.assert_array_equal(seeded(1, "torch.Tensor():rand(4)"), raw(1, 4) / TWO32)
    assert_lua_error("torch.rand('a')", "rand: sizes must be")


def torch7_randperm(seed: int, n: int) -> np.ndarray:
    perm = np.arange(1, n + 1, dtype=np.float64)
    r = raw(seed, max(n - 1, 1))
    for i in range(n - 1):
        z = int(r[i] % (n - i)) + i
        perm[i], perm[z] = perm[z], perm[i]
    return perm


def test_randperm(lua):
    p = seeded(10, "torch.randperm(500)")
    np.testing.assert_array_equal(np.sort(p), np.arange(1, 501))
    np.testing.assert_array_equal(p, torch7_randperm(10, 500))
    typed = ev("(function() torch.manualSeed(10); local r = torch.LongTensor(); return torch.randperm(r, 9) == r, r end)()")
    assert typed[0] is True
    np.testing.assert_array_equal(N(typed[1]), torch7_randperm(10, 9))
    assert list(seeded(10, "torch.randperm(1)")) == [1]
    assert_lua_error("torch.randperm(0)", "randperm: n must be a strictly positive integer")


# ---------------------------------------------------------------------------------------------
# multinomial


def torch7_multinomial(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    cum = np.cumsum(probs) / probs.sum()
    cum[-1] = 1.0
    return np.searchsorted(cum, u, side="left") + 1


def test_multinomial_with_replacement_matches_torch7_search(lua):
    p = np.array([0.1, 0.0, 2.0, 0.5, 1.4])           # unnormalised, with a zero
    got = N(lua_fn("function(p) torch.manualSeed(21); return torch.multinomial(p, 3000, true) end")(
        luabridge.from_numpy(p)))
    assert got.dtype == np.int64 and got.shape == (3000,)
    np.testing.assert_array_equal(got, torch7_multinomial(p, raw(21, 3000) / TWO32))
    assert not np.any(got == 2)


def test_multinomial_frequencies_2d(lua):
    p = np.array([[1.0, 2.0, 3.0, 4.0, 0.0], [5.0, 0.0, 0.0, 1.0, 4.0]])
    pt = luabridge.from_numpy(np.asfortranarray(p))                    # non-contiguous rows
    got = N(lua_fn("function(p) torch.manualSeed(3); return torch.multinomial(p, 20000, true) end")(pt))
    assert got.shape == (2, 20000)
    for row, probs in zip(got, p):
        counts = np.bincount(row, minlength=6)[1:]
        expected = probs / probs.sum() * row.size
        assert np.all(counts[expected == 0] == 0)
        live = expected > 0
        assert ((counts[live] - expected[live]) ** 2 / expected[live]).sum() < 25


def test_multinomial_without_replacement(lua):
    p = np.array([[0.2, 0.3, 0.0, 0.5, 1.0, 2.0]] * 50)
    got = N(lua_fn("function(p) torch.manualSeed(8); return torch.multinomial(p, 4, false) end")(
        luabridge.from_numpy(p)))
    assert got.shape == (50, 4)
    for row in got:
        assert len(set(row)) == 4 and 3 not in row
    full = N(ev("(function() torch.manualSeed(8); return torch.multinomial(torch.Tensor{1, 1, 1, 1}, 4) end)()"))
    np.testing.assert_array_equal(np.sort(full), [1, 2, 3, 4])
    # the first draw of a row follows probs; the largest category is picked first most often
    firsts = N(ev("(function() torch.manualSeed(8); "
                     "return torch.multinomial(torch.Tensor{1, 8, 1}:view(1, 3):expand(4000, 3), 2) end)()"))[:, 0]
    assert abs(np.mean(firsts == 2) - 0.8) < 0.03


def test_multinomial_exact_without_replacement(lua):
    p = np.array([0.1, 0.4, 0.2, 0.3])
    got = N(lua_fn("function(p) torch.manualSeed(12); return torch.multinomial(p, 3) end")(luabridge.from_numpy(p)))
    u = raw(12, 3) / TWO32
    cum, want = np.cumsum(p) / p.sum(), []
    for x in u:                            # torch7: remove the drawn mass, renormalise, search again
        cum[-1] = 1.0
        s = int(np.searchsorted(cum, x, side="left"))
        want.append(s + 1)
        mass = cum[s] - (cum[s - 1] if s > 0 else 0.0)
        cum = np.where(np.arange(4) >= s, cum - mass, cum) / (1 - mass)
    np.testing.assert_array_equal(got, want)


def test_multinomial_result_and_generator(lua):
    same, res = ev("""(function()
      local g = torch.Generator(); torch.manualSeed(g, 4)
      local r = torch.LongTensor(7)
      return torch.multinomial(r, g, torch.Tensor{1, 3}, 5, true) == r, r end)()""")
    assert same is True
    np.testing.assert_array_equal(N(res), torch7_multinomial(np.array([1.0, 3.0]), raw(4, 5) / TWO32))


@pytest.mark.parametrize("code, message", [
    ("torch.multinomial(torch.Tensor{1, 2}, 3)", "without replacement"),
    ("torch.multinomial(torch.Tensor{1, 0, 0}, 2, false)", "only 1 positive"),
    ("torch.multinomial(torch.Tensor{0, 0}, 1, true)", "sum of probabilities <= 0"),
    ("torch.multinomial(torch.Tensor{1, -1, 2}, 1, true)", "invalid multinomial distribution"),
    ("torch.multinomial(torch.Tensor{1, 0/0}, 1, true)", "invalid multinomial distribution"),
    ("torch.multinomial(torch.Tensor(2, 2, 2):fill(1), 1)", "1D or 2D"),
    ("torch.multinomial(torch.Tensor{1, 2}, 0, true)", "n_sample must be a positive integer"),
    ("torch.multinomial(torch.Tensor{1, 2}, 1.5, true)", "n_sample must be a positive integer"),
    ("torch.multinomial(torch.IntTensor(2), torch.Tensor{1, 2}, 1)", "LongTensor"),
    ("torch.multinomial(torch.Tensor{1, 2}, 1, 'yes')", "replacement must be a boolean"),
])
def test_multinomial_errors(lua, code, message):
    assert_lua_error(code, message)


# ---------------------------------------------------------------------------------------------
# alias method


def alias_probabilities(J: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The category probabilities an alias table (1-based J) draws with."""
    k = len(J)
    p = q / k
    np.add.at(p, J - 1, (1 - q) / k)
    return p


def test_alias_setup_encodes_probs(lua, rng):
    probs = rng.random(50)
    probs[[3, 17]] = 0
    state = lua_fn("function(p) return torch.multinomialAliasSetup(p) end")(luabridge.from_numpy(probs))
    J, q = N(state[1]), N(state[2])
    assert J.dtype == np.int64 and J.min() >= 1 and J.max() <= 50
    assert q.min() >= 0 and q.max() <= 1
    np.testing.assert_allclose(alias_probabilities(J, q), probs / probs.sum(), atol=1e-12)
    same = lua_fn("function(p, s) return torch.multinomialAliasSetup(p, s) == s end")(
        luabridge.from_numpy(probs[::-1].copy()), state)
    assert same is True
    np.testing.assert_allclose(alias_probabilities(N(state[1]), N(state[2])), probs[::-1] / probs.sum(), atol=1e-12)


def test_alias_draws(lua):
    probs = np.array([0.05, 0.5, 0.0, 0.25, 0.2])
    out = N(lua_fn("""function(p)
      torch.manualSeed(2)
      local state = torch.multinomialAliasSetup(p)
      local out = torch.LongTensor(400, 500)
      assert(torch.multinomialAlias(out, state) == out)
      return out
    end""")(luabridge.from_numpy(probs)))
    counts = np.bincount(out.ravel(), minlength=6)[1:]
    assert counts[2] == 0
    expected = probs * out.size
    live = expected > 0
    assert ((counts[live] - expected[live]) ** 2 / expected[live]).sum() < 25
    # torch7's draw: slot = floor(u * K), keep it when the next uniform <= q[slot], else J[slot]
    state = lua_fn("function(p) return torch.multinomialAliasSetup(p) end")(luabridge.from_numpy(probs))
    J, q = N(state[1]), N(state[2])
    got = N(lua_fn("function(s) torch.manualSeed(6); return torch.multinomialAlias(torch.LongTensor(300), s[1], s[2]) end")(state))
    u = (raw(6, 600) / TWO32).reshape(300, 2)
    slot = np.floor(u[:, 0] * 5).astype(int)
    np.testing.assert_array_equal(got, np.where(u[:, 1] <= q[slot], slot + 1, J[slot]))


def test_alias_errors(lua):
    assert_lua_error("torch.multinomialAliasSetup(torch.Tensor(2, 2):fill(1))", "probs must be a 1D")
    assert_lua_error("torch.multinomialAliasSetup(torch.Tensor(3):zero())", "sum of probabilities")
    assert_lua_error("torch.multinomialAlias(torch.Tensor(3), torch.multinomialAliasSetup(torch.Tensor{1, 2}))", "output must be a torch.LongTensor")
    assert_lua_error("torch.multinomialAlias(torch.LongTensor(3), {torch.LongTensor{1, 7}, torch.Tensor{1, 1}})", "invalid alias table")
