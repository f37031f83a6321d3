"""torch7's utility functions real programs call (torch.isatty, getnumcores, isequal) and xlua's
OptionParser and Profiler, as torch/xlua had them: values checked against the OS and Python's
own optparse-style parsing."""
from __future__ import annotations

import os

import pytest
from helpers import run_script

import luabridge


def test_getnumcores_isequal_and_isatty(lua):
    assert lua.eval("torch.getnumcores()") == os.cpu_count()
    assert lua.eval("(function() local t = torch.zeros(3) return torch.isequal(t, t) end)()") is True
    assert lua.eval("(function() local t = torch.zeros(3) return torch.isequal(t, t:view(3)) end)()") is False
    assert lua.eval("torch.isequal({}, {})") is False
    # under pytest stdout is captured: not a terminal, exactly as os.isatty says
    assert lua.eval("torch.isatty(io.stdout)") is os.isatty(1)
    assert lua.eval("torch.isatty(io.tmpfile())") is False
    with pytest.raises(luabridge.LuaError, match="isatty: expected a file"):
        lua.eval("torch.isatty(3)")


PARSER = """
require 'xlua'
local op = xlua.OptionParser('%prog [options] file')
op:option{'-l', '--learningRate', action='store', dest='learningRate', help='learning rate', default=1e-3}
op:option{'-v', '--visualize', action='store_true', dest='visualize', help='show'}
op:option{'-n', '--name', dest='name', help='a name', req=true}
local opt, args = op:parse()
print('lr', opt.learningRate, type(opt.learningRate), 'vis', opt.visualize, 'name', opt.name, 'args', table.concat(args, ','))
print(op:tostring(true, {'-l'}))
"""


def test_option_parser_parses_as_optparse(tmp_path):
    out = run_script(tmp_path, PARSER, "--learningRate=0.5", "-v", "data.t7", "-n", "x y")
    assert out.returncode == 0, out.stderr
    assert "lr\t0.5\tstring\tvis\ttrue\tname\tx y\targs\tdata.t7" in out.stdout
    assert "-l=0.5" in out.stdout
    defaults = run_script(tmp_path, PARSER, "-n", "a")
    assert "lr\t0.001\tnumber\tvis\tnil" in defaults.stdout


def test_option_parser_help_and_failures(tmp_path):
    helped = run_script(tmp_path, PARSER, "-n", "a", "--help")
    assert helped.returncode == 0
    assert "Usage: " in helped.stdout and "s.lua [options] file" in helped.stdout
    assert "-l LEARNINGRATE, --learningRate=LEARNINGRATE  learning rate [default = 0.001]" in helped.stdout
    bad = run_script(tmp_path, PARSER, "--nope", "-n", "a")
    assert bad.returncode == 1 and "invalid option --nope" in bad.stderr
    missing = run_script(tmp_path, PARSER)
    assert missing.returncode == 1 and "option -n requires an argument" in missing.stderr


def test_profiler_times_and_reports(lua):
    lua.execute("""
      require 'xlua'
      _p = xlua.Profiler()
      _p:start('loop', 'fps')
      local t = os.clock() while os.clock() - t < 0.02 do end
      _real, _cpu = _p:lap('loop')""")
    real, cpu = lua.eval("_real"), lua.eval("_cpu")
    assert 0.015 <= cpu <= 5 and 0.015 <= real <= 5
    report = lua.eval("_p:formatAll()")
    assert report.startswith("$ profiler report:") and "<loop> = " in report and report.endswith("fps")
    with pytest.raises(luabridge.LuaError, match="There is no such profiler - other"):
        lua.execute("_p:lap('other')")
