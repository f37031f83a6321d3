"""torchx (lua/torchx) against numpy and Python references: torch.find's row-major positions
(contiguous, transposed, per row, compared as Lua numbers), torch.group's sorted runs,
torch.concat against np.concatenate, torch.remap, torch.treemax against a numpy descent of the
tree and upstream's documented cases, torch.md5 against hashlib, torch.json against json,
paths.indexdir against os.walk, torchx.recursive*, torchx.Queue, and rnn's TrimZero keeping
the rows torch.find(zeroMask, 0) names."""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from lua_json import Runner, fresh_runner, runner


@pytest.fixture(scope="module")
def run() -> Runner:
    return runner("require 'torchx'")


@pytest.fixture(scope="module")
def run_rnn() -> Iterator[Runner]:
    yield from fresh_runner("require 'rnn'")  # rnn redefines nn.Dropout: a runtime of its own


def positions(mask: np.ndarray) -> list[int]:
    return [int(i) + 1 for i in np.flatnonzero(mask)]


# ---------------------------------------------------------------------------------- torch.find

def test_find_upstream_examples(run: Runner) -> None:
    # torchx's README: 2 sits at row-major positions 2 and 10 of the 2x5 matrix, 3 and 10 of its
    # transpose; per row, at column 2 of row 1 and column 5 of row 2.
    m = "torch.Tensor{{1,2,3,4,5},{5,6,0.6,0,2}}"
    assert run("return torch.find(torch.Tensor{1,2,3,1,1,2}, 1)") == [1, 4, 5]
    assert run(f"return torch.find({m}, 2)") == [2, 10]
    assert run(f"return torch.find({m}:t(), 2)") == [3, 10]
    assert run(f"return torch.find({m}, 2, 2)") == [[2], [5]]
    got = run(f"local r = torch.find({m}:t(), 2, 2) return {{#r[1], r[2][1], #r[3], #r[4], r[5][1]}}")
    assert got == [0, 1, 0, 0, 2]


@pytest.mark.parametrize("kind", ["Double", "Float", "Long", "Byte"])
def test_find_matches_numpy(run: Runner, kind: str) -> None:
    a = np.random.default_rng(3).integers(0, 4, size=(6, 7))
    lua = "torch.%sTensor(%s)" % (kind, json.dumps(a.tolist()).replace("[", "{").replace("]", "}"))
    got = run(f"""local t = {lua}
      return {{torch.find(t, 2), torch.find(t:t(), 2), torch.find(t:narrow(2, 2, 4), 2), torch.find(t, 2, 2)}}""")
    assert got[0] == positions(a == 2)
    assert got[1] == positions(a.T == 2)
    assert got[2] == positions(a[:, 1:5] == 2)
    assert [r or [] for r in got[3]] == [positions(row == 2) for row in a]


def test_find_compares_as_lua_numbers(run: Runner) -> None:
    # a FloatTensor holds float32(0.6), which is not the Lua number 0.6 (torchx's apply loop)
    assert float(np.float32(0.6)) != 0.6
    assert run("return #torch.find(torch.FloatTensor{0.6, 1}, 0.6)") == 0
    assert run("return torch.find(torch.FloatTensor{0.5, 0.6, 0.5}, 0.5)") == [1, 3]
    assert run("return #torch.find(torch.Tensor(), 1)") == 0


def test_find_errors(run: Runner) -> None:
    with pytest.raises(Exception, match=r"torch.find: dim arg only supports dim=2 of a matrix, got dim=1 of a 2D"):
        run("return torch.find(torch.Tensor(2, 2), 1, 1)")
    with pytest.raises(Exception, match=r"torch.find: dim arg .* of a 3D tensor"):
        run("return torch.find(torch.Tensor(2, 2, 2), 1, 2)")


# --------------------------------------------------------------------------------- torch.group

def lua_vector(a: np.ndarray, kind: str = "") -> str:
    return f"torch.{kind}Tensor{{{', '.join(repr(float(x)) for x in a)}}}"


