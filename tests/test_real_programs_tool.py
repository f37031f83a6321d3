"""tools/real_programs.py: the manifest parses, and the runner judges a program by its exit status
and expected output, in a scratch copy, with libraries from other repositories on LUA_PATH."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import real_programs as rp  # noqa: E402


def test_manifest_entries_are_complete():
    corpus = rp.load_manifest()
    assert len(corpus.programs) >= 30 and len(corpus.repos) >= 20
    for kind in (corpus.programs, corpus.models):
        names = [x.name for x in kind]
        assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    for p in corpus.programs:
        assert "/" in p.repo and p.expect and p.args, p.name
        assert p.repo in corpus.repos, f"{p.name}: {p.repo} has no [[repo]] entry"
        for where in p.lua_modules.values():
            assert where.count("/") >= 1, p.name
    for m in corpus.models:
        assert m.repo in corpus.repos, f"{m.name}: {m.repo} has no [[repo]] entry"
        assert m.backward or m.why, f"{m.name}: no backward needs a reason"
        assert isinstance(m.input, str) or all(isinstance(s, int) and s > 0 for s in m.input), m.name


def make_repos(tmp_path: Path) -> Path:
    repos = tmp_path / "repos"
    prog = repos / "someone+prog"
    prog.mkdir(parents=True)
    (prog / "main.lua").write_text(
        "local helper = require 'helper'\n"
        "print('answer', helper.twice(tonumber(arg[1])))\n"
        "local f = io.open('written.txt', 'w') f:write('x') f:close()\n"
        "if arg[2] == 'fail' then error('deliberate') end\n")
    lib = repos / "other+lib" / "src"
    lib.mkdir(parents=True)
    (lib / "init.lua").write_text("return { twice = function(x) return 2 * x end }\n")
    (repos / "other+lib" / "single.lua").write_text("return { twice = function(x) return x + x end }\n")
    return repos


def program(**kw) -> rp.Program:
    base = dict(name="p", repo="someone/prog", what="w", args=["main.lua", "21"], expect=[r"answer\s+42"],
                lua_modules={"helper": "other/lib/src"}, timeout=60)
    base.update(kw)
    return rp.Program(**base)


def test_runner_passes_fails_and_keeps_the_checkout_clean(tmp_path):
    repos = make_repos(tmp_path)
    ok = rp.run_program(program(), repos, 1.0)
    assert ok.ok, ok.detail
    assert not (repos / "someone+prog" / "written.txt").exists()   # it ran in a scratch copy

    wrong = rp.run_program(program(expect=[r"answer\s+43"]), repos, 1.0)
    assert not wrong.ok and "output lacks" in wrong.detail

    failed = rp.run_program(program(args=["main.lua", "21", "fail"]), repos, 1.0)
    assert not failed.ok and "deliberate" in failed.detail and failed.detail.startswith("exit 1")

    one_file = rp.run_program(program(lua_modules={"helper": "other/lib/single.lua"}), repos, 1.0)
    assert one_file.ok, one_file.detail

    missing = rp.run_program(program(lua_modules={"helper": "nobody/here"}), repos, 1.0)
    assert not missing.ok and "nobody/here" in missing.detail


def test_runner_time_limit_and_until(tmp_path):
    repos = make_repos(tmp_path)
    # a program that never ends (sleeping: it leaves the CPUs to the rest of the suite); 10 s let
    # th start and print on a loaded machine
    (repos / "someone+prog" / "loop.lua").write_text("print('started') io.stdout:flush() while true do sys.sleep(1) end\n")
    slow = program(args=["loop.lua"], expect=["started"], timeout=3, lua_modules={})
    assert not rp.run_program(slow, repos, 1.0).ok
    long_run = rp.run_program(program(args=["loop.lua"], expect=["started"], timeout=60, until=True,
                                      lua_modules={}), repos, 1.0)
    # stopped as soon as what it must show appeared, not at the time limit
    assert long_run.ok and long_run.detail == "stopped once the expected output appeared" and long_run.seconds < 30


@pytest.mark.parametrize("text, expected", [
    ("a\nb\nboom: bad\nstack traceback:\n\t[C]: x", "a | b | boom: bad"),
    ("only line", "only line"),
])
def test_summary_keeps_the_error_before_the_traceback(text, expected):
    assert rp.summary(text) == expected


def make_mirror(tmp_path: Path) -> Path:
    """A repository as the search tool's mirror holds it: a git directory, no work tree."""
    import subprocess
    src = tmp_path / "src"
    (src / "models").mkdir(parents=True)
    (src / "models" / "mlp.lua").write_text(
        "require 'nn'\nreturn function(hidden)\n"
        "  return nn.Sequential():add(nn.Linear(4, hidden)):add(nn.Tanh()):add(nn.Linear(hidden, 3))\nend\n")
    (src / "main.lua").write_text(
        "require 'nn'\nrequire 'optim'\nlocal util = require 'models.mlp'\nlocal ok = pcall(require, 'not_a_module')\n"
        "local x = require('datasets/' .. 'mnist')\nlocal m = nn.Sequential() -- nn.NotThere in a comment\n"
        "local s = 'nn.AlsoNotThere'\nlocal bad = nn.NoSuchModule\n")
    (src / "train.lua").write_text(
        "local loss = 10\nfor i = 1, 5 do loss = loss * 0.5 print('loss = ' .. loss) end\n")
    git = tmp_path / "mirror" / "someone+models" / "repo"
    run = lambda *a: subprocess.run(["git", *a], check=True, capture_output=True, cwd=src)
    run("init", "-q")
    run("add", ".")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(git)], check=True)
    return tmp_path / "mirror"


