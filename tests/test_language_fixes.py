"""What Torch7 NLP and sequence-model code (tools/corpus/language.toml) relies on.

nn.Container:add(nil) does nothing: torch7's Container.add was `table.insert(self.modules, module)`,
which appends nothing for nil. OpenNMT's onmt.Network(net) calls self:add(net) before subclasses
(onmt.Generator, onmt.Bridge) :set() their network, so they are built with net = nil.
nn.Sequential:add(nil) still fails, as torch7's read module.gradInput of the nil module."""
from __future__ import annotations

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