@pytest.mark.parametrize("desc", [False, True])
def test_group_runs_of_equal_values(run: Runner, desc: bool) -> None:
    a = np.random.default_rng(5).integers(0, 6, size=25).astype(float)
    got = run(f"""local groups, sorted, index = torch.group({lua_vector(a)}, nil, {str(desc).lower()})
      local out = {{}}
      for key, g in pairs(groups) do
        out[#out + 1] = {{key, g.idx:totable(), g.val:totable()}}
      end
      table.sort(out, function(x, y) return x[1] < y[1] end)
      return {{out, sorted:totable(), index:totable()}}""")
    groups, sorted_, index = got
    want_sorted = np.sort(a)[::-1] if desc else np.sort(a)
    assert sorted_ == want_sorted.tolist()
    assert [a[i - 1] for i in index] == sorted_
    assert [g[0] for g in groups] == sorted(set(a.tolist()))
    for key, idx, val in groups:
        assert sorted(idx) == positions(a == key)
        assert val == [key] * len(idx)


def test_group_upstream_example_and_given_buffers(run: Runner) -> None:
    # torchx's README: {5,3,4,5,3,5} groups into 3 (x2), 4 (x1), 5 (x3); the test's 1,2,0 case
    assert run("""local g = torch.group(torch.Tensor{5,3,4,5,3,5})
      return {g[3].idx:size(1), g[4].idx:size(1), g[5].idx:size(1)}""") == [2, 1, 3]
    assert run("local g = torch.group(torch.Tensor{1,2,0}) return {g[0].idx[1], g[1].idx[1], g[2].idx[1]}") == [3, 1, 2]
    got = run("""local val, idx = torch.FloatTensor(), torch.LongTensor()
      local g, v, i = torch.group(val, idx, torch.FloatTensor{2, 1, 2})
      return {v == val, i == idx, val:totable(), g[2].idx:totable()}""")
    assert got[:3] == [True, True, [1, 2, 2]]
    assert sorted(got[3]) == [1, 3]


def test_group_custom_samegrp(run: Runner) -> None:
    # a run lasts while a value is within 1 of the run's first value
    a = np.array([0.1, 3.5, 0.9, 2.0, 1.2, 3.0, 2.6])
    got = run(f"""local g = torch.group({lua_vector(a)}, function(first, v) return v - first < 1 end)
      local out = {{}}
      for key, r in pairs(g) do out[#out + 1] = {{key, r.val:totable()}} end
      table.sort(out, function(x, y) return x[1] < y[1] end)
      return out""")
    want, run_ = [], []
    for v in np.sort(a):
        if run_ and v - run_[0] >= 1:
            want.append([run_[0], run_])
            run_ = []
        run_ = run_ + [v]
    want.append([run_[0], run_])
    assert got == [[k, [float(x) for x in v]] for k, v in want]


def test_group_errors(run: Runner) -> None:
    with pytest.raises(Exception, match="torch.group: expecting a vector to group, got 2D tensor"):
        run("return torch.group(torch.Tensor(2, 2))")
    with pytest.raises(Exception, match="torch.group: expecting a torch.LongTensor index at arg 2, got torch.IntTensor"):
        run("return torch.group(torch.Tensor(), torch.IntTensor(), torch.Tensor{1})")


# -------------------------------------------------------------------------------- torch.concat

@pytest.mark.parametrize("dim", [1, 2, 3])
def test_concat_matches_numpy(run: Runner, dim: int) -> None:
    rng = np.random.default_rng(dim)
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for i, n in enumerate([1, 3, 2]):
        shapes[i][dim - 1] = n
    parts = [rng.integers(-50, 50, size=s) / 4 for s in shapes]  # exact through JSON
    lua = ", ".join("torch.Tensor(%s)" % json.dumps(p.tolist()).replace("[", "{").replace("]", "}") for p in parts)
    got = run(f"""local ts = {{{lua}}}
      local res = torch.concat(ts, {dim})
      local into = torch.Tensor(7):fill(9)
      local same = into:concat(ts, {dim}) == into
      return {{res:totable(), into:totable(), same}}""")
    want = np.concatenate(parts, axis=dim - 1)
    np.testing.assert_allclose(np.array(got[0]), want, rtol=0, atol=0)
    np.testing.assert_allclose(np.array(got[1]), want, rtol=0, atol=0)
    assert got[2] is True


