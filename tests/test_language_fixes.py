"""What Torch7 NLP and sequence-model code (tools/corpus/language.toml) relies on.

nn.Container:add(nil) does nothing: torch7's Container.add was `table.insert(self.modules, module)`,
which appends nothing for nil. OpenNMT's onmt.Network(net) calls self:add(net) before subclasses
(onmt.Generator, onmt.Bridge) :set() their network, so they are built with net = nil.
nn.Sequential:add(nil) still fails, as torch7's read module.gradInput of the nil module."""
from __future__ import annotations

import re

import pytest

import luabridge


def test_container_add_nil_is_a_noop_like_torch7(lua):
    n, same, after = lua.execute("""
      require 'nn'
      local c = nn.ConcatTable()
      local r = c:add(nil)
      c:add(nn.Identity())
      return #c.modules, r == c, torch.type(c.modules[1])""")
    assert (n, same, after) == (1, True, "nn.Identity")


def test_container_subclass_built_empty_then_set(lua):
    """onmt.Network's pattern: parent.__init, self:add(nil), later self.modules = {net}."""
    out = lua.execute("""
      require 'nn'
      local Net, parent = torch.class('langtest.Net', 'nn.Container')
      function Net:__init(net) parent.__init(self); self:add(net) end
      function Net:updateOutput(x) self.output = self.modules[1]:updateOutput(x); return self.output end
      local n = langtest.Net()
      n.modules = {nn.MulConstant(3)}
      local y = n:forward(torch.Tensor({1, 2}))
      return #n.modules, y[1], y[2]""")
    assert tuple(out) == (1, 3.0, 6.0)


@pytest.mark.parametrize("code, message", [
    ("nn.Sequential():add(nil)", "nn.Sequential:add: module must be an nn.Module, got nil"),
    ("nn.ConcatTable():add(2)", "nn.ConcatTable:add: module must be an nn.Module, got 2"),
])
def test_container_add_still_refuses_non_modules(lua, code, message):
    with pytest.raises(luabridge.LuaError, match=message.replace(".", r"\.")):
        lua.execute("require 'nn'; return " + code)


def test_copy_keeps_module_share_callable(lua):
    """nn.Copy's sharing flag must not hide Module:share: OpenNMT's Sequencer clones a net holding
    nn.Copy(nil, nil, true, true) with clone('weight', 'gradWeight', ...), which calls :share."""
    shares, copies, clone_type, clone_out = lua.execute("""
      require 'nn'
      local seq = nn.Sequential():add(nn.Copy(nil, nil, true, true)):add(nn.Linear(3, 2)):add(nn.Copy())
      local c = seq:clone('weight', 'bias', 'gradWeight', 'gradBias')
      local x = torch.randn(4, 3)
      local shares = c.modules[2].weight:storage() == seq.modules[2].weight:storage()
      local forced = nn.Copy(nil, nil, true)
      local y = forced:forward(x)
      local copies = torch.pointer(y:storage()) ~= torch.pointer(x:storage()) and y:equal(x)
      local same = nn.Copy():forward(x)
      return shares, copies, torch.type(c.modules[1]),
             (c:forward(x) - seq:forward(x)):abs():max() == 0 and same:storage() == x:storage()""")
    assert (shares, copies, clone_type, clone_out) == (True, True, "nn.Copy", True)


def test_gmodule_passes_on_a_missing_input_gradient(lua):
    """A node whose module gives no gradient for one of its inputs ({g, nil}, as OpenNMT's
    onmt.PositionEmbedding does for the source lengths): torch7's nngraph table.insert-ed the nil,
    so that input's node got no gradient and the gModule's gradInput has nil there."""
    g1, g2_nil, total = lua.execute("""
      require 'nngraph'
      local M = torch.class('langtest.FirstOnly', 'nn.Module')
      function M:updateOutput(input) self.output = input[1]:clone():mul(2); return self.output end
      function M:updateGradInput(input, gradOutput)
        self.gradInput = gradOutput:clone():mul(2)
        return {self.gradInput, nil}
      end
      local x, len = nn.Identity()(), nn.Identity()()
      local y = langtest.FirstOnly()({x, len})
      local g = nn.gModule({x, len}, {nn.CAddTable()({y, x})})
      local input = {torch.randn(3, 4), torch.Tensor({4, 2, 3})}
      g:forward(input)
      local go = torch.randn(3, 4)
      local gi = g:backward(input, go)
      return (gi[1] - go * 3):abs():max(), gi[2] == nil, #g.modules""")
    assert g1 < 1e-12 and g2_nil is True and total == 4


