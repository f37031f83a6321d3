"""Long conversions show progress (issue 26): convert(progress=...) is told (done, total) after
each module; `luabridge convert` and `luabridge export` say it on stderr every 10% of the modules
with --progress, or by themselves on a terminal for long conversions, and never otherwise."""
from __future__ import annotations

import io
import re
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is missing (pip install torch): luabridge.torch needs it")

import luabridge  # noqa: E402
from luabridge.th import cli  # noqa: E402
from luabridge.torch import convert  # noqa: E402
from luabridge.torch.convert import ConversionProgress, command_progress  # noqa: E402

CHAIN = "(function() local m = nn.Sequential(); for i = 1, {n} do m:add(nn.Linear(2, 2)) end; return m end)()"


def _chain(n: int):
    luabridge.require("nn")
    return luabridge.eval(CHAIN.format(n=n))


def test_convert_tells_each_module() -> None:
    calls: list[tuple[int, int]] = []
    out = convert(_chain(30), progress=lambda done, total: calls.append((done, total)))
    assert len(out) == 30
    assert calls == [(i, 31) for i in range(1, 32)]   # 30 Linears, then the Sequential holding them


def test_a_shared_module_counts_once() -> None:
    luabridge.require("nn")
    m = luabridge.eval("(function() local l = nn.Linear(2, 2); return nn.Sequential():add(l):add(nn.Tanh()):add(l) end)()")
    calls: list[tuple[int, int]] = []
    convert(m, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 3), (2, 3), (3, 3)]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines_every_ten_percent() -> None:
    stream = io.StringIO()
    p = ConversionProgress(stream, "conv")
    for done in range(1, 201):
        p(done, 200)
    p.close()
    lines = stream.getvalue().splitlines()
    want = [f"conv: {pct}% ({done} of 200 modules)" for pct, done in
            [(0, 1)] + [(10 * k, 20 * k) for k in range(1, 11)]]
    assert lines == want


def test_on_a_terminal_one_line_rewritten() -> None:
    stream = _Terminal()
    p = ConversionProgress(stream, "conv", every=25)
    for done in range(1, 9):
        p(done, 8)
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("conv: 100% (8 of 8 modules)\033[K\n")
    assert [s for s in text.split("\r") if s] == [f"conv: {pct}% ({d} of 8 modules)\033[K" for pct, d in
                                                 [(0, 1), (25, 2), (50, 4), (75, 6)]] + ["conv: 100% (8 of 8 modules)\033[K\n"]


def test_small_trees_say_nothing_unless_asked(monkeypatch) -> None:
    stream = io.StringIO()
    p = ConversionProgress(stream, "conv", min_total=50)
    for done in range(1, 11):
        p(done, 10)
    assert stream.getvalue() == ""
    monkeypatch.setattr(sys, "stdout", _Terminal())
    assert command_progress(None, "x").min_total == 50     # on a terminal: long conversions only
    assert command_progress(True, "x").min_total == 1      # asked: always
    assert command_progress(False, "x") is None
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert command_progress(None, "x") is None             # not a terminal: nothing unless asked
    assert command_progress(True, "x") is not None


@pytest.fixture
def chain_file(tmp_path):
    path = tmp_path / "chain.t7"
    luabridge.save(path, _chain(99))
    return path


def _percent_lines(err: str, label: str) -> list[str]:
    return [line for line in err.splitlines() if re.fullmatch(rf"{label}: \d+% \(\d+ of 100 modules\)", line)]


def test_convert_command_progress(chain_file, tmp_path, capsys) -> None:
    assert cli.main(["convert", str(chain_file), str(tmp_path / "c.pt"), "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out == f"{tmp_path / 'c.pt'}: Sequential, 594 parameters\n"
    assert len(_percent_lines(err, "luabridge convert")) == 11 and err.splitlines()[-1].endswith("100% (100 of 100 modules)")
    assert cli.main(["convert", str(chain_file), str(tmp_path / "c.pt")]) == 0
    assert capsys.readouterr().err == ""   # stdout is not a terminal here: nothing unless asked
    assert cli.main(["convert", str(chain_file), str(tmp_path / "c.pt"), "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_export_command_progress(chain_file, tmp_path, capsys) -> None:
    pytest.importorskip("safetensors")
    assert cli.main(["export", str(chain_file), str(tmp_path / "out"), "--progress"]) == 0
    out, err = capsys.readouterr()
    assert [line.rsplit("/", 1)[-1] for line in out.splitlines()] == ["model.py", "model.safetensors"]
    assert len(_percent_lines(err, "luabridge export")) == 11
    assert cli.main(["export", str(chain_file), str(tmp_path / "out2")]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["convert", "export"])
def test_help_names_the_option(command, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0 and "--progress, --no-progress" in capsys.readouterr().out