def test_concat_types_and_errors(run: Runner) -> None:
    assert run("return torch.type(torch.concat({torch.Tensor(2), torch.LongTensor(1)}, 1, 2))") == "torch.LongTensor"
    assert run("return torch.concat({torch.LongTensor{1}, torch.LongTensor{2, 3}}):totable()") == [1, 2, 3]
    with pytest.raises(Exception, match="torch.concat: cannot concat dim 1 with different sizes: 2 ~= 3 for tensor at index 2"):
        run("return torch.concat({torch.Tensor(2, 4), torch.Tensor(3, 1)}, 2)")
    with pytest.raises(Exception, match="torch.concat: dim 3 out of range for a 2D tensor"):
        run("return torch.concat({torch.Tensor(2, 4)}, 3)")


# --------------------------------------------------------------------------------- torch.remap

def test_remap_adds_and_creates(run: Runner) -> None:
    got = run("""
      local t1 = {torch.Tensor{1, 2}, {torch.Tensor{3}, {torch.Tensor{4, 5, 6}}}}
      local t2 = {torch.Tensor{10, 20}, {torch.Tensor{30}, {torch.Tensor{40, 50, 60}}}}
      local r1, r2 = torch.remap(t1, t2, function(x, y) x:add(y) end)
      local _, t3 = torch.remap(t2, nil, function(x, y) y:resizeAs(x):copy(x):mul(2) end)
      local t4 = torch.remap(nil, t2, function(x, y) x:resize(y:size()):copy(y) end, torch.LongTensor())
      return {r1 == t1 and r2 == t2, t1[1]:totable(), t1[2][1]:totable(), t1[2][2][1]:totable(),
              t3[2][2][1]:totable(), torch.type(t4[1]), torch.type(t4[2][2][1]), t4[2][2][1]:totable()}""")
    assert got == [True, [11, 22], [33], [44, 55, 66], [80, 100, 120], "torch.LongTensor",
                   "torch.LongTensor", [40, 50, 60]]


def test_remap_errors(run: Runner) -> None:
    with pytest.raises(Exception, match="torch.remap: expecting a function at arg 3, got number"):
        run("return torch.remap({}, {}, 1)")
    with pytest.raises(Exception, match="torch.remap: expecting nested tensors or tables, got number and nil"):
        run("return torch.remap({1}, nil, print)")


# ------------------------------------------------------------------------------- torch.treemax

def treemax_reference(x: np.ndarray, tree: list[int]) -> tuple[float, int]:
    """The tree descent on float64: the child of greatest mean, the greatest leaf at the end."""
    start, span, value = 0, x, 0.0
    for level, n in enumerate(tree):
        children = span.reshape(n, -1)
        scores = children.mean(axis=1) if level < len(tree) - 1 else children[:, 0]
        best = int(np.argmax(scores))
        value = float(scores[best])
        start += best * children.shape[1]
        span = children[best]
    return value, start + 1


def test_treemax_upstream_cases(run: Runner) -> None:
    # torchx's test: means 13/6, 15/6, 25/6 pick the third sixth; then 3, 3.5, 6 the third pair
    # (positions 17, 18 = 7, 5): 7 at 17. With 27 at 6, the first sixth's mean wins instead.
    tree = "{3, 3, 2}"
    assert run(f"return {{torch.treemax(torch.Tensor{{0,0,0,0,0,13, 1,1,1,1,1,10, 0,6, 2,5, 7,5}}, {tree})}}") == [7, 17]
    assert run(f"return {{torch.treemax(torch.Tensor{{0,0,0,0,0,27, 1,1,1,1,1,10, 0,6, 2,5, 7,5}}, {tree})}}") == [27, 6]


@pytest.mark.parametrize("tree", [[4, 5, 3], [60], [2, 30], [3, 4, 5, 1]])
def test_treemax_matches_numpy(run: Runner, tree: list[int]) -> None:
    x = np.random.default_rng(len(tree)).standard_normal(60)
    lua_tree = "{" + ", ".join(map(str, tree)) + "}"
    got = run(f"""local x = {lua_vector(x)}
      local strided = torch.Tensor(60, 2):select(2, 1):copy(x)
      return {{{{torch.treemax(x, {lua_tree})}}, {{torch.treemax(strided, {lua_tree})}}}}""")
    value, index = treemax_reference(x, tree)
    for got_value, got_index in got:
        assert got_index == index
        assert got_value == pytest.approx(value, abs=1e-12)