# bit32 (lua/bit32.lua): Lua 5.2's library on LuaJIT's bit, values checked against Python's
# integers (Lua 5.2 semantics: arguments modulo 2^32, unsigned results, shifts >= 32 give 0).
M32 = 0xFFFFFFFF


def _sh(x, d):
    x &= M32
    if d <= -32 or d >= 32:
        return 0
    return (x << d) & M32 if d >= 0 else x >> -d


def _ar(x, d):
    x &= M32
    if d < 0:
        return _sh(x, -d)
    s = x - (1 << 32) if x & 0x80000000 else x
    return (s >> min(d, 63)) & M32


def _rot(x, d):
    x, d = x & M32, d % 32
    return ((x << d) | (x >> (32 - d))) & M32 if d else x


BIT32_CASES = [
    ("band()", M32), ("bor()", 0), ("bxor()", 0),
    ("band(-1, 0xff00)", 0xFF00), ("bor(0x10, 0x01, 0x100)", 0x111), ("bxor(5, 3, 1)", 5 ^ 3 ^ 1),
    ("bnot(0)", M32), ("bnot(-1)", 0), ("bnot(2^32 + 5)", ~5 & M32),
    ("lshift(1, 31)", _sh(1, 31)), ("lshift(1, 32)", 0), ("lshift(0xF0, -4)", _sh(0xF0, -4)),
    ("rshift(-1, 4)", _sh(-1, -4)), ("rshift(-1, 32)", 0), ("rshift(1, -3)", 8),
    ("arshift(-8, 1)", _ar(-8, 1)), ("arshift(2^31, 40)", _ar(2**31, 40)), ("arshift(0x70000000, 40)", 0),
    ("arshift(-1, -4)", _sh(-1, 4)),
    ("lrotate(1, -1)", _rot(1, -1)), ("rrotate(1, 1)", _rot(1, -1)), ("lrotate(0x80000001, 33)", _rot(0x80000001, 33)),
    ("extract(0xF0, 4, 4)", (0xF0 >> 4) & 0xF), ("extract(-1, 31)", 1), ("extract(0x12345678, 0, 32)", 0x12345678),
    ("replace(0, 7, 29, 3)", 7 << 29), ("replace(-1, 0, 8, 8)", M32 & ~(0xFF << 8)), ("replace(0x10, 1, 0)", 0x11),
]


@pytest.mark.parametrize("expr, expected", BIT32_CASES)
def test_bit32_matches_lua52(lua, expr, expected):
    got = lua.execute("local b = require 'bit32'; return b." + expr)
    assert got == expected


def test_bit32_btest_and_errors(lua):
    t, f = lua.execute("local b = require 'bit32'; return b.btest(4, 6), b.btest(4, 3)")
    assert (t, f) == (True, False)
    for expr, message in [("extract(1, 30, 4)", "trying to access non-existent bits"),
                          ("extract(1, -1)", "field cannot be negative"),
                          ("replace(1, 1, 0, 0)", "width must be positive"),
                          ("band(1, {})", "bad argument #2 to 'band' (number expected, got table)")]:
        with pytest.raises(luabridge.LuaError, match=re.escape(message)):
            lua.execute("local b = require 'bit32'; return b." + expr)


def test_bit32_utf8_decode_as_opennmt(lua):
    """OpenNMT's unicode._utf8_to_cp pattern: mask the lead byte, shift in continuation bytes."""
    cps = lua.execute("""
      local b = require 'bit32'
      local s, out, i = 'a\\195\\169\\226\\130\\172', {}, 1
      while i <= #s do
        local c = s:byte(i)
        local l = c < 0x80 and 0 or (c < 0xE0 and 1 or 2)
        local v = b.band(c, b.rshift(0xff, l + (l > 0 and 1 or 0)))
        for k = 1, l do v = b.bor(b.lshift(v, 6), b.band(s:byte(i + k), 0x3F)) end
        out[#out + 1] = v
        i = i + l + 1
      end
      return table.concat(out, ',')""")
    assert cps == ",".join(str(ord(ch)) for ch in "aé€")


