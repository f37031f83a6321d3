"""Runs real public Torch7 programs, unchanged, through `luabridge th`.

    python tools/real_programs.py REPOS [--only NAME ...] [--markdown] [--timeout-scale X]

REPOS is a folder of checked-out repositories, each as `owner+name` (the search tool's mirror
naming) or `name`. The programs and what each run must print are listed in
tools/real_programs.toml; their code is never part of this project. Each run works in a scratch
copy of its repository (programs write checkpoints and logs beside themselves), with a time limit;
a program that trains for long counts as running when its expected output appeared before the
limit and the entry says `until = true`.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "real_programs.toml"


@dataclass
class Program:
    name: str
    repo: str
    what: str
    args: list[str]
    expect: list[str]
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    until: bool = False      # a long run: passing once `expect` appeared, then stopped
    setup: str = ""          # a shell line run in the scratch copy first (small data, a checkpoint)
    stdin: str = ""          # what the program reads from its standard input
    # pure-Lua libraries from other checked-out repositories: module name -> "owner/name[/path]",
    # path being a folder (the module's init.lua and its submodules) or one .lua file
    lua_modules: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    program: Program
    ok: bool
    seconds: float
    detail: str
    output: str = ""    # what the program printed (tools/famous_models.py parses it)


def load_manifest(path: Path = MANIFEST) -> list[Program]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return [Program(**entry) for entry in data["program"]]


def find_repo(repos: Path, repo: str) -> Path | None:
    owner, name = repo.split("/")
    for candidate in (repos / f"{owner}+{name}", repos / owner / name, repos / name):
        if candidate.is_dir():
            return candidate
    return None


def luabridge_command() -> list[str]:
    exe = Path(sys.executable).with_name("luabridge")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "luabridge"]


def run_program(p: Program, repos: Path, scale: float) -> Result:
    src = find_repo(repos, p.repo)
    if src is None:
        return Result(p, False, 0.0, f"repository {p.repo} not found under {repos}")
    with tempfile.TemporaryDirectory(prefix="luabridge-real-") as tmp:
        work = Path(tmp) / src.name
        shutil.copytree(src, work, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        cwd = work / p.cwd
        lib = Path(tmp) / "lua_modules"
        lib.mkdir()
        for module, where in p.lua_modules.items():
            owner, name, *folder = where.split("/")
            found = find_repo(repos, f"{owner}/{name}")
            if found is None:
                return Result(p, False, 0.0, f"library {where} (for require '{module}') not found under {repos}")
            target = found.joinpath(*folder).resolve()
            # a one-file library (kikito's md5.lua) is required as module.lua, a folder as module/
            (lib / (module + ".lua" if target.is_file() else module)).symlink_to(target)
        lua_path = f"{lib}/?.lua;{lib}/?/init.lua;" + os.environ.get("LUA_PATH", ";")
        # setup lines call `$LUABRIDGE th ...` to prepare what a program needs (e.g. a checkpoint)
        env = {**os.environ, **p.env, "TMPDIR": tmp, "LUA_PATH": lua_path, "LUABRIDGE": " ".join(luabridge_command())}
        if p.setup:
            prep = subprocess.run(p.setup, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                                  errors="replace", timeout=p.timeout * scale)
            if prep.returncode != 0:
                return Result(p, False, 0.0, "setup failed: " + summary(prep.stdout + prep.stderr))
        start = time.perf_counter()
        proc = subprocess.Popen([*luabridge_command(), "th", *p.args], cwd=cwd, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", start_new_session=True)
        try:
            out, _ = proc.communicate(p.stdin, timeout=p.timeout * scale)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
            timed_out = True
        seconds = time.perf_counter() - start
    missing = [e for e in p.expect if not re.search(e, out, re.M)]
    if timed_out and not (p.until and not missing):
        return Result(p, False, seconds, f"no result within {p.timeout * scale:.0f} s: " + summary(out), out)
    if not timed_out and proc.returncode != 0:
        return Result(p, False, seconds, f"exit {proc.returncode}: " + summary(out), out)
    if missing:
        return Result(p, False, seconds, f"output lacks {missing[0]!r}: " + summary(out), out)
    return Result(p, True, seconds, "stopped at the time limit after the expected output" if timed_out else "", out)


def summary(text: str, lines: int = 3) -> str:
    """The error line (a Lua error is printed before its traceback), else the last lines."""
    out = text.strip().splitlines()
    cut = next((i for i, line in enumerate(out) if line.startswith("stack traceback:")), len(out))
    return " | ".join(line.strip() for line in out[max(0, cut - lines):cut])


def markdown(results: list[Result]) -> str:
    rows = ["| program | repository | what ran | result |", "|---|---|---|---|"]
    for r in results:
        verdict = f"runs ({r.seconds:.0f} s)" if r.ok else "fails: " + r.detail[:160].replace("|", "\\|")
        rows.append(f"| {r.program.name} | {r.program.repo} | {r.program.what} | {verdict} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repos", type=Path, help="folder of checked-out repositories")
    ap.add_argument("--only", nargs="*", help="run these programs (names) only")
    ap.add_argument("--markdown", action="store_true", help="print the README table at the end")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every time limit")
    a = ap.parse_args(argv)
    programs = [p for p in load_manifest() if not a.only or p.name in a.only]
    results = []
    for p in programs:
        r = run_program(p, a.repos, a.timeout_scale)
        results.append(r)
        print(f"{'ok  ' if r.ok else 'FAIL'} {p.name:32s} {r.seconds:6.1f} s  {r.detail[:300]}", flush=True)
    passed = sum(r.ok for r in results)
    print(f"{passed} passed, {len(results) - passed} failed")
    if a.markdown:
        print(markdown(results))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