def test_treemax_errors(run: Runner) -> None:
    with pytest.raises(Exception, match="torch.treemax: tree of 6 leaves for a vector of 5 elements"):
        run("return torch.treemax(torch.Tensor(5), {2, 3})")


# ------------------------------------------------------------------------------ md5, json, Queue

@pytest.mark.parametrize("text", ["", "a", "helloworld!", "x" * 55, "y" * 56, "z" * 64, "q" * 200, "\0\255 é"])
def test_md5_matches_hashlib(run: Runner, text: str) -> None:
    data = text.encode()
    got = run("local s = ... return {torch.md5.sumhexa(s), {torch.md5.sum(s):byte(1, -1)}}", data)
    assert got == [hashlib.md5(data).hexdigest(), list(hashlib.md5(data).digest())]


def test_json_round_trip(run: Runner) -> None:
    doc = {"a": [1, 2.5, "x"], "b": {"c": True}, "d": None}
    got = run("""local value, pos = torch.json.decode(...)
      local sentinel = torch.json.decode('[1, null, 3]', 1, 'NULL')
      local bad, where, message = torch.json.decode('{"a": ', 1)
      return {torch.json.encode(value), pos, sentinel, bad == nil, where, type(message)}""", json.dumps(doc))
    assert json.loads(got[0]) == {k: v for k, v in doc.items() if v is not None}
    assert got[1:] == [len(json.dumps(doc)) + 1, [1, "NULL", 3], True, 1, "string"]


def test_queue_is_fifo(run: Runner) -> None:
    got = run("""local q = torchx.Queue()
      local out = {q:empty()}
      for i = 1, 3 do q:put(i * 10) end
      out[#out + 1] = q:get(); q:put(40)
      while not q:empty() do out[#out + 1] = q:get() end
      out[#out + 1] = select(2, pcall(q.get, q)):match('empty') ~= nil
      return out""")
    assert got == [True, 10, 20, 30, 40, True]


def test_alias_multinomial_is_dpnns(run: Runner) -> None:
    got = run("""local certain = torch.AliasMultinomial(torch.Tensor{0, 1, 0})
      local draws = certain:batchdraw(torch.LongTensor(50))
      local counts = torch.Tensor(4):zero()
      torch.AliasMultinomial(torch.Tensor{0.1, 0.2, 0.3, 0.4}):batchdraw(torch.LongTensor(200000))
        :apply(function(k) counts[k] = counts[k] + 1 end)
      return {package.loaded['dpnn.AliasMultinomial'] ~= nil, certain:draw(), draws:min(), draws:max(),
              counts:div(200000):totable()}""")
    assert got[:4] == [True, 2, 2, 2]
    np.testing.assert_allclose(got[4], [0.1, 0.2, 0.3, 0.4], atol=0.006)  # 5 sigma of 200000 draws


# ------------------------------------------------------------------------------ paths.indexdir

