"""Fuzzes luabridge.torch.convert and load_lua with random module trees, valid and corrupted.

    python tests/fuzz_convert.py --cases 100000 [--seed S] [--chunk N]
    python tests/fuzz_convert.py --seed S --case I          (one case, here, with its Lua source)

A case builds a random valid tree of convertible classes (layers on vectors or on images;
Sequential, Concat, DepthConcat, ConcatTable with a table layer, ParallelTable, MapTable, Bottle,
Decorator, nngraph gModules with splits), in evaluation mode. Most cases then corrupt it once: a
field of a random module set to a wrong value (nil, a string, a table, a number out of kind, a
tensor of the wrong type, shape or size, a module), a gap in a container's modules, a cycle (a
container holding itself or an ancestor), garbled nngraph nodes; some wrap a subtree 200 to 600
levels deep, which stays valid. Then the tree is converted, saved with torch.save and read back
with load_lua.

A case fails on an exception other than ConversionError (convert, load_lua) or LuaError
(torch.save, load_lua), on a ConversionError whose message does not name the class (and, for a
malformed module, the field), on a LuaError that is a Lua runtime error ("attempt to index"), on
a valid tree that either rejects, and on a valid tree whose converted module or loaded LuaModule
computes other outputs than the Lua module (float64, to 1e-9), and on a crash or hang. Cases run
in child processes through tests/fuzz_tensor.py's runner; a case is a function of (seed, case
number): a failure replays from them.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_tensor  # noqa: E402 - the runner, beside this file

# Layers on a batch of vectors (N x width), each keeping the shape; @ stands for the width
VECTOR_LAYERS = (
    "nn.Linear(@, @)", "nn.Linear(@, @, false)", "nn.LinearWeightNorm(@, @)", "nn.Tanh()", "nn.Sigmoid()",
    "nn.ReLU()", "nn.ReLU6()", "nn.ELU(0.7)", "nn.LeakyReLU(0.1)", "nn.SoftPlus()", "nn.HardTanh(-0.5, 0.5)",
    "nn.Clamp(-1, 1)", "nn.Threshold(0.1, -1)", "nn.Abs()", "nn.MulConstant(1.5)", "nn.AddConstant(-0.3)",
    "nn.CMul(@)", "nn.Mul()", "nn.CAdd(@)", "nn.Add(@)", "nn.PReLU(@)", "nn.BatchNormalization(@)",
    "nn.SoftMax()", "nn.LogSoftMax()", "nn.SoftMin()", "nn.Identity()", "nn.Contiguous()", "nn.Normalize(2)",
    "nn.Dropout(0.3)", "nn.SoftShrink(0.2)", "nn.HardShrink(0.2)", "nn.SoftSign()", "nn.LogSigmoid()",
    "nn.TanhShrink()", "nn.Square()", "nn.Power(2)", "nn.View(-1, @)", "nn.Reshape(@)", "nn.GradientReversal()",
    "nn.ZeroGrad()", "nn.Transpose({1, 2}, {1, 2})", "nn.Sequential()",
)
# Layers on a batch of images (N x planes x H x W), each keeping the shape; @ stands for the planes
IMAGE_LAYERS = (
    "nn.SpatialConvolution(@, @, 3, 3, 1, 1, 1, 1)", "nn.SpatialConvolution(@, @, 1, 1):noBias()",
    "nn.SpatialConvolutionMM(@, @, 3, 3, 1, 1, 1, 1)", "nn.SpatialDilatedConvolution(@, @, 3, 3, 1, 1, 2, 2, 2, 2)",
    "nn.SpatialFullConvolution(@, @, 3, 3, 1, 1, 1, 1)", "nn.SpatialDepthWiseConvolution(@, 1, 3, 3, 1, 1, 1, 1)",
    "nn.SpatialMaxPooling(3, 3, 1, 1, 1, 1)", "nn.SpatialAveragePooling(3, 3, 1, 1, 1, 1)",
    "nn.SpatialBatchNormalization(@)", "nn.SpatialDropout(0.2)", "nn.SpatialCrossMapLRN(3)", "nn.ReLU()",
    "nn.Tanh()", "nn.SpatialSoftMax()",
    "nn.Sequential():add(nn.SpatialZeroPadding(1, 1, 1, 1)):add(nn.SpatialMaxPooling(3, 3, 1, 1))",
    "nn.Sequential():add(nn.SpatialReplicationPadding(1, 1, 1, 1)):add(nn.SpatialConvolution(@, @, 3, 3))",
    "nn.Sequential():add(nn.SpatialUpSamplingNearest(2)):add(nn.SpatialAveragePooling(2, 2, 2, 2))",
)
TABLE_LAYERS = ("nn.CAddTable()", "nn.CMulTable()", "nn.CMaxTable()", "nn.CMinTable()", "nn.CSubTable()")

PACKAGES = "nngraph"   # required by each child before its cases

# Values a corrupted field takes
BAD_VALUES = (
    "nil", "'x'", "'3'", "{}", "{1, 2}", "true", "false", "0", "-1", "2.5", "0/0", "1/0", "1e300", "-2^40",
    "torch.randn(1)", "torch.Tensor()", "torch.LongTensor(2, 2):zero()", "torch.randn(7, 5)",
    "torch.FloatTensor(3):fill(1)", "nn.Tanh()", "nn.Linear(2, 2)", "torch.LongStorage({2, 2})", "{nn.Tanh()}",
    "{[2] = nn.Tanh()}", "function() end",
)

# Lua run around the tree: E puts every module in evaluation with random running statistics;
# `modules(root)` lists (module, its ancestors) over every child field, gModule nodes included;
# the corruptions pick among them with the case's numbers.
PRELUDE = r"""
local function E(root)
  for _, m in ipairs(root:listModules()) do
    if m.running_mean then m.running_mean:normal(); m.running_var:uniform(0.5, 2) end
  end
  root:evaluate()
  return root
