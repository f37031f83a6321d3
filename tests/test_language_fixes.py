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