def test_mirror_export_requires_models_and_falls(tmp_path, monkeypatch):
    monkeypatch.setattr(rp, "CACHE", tmp_path / "cache")
    mirror = make_mirror(tmp_path)
    corpus = rp.Corpus(repos={"someone/models": rp.Repo("someone/models")})
    results, lacking = rp.run_requires(corpus, ["someone/models"], mirror)
    # models.mlp is the repository's own, the pcall'd one optional, the built name not read: the
    # packages required from outside are nn and optim; the one package field used that nn lacks is
    # reported, comments and strings not
    assert [(r.name, r.ok) for r in results] == [("someone/models: nn", True), ("someone/models: optim", True)]
    assert lacking == {"nn.NoSuchModule": ["someone/models"]}

    model = rp.Model(name="mlp", repo="someone/models", build="return dofile('models/mlp.lua')(8)",
                     input=[2, 4], output=[2, 3])
    good = rp.run_model(model, mirror, 1.0)
    assert good.ok and good.detail == "output 2x3", good.detail
    wrong = rp.run_model(rp.Model(**{**model.__dict__, "output": [2, 4]}), mirror, 1.0)
    assert not wrong.ok and "output is 2x3, expected 2x4" in wrong.detail
    shape = rp.run_model(rp.Model(**{**model.__dict__, "input": [2, 5]}), mirror, 1.0)
    assert not shape.ok and "size" in shape.detail.lower()

    falls = rp.Program(name="t", repo="someone/models", what="w", args=["train.lua"], expect=["loss"],
                       falls=r"loss = ([0-9.]+)")
    assert rp.run_program(falls, mirror, 1.0).ok
    rises = rp.Program(**{**falls.__dict__, "falls": r"^(\d)"})   # nothing captured: not a fall
    assert not rp.run_program(rises, mirror, 1.0).ok


def test_a_loss_falls_by_its_first_and_last_quarters():
    # AdaIN's 10 printed losses of one run: noisy, last above first, but falling over the run
    adain = [7.59e-4, 7.86e-4, 8.26e-4, 7.9e-4, 7.7e-4, 7.8e-4, 7.6e-4, 8.03e-4, 7.23e-4, 7.68e-4]
    assert rp.fell(adain) and not adain[-1] < adain[0]
    assert rp.fell([2.0, 1.0]) and not rp.fell([1.0, 2.0]) and not rp.fell([1.0, 1.0])
    assert not rp.fell([1.0]) and not rp.fell([])
    assert not rp.fell([1.0, 0.5, 0.6, 0.7, 0.9, 1.2, 1.1, 1.3])   # dips, then climbs back above