def test_parallel_without_dimensions_gathers_parameters(lua):
    """torch7's nn.Parallel(inputDimension, outputDimension) only stored its arguments; treelstm's
    TreeLSTMSim builds nn.Parallel():add(treelstm):add(sim_module) just for :getParameters()."""
    n, grads = lua.execute("""
      require 'nn'
      local p = nn.Parallel():add(nn.Linear(3, 2)):add(nn.Linear(2, 5))
      local params, gradParams = p:getParameters()
      return params:nElement(), gradParams:nElement()""")
    assert (n, grads) == (3 * 2 + 2 + 2 * 5 + 5,) * 2
    with pytest.raises(luabridge.LuaError, match="nn.Parallel: inputDimension must be an integer in \\[1, 64\\], got nil"):
        lua.execute("require 'nn'; return nn.Parallel():add(nn.Linear(3, 2)):forward(torch.randn(2, 3))")


def test_env_package_sets_torch7s_first_globals(lua):
    """`require 'env'` (torch/env, Torch 7.0's environment before trepl): torch loaded, import, who,
    exit, setprintlevel and table() holding table's functions."""
    got = lua.execute("""
      require 'env'
      local t = table()
      t:insert(1); t:insert(2)
      local ok, err = pcall(setprintlevel, -1)
      return type(torch.Tensor), type(import), type(who), type(exit), type(setprintlevel),
             t[1] + t[2], t.insert == table.insert, ok, tostring(err):match('expected number') ~= nil""")
    assert tuple(got) == ("table", "function", "function", "function", "function", 3, True, False, True)


def test_thnn_lookuptable_accgradparameters_matches_numpy(lua):
    """nn.THNN.LookupTable_accGradParameters as THNN's C: gradWeight[input[i]] += scale * gradOutput[i],
    the padding index skipped, and with scaleGradByFreq each row divided by its index's count."""
    import numpy as np
    inp = [3, 1, 3, 5, 2, 3]
    rng = np.random.default_rng(7)
    go = rng.standard_normal((6, 4))
    flat = ", ".join(repr(float(v)) for v in go.ravel())
    for freq, pad, scale in [(False, 0, 1.0), (True, 0, 0.5), (False, 2, 2.0), (True, 3, 1.0)]:
        expected = np.zeros((5, 4))
        counts = np.bincount(inp, minlength=6)[1:]
        for i, k in enumerate(inp):
            if k != pad:
                expected[k - 1] += scale / (counts[k - 1] if freq else 1) * go[i]
        got = lua.execute(f"""
          require 'nn'; local THNN = require 'nn.THNN'
          local go = torch.Tensor({{{flat}}}):view(6, 4)
          local gw, count = torch.zeros(5, 4), torch.IntTensor()
          gw.THNN.LookupTable_accGradParameters(torch.LongTensor({{{", ".join(map(str, inp))}}}):cdata(), go:cdata(),
            gw:cdata(), count:cdata(), THNN.optionalTensor(nil), THNN.optionalTensor(nil),
            {str(freq).lower()}, {pad}, {scale})
          local out = {{count:nElement()}}
          for _, v in ipairs(gw:view(-1):totable()) do out[#out + 1] = v end
          return unpack(out)""")
        assert got[0] == (5 if freq else 0)
        assert np.allclose(np.array(got[1:]).reshape(5, 4), expected)


def test_thnn_lookuptable_renorm_and_range_error(lua):
    import numpy as np
    w = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    got = lua.execute("""
      require 'nn'; require 'nn.THNN'
      local w = torch.Tensor({{3, 4}, {0.3, 0.4}, {6, 8}})
      w.THNN.LookupTable_renorm(torch.LongTensor({1, 2, 1}):cdata(), w:cdata(), 1, 2)
      return w[1][1], w[1][2], w[2][1], w[3][1]""")
    assert np.allclose(got, [3 / (5 + 1e-7), 4 / (5 + 1e-7), 0.3, 6.0])
    with pytest.raises(luabridge.LuaError, match=r"LookupTable_accGradParameters: input out of range: indices must be in \[1, 5\], got values in \[0, 3\]"):
        lua.execute("""require 'nn'; require 'nn.THNN'
          local gw = torch.zeros(5, 2)
          gw.THNN.LookupTable_accGradParameters(torch.LongTensor({0, 3}):cdata(), torch.zeros(2, 2):cdata(), gw:cdata(),
            torch.IntTensor():cdata(), nil, nil, false, 0, 1)""")
