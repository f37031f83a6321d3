"""The elementwise table modules (CAddTable, CMulTable, CSubTable, CDivTable, CMaxTable,
CMinTable) and the pair and mixture modules (DotProduct, CosineDistance, PairwiseDistance,
MixtureTable) given tensors of mixed element types: the error names the module, the entry, its
type and size and the type expected (it named the tensor method inside, `add: expected
torch.FloatTensor, got torch.DoubleTensor`); the mixes torch7 ran still run, with the same values."""
from __future__ import annotations

import numpy as np
import pytest

import luabridge
from helpers import N, lua_fn, lua_value

# make(), the input as { {type, sizes, fill}, ... } (a nested table for CAddTensorTable / MixtureTable),
# pass 'forward' or 'backward' (then gradOutput's type): the error, or 'ok' and the output
_RUN = lua_fn("""function(make, spec, pass, goType)
  require 'nn'
  local m = loadstring('return ' .. make)()
  local function build(s)
    if type(s[1]) == 'table' then
      local t = {}
      for i, e in ipairs(s) do t[i] = build(e) end
      return t
    end
    return torch[s[1]](unpack(s[2])):fill(s[3])
  end
  local input = build(spec)
  local ok, err = pcall(function()
    if pass == 'forward' then return m:forward(input) end
    local go = torch[goType](unpack(spec[1][2])):fill(1)
    m:forward(input)
    return m:backward(input, go)
  end)
  if not ok then return tostring(err) end
  return 'ok', m.output
end""")

F = ["FloatTensor", [2, 3], 1.5]
D = ["DoubleTensor", [2, 3], 2.0]


def _error(make, spec, pass_="forward", go="FloatTensor"):
    got = _RUN(make, lua_value(spec), pass_, go)
    assert isinstance(got, str) and got != "ok", got
    return got


@pytest.mark.parametrize("name", ["CAddTable", "CMulTable", "CSubTable", "CDivTable", "CMaxTable", "CMinTable"])
def test_a_float_module_given_a_double_entry_names_itself(name):
    msg = _error(f"nn.{name}():float()", [F, D])
    assert msg.endswith(f"nn.{name}: input[2] is a torch.DoubleTensor of size 2x3, expected a "
                        "torch.FloatTensor (the output's type: convert the module or the input)"), msg


@pytest.mark.parametrize("name", ["CAddTable", "CMulTable", "CSubTable", "CDivTable", "CMaxTable", "CMinTable"])
def test_a_double_module_given_float_entries_names_itself(name):
    # the output (a DoubleTensor) takes input[1] by a copy, the others by the method: torch7 raised too
    msg = _error(f"nn.{name}()", [F, F])
    assert f"nn.{name}: input[2] is a torch.FloatTensor of size 2x3, expected a torch.DoubleTensor" in msg, msg


def test_the_third_entry_is_named():
    msg = _error("nn.CAddTable():float()", [F, F, D])
    assert "nn.CAddTable: input[3] is a torch.DoubleTensor of size 2x3, expected a torch.FloatTensor" in msg


def test_inplace_cadd_table():
    msg = _error("nn.CAddTable(true)", [F, D])
    assert "nn.CAddTable: input[2] is a torch.DoubleTensor of size 2x3, expected a torch.FloatTensor " \
           "(input[1]'s type: inplace)" in msg, msg
    # inplace, every gradInput entry is gradOutput itself: it must be of their type
    msg = _error("nn.CAddTable(true):float()", [F, F], "backward", "DoubleTensor")
    assert "nn.CAddTable: gradOutput is a torch.DoubleTensor of size 2x3, expected a torch.FloatTensor" in msg, msg


@pytest.mark.parametrize("make", ["nn.CMaxTable():float()", "nn.CMinTable():float()"])
def test_extremum_tables_name_a_gradoutput_of_another_type(make):
    msg = _error(make, [F, F], "backward", "DoubleTensor")
    assert "gradOutput is a torch.DoubleTensor of size 2x3, expected a torch.FloatTensor" in msg, msg


@pytest.mark.parametrize("name", ["DotProduct", "CosineDistance", "PairwiseDistance(2)"])
def test_pair_modules(name):
    msg = _error(f"nn.{name}:float()" if "(" in name else f"nn.{name}():float()", [F, D])
    base = name.split("(")[0]
    assert f"nn.{base}: input[2] is a torch.DoubleTensor of size 2x3, expected a torch.FloatTensor " \
           "(input[1]'s type)" in msg, msg


def test_mixture_table():
    gater = ["FloatTensor", [2, 3], 0.5]
    msg = _error("nn.MixtureTable():float()", [gater, ["DoubleTensor", [2, 3, 4], 1.0]])
    assert "nn.MixtureTable: experts is a torch.DoubleTensor of size 2x3x4, expected a torch.FloatTensor " \
           "(the gater's type)" in msg, msg
    experts = [["FloatTensor", [2, 4], 1.0], ["DoubleTensor", [2, 4], 1.0], ["FloatTensor", [2, 4], 1.0]]
    msg = _error("nn.MixtureTable():float()", [gater, experts])
    assert "nn.MixtureTable: expert 2 is a torch.DoubleTensor of size 2x4, expected a torch.FloatTensor" in msg


@pytest.mark.parametrize("name, want", [
    ("CAddTable", lambda a, b: a + b), ("CMulTable", lambda a, b: a * b),
    ("CSubTable", lambda a, b: a - b), ("CDivTable", lambda a, b: a / b),
    ("CMaxTable", np.maximum), ("CMinTable", np.minimum),
])
def test_mixes_torch7_ran_still_run(name, want):
    """A Double module whose input[1] is Float and the others Double: input[1] is copied into the
    Double output, the rest taken by the Double methods (torch7 ran it)."""
    status, out = _RUN(f"nn.{name}()", lua_value([F, D]), "forward", "DoubleTensor")
    assert status == "ok"
    np.testing.assert_array_equal(N(out), want(np.full((2, 3), 1.5), np.full((2, 3), 2.0)))


def test_the_failed_forward_leaves_the_output():
    f = lua_fn("""function()
      require 'nn'
      local m = nn.CMaxTable():float()
      m:forward({ torch.FloatTensor(2):fill(3), torch.FloatTensor(2):fill(4) })
      local ok = pcall(function() m:forward({ torch.FloatTensor(5):fill(1), torch.DoubleTensor(5) }) end)
      return ok, m.output, m.maxIdx
    end""")
    ok, out, idx = f()
    assert ok is False
    np.testing.assert_array_equal(N(out), [4, 4])
    np.testing.assert_array_equal(N(idx), [2, 2])


def test_luabridge_error_type():
    with pytest.raises(luabridge.LuaError, match=r"nn\.CMulTable: input\[2\] is a torch\.DoubleTensor"):
        lua_fn("function() require 'nn'; return nn.CMulTable():float():forward({ torch.FloatTensor(3), "
               "torch.DoubleTensor(3) }) end")()