def test_missing_require_is_grouped_and_explained(tmp_path, monkeypatch):
    monkeypatch.setattr(rp, "CACHE", tmp_path / "cache")
    mirror = make_mirror(tmp_path)
    src = tmp_path / "plain" / "other+pkg"
    src.mkdir(parents=True)
    (src / "a.lua").write_text("require 'nosuchlib'\n")
    (src / "b.lua").write_text("require 'qtwidget'\n")
    corpus = rp.Corpus(repos={"other/pkg": rp.Repo("other/pkg"),
                              "again/pkg": rp.Repo("again/pkg", explained={"nosuchlib": "binds libnosuch"})})
    (tmp_path / "plain" / "again+pkg").mkdir()
    (tmp_path / "plain" / "again+pkg" / "a.lua").write_text("require 'nosuchlib'\n")
    corpus.explained["qtwidget"] = "Qt"
    results, _ = rp.run_requires(corpus, ["other/pkg", "again/pkg"], tmp_path / "plain")
    assert [(r.name, r.ok, r.explained) for r in results] == [
        ("other/pkg: nosuchlib", False, ""), ("other/pkg: qtwidget", False, "Qt"), ("again/pkg: nosuchlib", False, "binds libnosuch")]
    assert results[0].detail.startswith("module 'nosuchlib' not found (a.lua: ")
    assert rp.cause(results[0]) == "module 'nosuchlib' not found"


def test_markdown_table_and_inventory():
    corpus = rp.Corpus(repos={"a/x": rp.Repo("a/x", kind="paper"), "b/y": rp.Repo("b/y", kind="course")},
                       models=[rp.Model(name="m1", repo="a/x", build="", input=[1])])
    results = [rp.Result("models", "m1", "a/x", True, 1.0, ""),
               rp.Result("models", "m2", "b/y", False, 1.0, "exit 1: x.lua:3: boom 42"),
               rp.Result("models", "m3", "b/y", False, 1.0, "exit 1: y.lua:9: boom 7"),
               rp.Result("models", "m4", "b/y", False, 1.0, "needs Qt", explained="needs Qt")]
    text = rp.markdown(results, corpus)
    assert "| models | 2 | 4 | 1 (25.0%) | 3 (1) | 33.3% |" in text
    # the two booms are one cause (paths, line numbers and numbers dropped), listed first
    assert text.index("- 2 models: exit N: boom N (m2, m3)") < text.index("- 1 models: explained: needs Qt (m4)")
    listing = rp.inventory(corpus)
    assert listing.startswith("2 repositories, 1 models, 0 programs")
    assert "- **paper** (1): a/x (1/0)" in listing and "- **course** (1): b/y (0/0)" in listing


def test_log_then_report_from_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(rp, "CACHE", tmp_path / "cache")
    mirror = make_mirror(tmp_path)
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[repo]]\nrepo = "someone/models"\n\n[[model]]\nname = "mlp"\nrepo = "someone/models"\n'
                        'build = "return dofile(\'models/mlp.lua\')(8)"\ninput = [2, 4]\noutput = [2, 3]\n')
    log = tmp_path / "run.jsonl"
    assert rp.main([str(mirror), "--manifest", str(manifest), "--log", str(log), "-j", "1"]) == 0
    assert len(log.read_text().splitlines()) == 3          # two requires (nn, optim) and the model
    capsys.readouterr()
    assert rp.main([str(mirror), "--manifest", str(manifest), "--from-log", str(log), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "models: 1 of 1 passed" in out and "| requires | 1 | 2 | 2 (100.0%) | 0 (0) | 100.0% |" in out
    # a rerun appended to the log replaces the run's earlier record
    records = log.read_text().splitlines()
    failed = json.loads(records[-1]) | {"ok": False, "detail": "boom"}
    log.write_text("\n".join([*records[:-1], json.dumps(failed), records[-1]]) + "\n")
    assert rp.main([str(mirror), "--manifest", str(manifest), "--from-log", str(log)]) == 0
    assert "models: 1 of 1 passed" in capsys.readouterr().out


def test_libraries_hold_modules_named_as_paths():
    repo = rp.Repo("a/x", lua_modules={"fn": "someone/lua-fn/fn"})
    for name in ("fn", "fn.seq", "fn/seq", "fn/seq.lua"):
        assert rp.in_libraries(name, repo), name
    assert not rp.in_libraries("fnord", repo) and not rp.in_libraries("other/fn", repo)


def test_package_names_shadowed_by_the_file_are_not_the_packages(tmp_path):
    import corpus_requires
    f = tmp_path / "a.lua"
    f.write_text("local rnn = nn.LSTM(3, 4)\nprint(rnn.gradWeight)\n"
                 "local function step(optim, x) return optim.valPerf end\n"
                 "print(nn.NotThere, image.polar)\n")
    names = corpus_requires.scan_file(f, "a.lua").names
    assert names == {("nn", "LSTM"), ("nn", "NotThere"), ("image", "polar")}