def test_indexdir_matches_os_walk(run: Runner, tmp_path: Path) -> None:
    names = ["a.png", "b.JPG", "sub/c.jpg", "sub/deep/frame1.png", "d.txt", "sub/e.PnG", "f.png.bak"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")

    def wanted(exts: list[str], ignore: str | None = None) -> list[str]:
        found = []
        for root, _, files in os.walk(tmp_path):
            for f in files:
                if any(f.lower().endswith("." + e.lower()) for e in exts) and not (
                        ignore and fnmatch.fnmatch(f.lower(), ignore.lower())):
                    found.append(os.path.join(root, f))
        return sorted(found)

    body = """local files = paths.indexdir(...)
      local names = {}
      for i = 1, files:size() do names[i] = files:filename(i) end
      table.sort(names)
      return {names, files.tensor:size():totable(), torch.type(files.tensor)}"""
    d = str(tmp_path)
    names_png, shape, kind = run(body, d, "png")
    assert names_png == wanted(["png"])
    assert kind == "torch.CharTensor" and shape == [3, max(map(len, names_png)) + 1]
    assert run(body, d)[0] == wanted(["jpg", "png", "JPEG", "ppm", "bmp"])
    got = run("local f = paths.indexdir(..., {'png', 'jpg'}, false, '*frame*') local n = {} "
              "for i = 1, f:size() do n[i] = f:filename(i) end table.sort(n) return n", d)
    assert got == wanted(["png", "jpg"], "*frame*")
    # use_cache reads the list the last call left in the cache file
    (tmp_path / "new.png").write_text("x")
    assert run(body.replace("(...)", "(..., 'png', true)"), d)[0] == names_png
    assert run(body.replace("(...)", "(..., 'png', false)"), d)[0] == wanted(["png"])
    with pytest.raises(Exception, match="paths.indexdir: could not find any files in"):
        run("return paths.indexdir(..., 'nosuchext')", d)


# ---------------------------------------------------------------------------- torchx.recursive*

def test_recursive_helpers(run: Runner) -> None:
    got = run("""
      local src = {torch.Tensor{{1, 2}, {3, 4}, {5, 6}}, {torch.Tensor{7, 8, 9}}}
      local copy = torchx.recursiveCopy(nil, src)
      copy[1][1][1] = 100
      local sum = torchx.recursiveAdd(torchx.recursiveCopy(nil, src), src)
      local shared = torchx.recursiveSet(nil, src)
      local shapes = torchx.recursiveResizeAs(torch.Tensor(), src)
      local picked = torchx.recursiveIndex(nil, src, 1, torch.LongTensor{3, 1})
      return {
        src[1][1][1], sum[1]:totable(), sum[2][1]:totable(),
        shared[1]:storage() == src[1]:storage(), shapes[1]:size():totable(),
        picked[1]:totable(), picked[2][1]:totable(),
        torchx.recursiveSum(src), torchx.recursiveBatchSize(src),
        torchx.recursiveSize(src), torchx.recursiveSize(src, 1),
        torchx.recursiveSub(src, 2, 3)[2][1]:totable(),
        torchx.recursiveTensorEq(src, torchx.recursiveCopy(nil, src)),
        torchx.recursiveTensorEq(src, copy), torchx.recursiveTensorEq(src, {src[1]}) ,
        torch.type(torchx.recursiveType({src[1], 'x'}, 'torch.FloatTensor')[1]),
        torchx.recursiveFill(torchx.recursiveNew(src)[2], 1) and torchx.recursiveFill(torchx.recursiveResizeAs(nil, src), 2)[2][1]:totable(),
      }""")
    assert got == [
        1, [[2, 4], [6, 8], [10, 12]], [14, 16, 18],
        True, [3, 2],
        [[5, 6], [1, 2]], [9, 7],
        45, 3,
        [[3, 2], [[3]]], [[2], [{}]],  # an empty size table encodes as {}
        [8, 9],
        True, False, True,
        "torch.FloatTensor",
        [2, 2, 2],
    ]


def test_recursive_errors(run: Runner) -> None:
    with pytest.raises(Exception, match="torchx.recursiveCopy: expecting nested tensors or tables, got nil and number"):
        run("return torchx.recursiveCopy(nil, {1})")
    with pytest.raises(Exception, match="torchx.recursiveSum: expecting a tensor or a table thereof, got string"):
        run("return torchx.recursiveSum({'x'})")


# ------------------------------------------------------------------------------- rnn, TrimZero

def test_rnn_requires_torchx_and_trimzero_keeps_find_rows(run_rnn: Runner) -> None:
    x = np.random.default_rng(9).standard_normal((5, 3))
    x[[1, 3]] = 0
    lua_x = "torch.Tensor(%s)" % json.dumps(x.tolist()).replace("[", "{").replace("]", "}")
    got = run_rnn(f"""local m = nn.TrimZero(nn.Linear(3, 2), 1)
      local x = {lua_x}
      local y = m:forward(x)
      return {{package.loaded.torchx ~= nil, m._maskindices:totable(), torch.find(m.zeroMask, 0),
               y:totable(), m.modules[1].weight:totable(), m.modules[1].bias:totable()}}""")
    loaded, kept, found, y, w, b = got
    assert loaded is True
    assert kept == found == [1, 3, 5]
    want = x @ np.array(w).T + np.array(b)
    want[[1, 3]] = 0
    np.testing.assert_allclose(np.array(y), want, rtol=0, atol=1e-12)