end
local function modules(root)
  local out, seen = {}, {}
  local function walk(m, ancestors)
    if seen[m] then return end
    seen[m] = true
    out[#out + 1] = { m, ancestors }
    local above = { unpack(ancestors) }
    above[#above + 1] = m
    for _, c in ipairs(m.modules or {}) do walk(c, above) end
    if m.module then walk(m.module, above) end
  end
  walk(root, {})
  return out
end
local function pick(list, k) return list[(k % #list) + 1] end
local function fieldNames(m)
  local names = {}
  for k in pairs(m) do if type(k) == 'string' and not k:match('^_') then names[#names + 1] = k end end
  table.sort(names)
  return names
end
local function containers(root)
  local out = {}
  for _, e in ipairs(modules(root)) do
    if type(e[1].modules) == 'table' and #e[1].modules >= 1 then out[#out + 1] = e end
  end
  return out
end
local function graphs(root)
  local out = {}
  for _, e in ipairs(modules(root)) do if torch.type(e[1]) == 'nn.gModule' then out[#out + 1] = e[1] end end
  return out
end
"""


class _Tree:
    """Random valid trees as Lua expressions, within a budget of modules."""

    def __init__(self, rng: random.Random, image: bool, width: int) -> None:
        self.rng, self.image, self.width = rng, image, width
        self.budget = rng.randint(1, 8)

    def leaf(self) -> str:
        layers = IMAGE_LAYERS if self.image else VECTOR_LAYERS
        return self.rng.choice(layers).replace("@", str(self.width))

    def two(self, depth: int) -> tuple[str, str]:
        return self.module(depth + 1), self.module(depth + 1)

    def module(self, depth: int = 0) -> str:
        self.budget -= 1
        r = self.rng.random()
        if self.budget <= 0 or depth >= 4 or r < 0.45:
            return self.leaf()
        w, dim = self.width, 2
        if r < 0.6:
            children = "".join(f":add({self.module(depth + 1)})" for _ in range(self.rng.randint(1, 3)))
            return f"nn.Sequential(){children}"
        if r < 0.67:
            cls = self.rng.choice(("nn.Concat", "nn.DepthConcat"))
            a, b = self.two(depth)
            merge = f"nn.SpatialConvolution({2 * w}, {w}, 1, 1)" if self.image else f"nn.Linear({2 * w}, {w})"
            return f"nn.Sequential():add({cls}({dim}):add({a}):add({b})):add({merge})"
        if r < 0.75:
            a, b = self.two(depth)
            return f"nn.Sequential():add(nn.ConcatTable():add({a}):add({b})):add({self.rng.choice(TABLE_LAYERS)})"
        if r < 0.8:
            a, b = self.two(depth)
            c, d = self.two(depth)
            return (f"nn.Sequential():add(nn.ConcatTable():add({a}):add({b}))"
                    f":add(nn.ParallelTable():add({c}):add({d})):add(nn.CAddTable())")
        if r < 0.84:
            a, b = self.two(depth)
            return f"nn.Sequential():add(nn.ConcatTable():add({a}):add(nn.Identity())):add(nn.MapTable({b})):add(nn.CAddTable())"
        if r < 0.88:
            decorator = "Decorator" if self.image else self.rng.choice(("Decorator", "Bottle"))
            return f"nn.{decorator}({self.module(depth + 1)})"
        return self.graph(depth)

    def graph(self, depth: int) -> str:
        """A gModule: two branches from its input, or one split in two, added."""
        a, b = self.two(depth)
        if self.rng.random() < 0.5:
            body = f"local p, q = nn.ConcatTable():add({a}):add({b})(x):split(2)"
        else:
            body = f"local p, q = ({a})(x), ({b})(x)"
        return (f"(function() local x = nn.Identity()(); {body}; "
                f"return nn.gModule({{x}}, {{nn.CAddTable()({{p, q}})}}) end)()")


def _corruption(rng: random.Random) -> str:
    """Lua that corrupts `model` once (or deepens it) and sets `corrupted`."""
    k1, k2, k3 = (rng.randrange(1 << 20) for _ in range(3))
    kind = rng.choices(("valid", "field", "gap", "cycle", "graph", "deep"), (25, 46, 8, 8, 10, 3))[0]
    bad = rng.choice(BAD_VALUES)
    if kind == "field":
        return f"""local m = pick(modules(model), {k1})[1]
local names = fieldNames(m)
if #names > 0 then m[pick(names, {k2})] = {bad}; corrupted = true end"""
    if kind == "gap":
        return f"""local c = containers(model)
if #c > 0 then
  local m = pick(c, {k1})[1]
  if #m.modules >= 2 then m.modules[({k2} % (#m.modules - 1)) + 1] = nil else m.modules[2] = nn.Tanh(); m.modules[1] = nil end
  corrupted = true
end"""
    if kind == "cycle":
        return f"""local c = containers(model)
if #c > 0 then
  local e = pick(c, {k1})
  local above = {{ e[1], unpack(e[2]) }}
  e[1].modules[({k2} % #e[1].modules) + 1] = pick(above, {k3})
  corrupted = true
end"""
    if kind == "graph":
        garbles = ("n.data.mapindex = {{}}", "n.data.mapindex = 'x'", "n.data.module = nn.Tanh()",
                   "n.data.module = 'x'", "n.data.selectindex = 'x'", "n.data.selectindex = 0",
                   "g.forwardnodes[i] = 7", "g.forwardnodes[i] = nil", "g.outnode = {data = {}}", "g.forwardnodes = nil",
                   "g.modules[1] = nil", "n.data = nil", f"n.data.module = {bad}")
        return f"""local gs = graphs(model)
if #gs > 0 then
  local g = pick(gs, {k1})
  local i = ({k2} % #g.forwardnodes) + 1
  local n = g.forwardnodes[i]
  {rng.choice(garbles)}
  corrupted = true
end"""
    if kind == "deep":
        return f"""local e = pick(modules(model), {k1})
local parent = e[2][#e[2]]
local inner = e[1]
for i = 1, {rng.randint(200, 600)} do inner = nn.Sequential():add(inner) end
if parent and parent.modules and torch.type(parent) ~= 'nn.gModule' then
  for j, c in ipairs(parent.modules) do if c == e[1] then parent.modules[j] = inner end end
  if parent.module == e[1] then parent.module = inner end
elseif not parent then model = inner end
model:evaluate()   -- the new containers too: a LuaModule runs its tree in its root's mode"""
    return ""


def make_case(seed: int, case: int) -> str:
    """The Lua source of one case: it returns the model, its input and whether it was corrupted."""
    rng = random.Random(seed * 1_000_003 + case)
    image = rng.random() < 0.3
    width = rng.randint(1, 3) if image else rng.randint(2, 5)
    model = _Tree(rng, image, width).module()
    shape = f"2, {width}, {rng.randint(4, 6)}, {rng.randint(4, 6)}" if image else f"{rng.randint(1, 3)}, {width}"
    return (f"{PRELUDE}\ntorch.manualSeed({case % 100000})\nlocal model = E({model})\n"
            f"local input, corrupted = torch.randn({shape}), false\n{_corruption(rng)}\n"
            "return model, input, corrupted")


CHILD = r"""
import json, os, resource, signal, sys
records = os.fdopen(os.dup(1), 'w')
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
signal.signal(signal.SIGALRM, signal.SIG_DFL)
signal.signal(signal.SIGPROF, signal.SIG_DFL)
sys.path.insert(0, @HERE@)
import fuzz_convert, luabridge, luabridge.torch   # torch too: the cap counts from what they take
for package in sys.argv[4].split(','):
    luabridge.require(package)
size = int(open('/proc/self/status').read().split('VmSize:')[1].split()[0]) << 10
limit = size + (int(sys.argv[1]) << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
for line in sys.stdin:
    case, code = json.loads(line)
    print(json.dumps([case, 'start']), file=records, flush=True)
    signal.setitimer(signal.ITIMER_PROF, int(sys.argv[3]))
    signal.alarm(10 * int(sys.argv[3]))
    kind, message = fuzz_convert.check(code)
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.alarm(0)
    print(json.dumps([case, kind, message]), file=records, flush=True)
""".replace("@HERE@", repr(str(Path(__file__).resolve().parent)))


def _unclear(error: Exception) -> str | None:
    """What a library error's message fails to say, None when it is clear."""
    from luabridge.torch import ConversionError
    text = str(error).split("\nstack traceback")[0]
    if any(p in text for p in fuzz_tensor.UNCLEAR):
        return f"a Lua runtime error: {text}"
    if isinstance(error, ConversionError):
        if not (error.typename.count(".") == 1 and str(error).startswith(f"{error.typename} at ")):
            return f"does not name the class: {text}"
        if error.malformed and not (error.field and f"field {error.field} " in text or "contains itself" in text):
            return f"does not name the field: {text}"
    return None


def check(code: str) -> tuple[str, str]:
    """Runs one case here: ('ok', '') or (failure, message)."""
    import numpy as np
    import torch

    import luabridge
    from luabridge.torch import ConversionError, convert
    from luabridge.torch.convert import recursion_room, tree_size

    luabridge.require("nngraph")
    try:
        model, x, corrupted = luabridge.execute(code)
    except luabridge.LuaError as e:
        return "build", str(e).split("\nstack traceback")[0]
    model = luabridge.wrap(model)
    results = {}
    for name, step in (("convert", lambda: convert(model)), ("load_lua", lambda: _saved_and_loaded(model))):
        try:
            results[name] = step()
        except (ConversionError, luabridge.LuaError) as e:
            if not corrupted:
                return "rejected", f"{name} of a valid tree: {e}"
            unclear = _unclear(e)
            if unclear:
                return "unclear", f"{name}: {unclear}"
        except Exception as e:   # anything but the library's own errors
            return "python", f"{name}: {type(e).__name__}: {e}"
    if corrupted:
        return "ok", ""
    want = np.array(luabridge.wrap(model.forward(x)))
    with recursion_room(tree_size(model)):   # PyTorch's forward recurses once per level
        for name, module in results.items():
            got = module(torch.from_numpy(np.array(luabridge.wrap(x)))).detach().numpy()
            if got.shape != want.shape or not np.allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=True):
                return "mismatch", f"{name}: {np.abs(got - want).max() if got.shape == want.shape else got.shape}"
    return "ok", ""


def _saved_and_loaded(model) -> object:
    import tempfile

    import luabridge
    from luabridge.torch import load_lua

    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "model.t7")
        luabridge.save(path, model)
        return load_lua(path)


if __name__ == "__main__":
    sys.exit(fuzz_tensor.main(make_case, PACKAGES, __doc__, CHILD))
