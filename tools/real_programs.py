"""The corpus runner: public Torch7 repositories, run unchanged through luabridge at three depths.

    python tools/real_programs.py REPOS [--manifest F ...] [--depth requires|models|programs ...]
                                  [--repo OWNER/NAME ...] [--only NAME ...] [-j N] [--quick]
                                  [--markdown] [--timeout-scale X]

REPOS is a folder of repositories, each as `owner+name` (the search tool's mirror naming: a git
directory `owner+name/repo`, exported here once per commit) or a checked-out `owner+name` or `name`.
The manifests (tools/corpus/*.toml) list the repositories and, per repository, its models and
programs; their code is never part of this project. The depths:

- requires: every Lua file's `require`s resolve (in the repository, its libraries or luabridge),
  and the package names the code reaches for (`nn.Foo`, `torch.bar`) exist;
- models: each model definition builds and runs a forward and a backward pass
  (tools/corpus_model.lua checks what came out);
- programs: each program runs in a scratch copy of its repository, with a time limit, and its
  output must show what the entry expects (and a falling loss where it says `falls`).

It prints each result, the pass rate per depth and the failures grouped by cause, largest group
first. A failure whose repository explains it (fails under Torch7 too, or needs a C library that
is not a Torch7 package) is counted as failed and listed with the reason.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus_requires  # noqa: E402

MANIFESTS = HERE / "corpus"
HARNESS = HERE / "corpus_model.lua"
CACHE = Path(os.environ.get("LUABRIDGE_CORPUS_CACHE", Path.home() / ".cache" / "luabridge-corpus"))
DEPTHS = ("requires", "models", "programs")
# every Torch7 install had Penlight: trepl, the `th` REPL, depends on it (trepl's rockspec)
INSTALLED_WITH_TORCH = {"pl": "lunarmodules/Penlight/lua/pl"}


@dataclass
class Repo:
    repo: str
    kind: str = ""
    what: str = ""
    lua_modules: dict[str, str] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)      # globs left out of the requires depth
    explained: dict[str, str] = field(default_factory=dict)  # require/model/program name -> why it fails
    # the corpus' [libraries]: pure-Lua packages users installed with luarocks, on every path after
    # the repository's own modules (set by load_manifest)
    shared: dict[str, str] = field(default_factory=dict, repr=False)


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
    # pure-Lua libraries from other repositories: module name -> "owner/name[/path]",
    # path being a folder (the module's init.lua and its submodules) or one .lua file
    lua_modules: dict[str, str] = field(default_factory=dict)
    falls: str = ""          # a regex with one group: the numbers it captures must fall (see fell)


@dataclass
class Model:
    name: str
    repo: str
    build: str               # a Lua chunk returning the module, run in the repository (cwd)
    input: list[int] | str   # sizes of a random input, or a Lua expression
    output: list | None = None   # sizes, or one list of sizes per output for a table of outputs
    setup: str = ""
    cwd: str = "."
    backward: bool = True
    why: str = ""            # why there is no backward
    lua_modules: dict[str, str] = field(default_factory=dict)
    timeout: float = 180.0
    env: dict[str, str] = field(default_factory=dict)   # e.g. LUABRIDGE_CUDA_ON_CPU for cunn/cudnn code


@dataclass
class Result:
    depth: str
    name: str
    repo: str
    ok: bool
    seconds: float
    detail: str
    output: str = ""    # what the program printed (tools/famous_models.py parses it)
    explained: str = ""  # the manifest's reason, for a failure outside luabridge
    what: str = ""
    program: Program | None = None


@dataclass
class Corpus:
    repos: dict[str, Repo] = field(default_factory=dict)
    explained: dict[str, str] = field(default_factory=dict)   # require names failing anywhere, and why
    libraries: dict[str, str] = field(default_factory=dict)   # module -> "owner/name[/path]", for every repository
    models: list[Model] = field(default_factory=list)
    programs: list[Program] = field(default_factory=list)


def load_manifest(paths: Iterable[Path] | None = None) -> Corpus:
    corpus = Corpus()
    for path in sorted(paths or MANIFESTS.glob("*.toml")):
        with open(path, "rb") as f:
            data = tomllib.load(f)
        for entry in data.get("repo", []):
            if entry["repo"] in corpus.repos:
                raise ValueError(f"{path.name}: repository {entry['repo']} is listed twice")
            corpus.repos[entry["repo"]] = Repo(**entry)
        corpus.explained.update(data.get("explained", {}))
        corpus.libraries.update(data.get("libraries", {}))
        corpus.models += [Model(**entry) for entry in data.get("model", [])]
        corpus.programs += [Program(**entry) for entry in data.get("program", [])]
    for repo in corpus.repos.values():
        repo.shared = {**INSTALLED_WITH_TORCH, **corpus.libraries}
    return corpus


# --- repositories on disk ---------------------------------------------------------------------

_export_lock = threading.Lock()


def find_repo(repos: Path, repo: str) -> Path | None:
    """The repository's files: a checked-out folder, or a mirror's git directory exported once."""
    owner, name = repo.split("/")
    for candidate in (repos / f"{owner}+{name}", repos / owner / name, repos / name):
        git = candidate / "repo"
        if (git / "HEAD").is_file() and (git / "objects").is_dir():
            return export(git, f"{owner}+{name}")
        if (git / ".git").is_dir():
            return export(git / ".git", f"{owner}+{name}")
        if candidate.is_dir():
            return candidate
    return None


def export(git: Path, label: str) -> Path:
    commit = subprocess.run(["git", "--git-dir", str(git), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    target = CACHE / f"{label}@{commit[:12]}"
    with _export_lock:
        if not target.is_dir():
            part = target.with_name(target.name + ".part")
            shutil.rmtree(part, ignore_errors=True)
            part.mkdir(parents=True)
            write_tree(git, part)
            part.rename(target)
    return target


def write_tree(git: Path, into: Path) -> None:
    """HEAD's files under `into`. Snapshots lack their largest blobs (data, weights): those are skipped."""
    listing = subprocess.run(["git", "--git-dir", str(git), "ls-tree", "-r", "-z", "HEAD"], capture_output=True,
                             check=True).stdout.decode("utf-8", "replace")
    entries = []
    for line in filter(None, listing.split("\0")):
        meta, path = line.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and ".." not in Path(path).parts:
            entries.append((mode, sha, path))
    blobs = subprocess.run(["git", "--git-dir", str(git), "cat-file", "--batch"], check=True, capture_output=True,
                           input="".join(sha + "\n" for _, sha, _ in entries).encode()).stdout
    at = 0
    for mode, sha, path in entries:
        end = blobs.index(b"\n", at)
        header = blobs[at:end].split()
        at = end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        data, at = blobs[at:at + size], at + size + 1
        dest = into / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            dest.symlink_to(data.decode("utf-8", "replace"))
        else:
            dest.write_bytes(data)
            if mode == "100755":
                dest.chmod(0o755)


def luabridge_command() -> list[str]:
    exe = Path(sys.executable).with_name("luabridge")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "luabridge"]


def library_path(repos: Path, repo: Repo | None, entry_modules: dict[str, str], into: Path) -> str:
    """LUA_PATH with the libraries linked under `into`: the repository's and the entry's own first
    (a missing one raises LookupError), then the default path, then the corpus' shared libraries
    (those checked out)."""
    lua_modules = {**(repo.lua_modules if repo else {}), **entry_modules}
    shared = repo.shared if repo else INSTALLED_WITH_TORCH
    found_in = {"own": into / "own", "shared": into / "shared"}
    for place in found_in.values():
        place.mkdir(parents=True, exist_ok=True)
    for place, libraries in (("own", lua_modules), ("shared", shared)):
        for module, where in libraries.items():
            if place == "shared" and module in lua_modules:
                continue
            owner, name, *folder = where.split("/")
            found = find_repo(repos, f"{owner}/{name}")
            if found is None and place == "shared":
                continue
            if found is None:
                raise LookupError(f"library {where} (for require '{module}') not found under {repos}")
            target = found.joinpath(*folder).resolve()
            # a one-file library (kikito's md5.lua) is required as module.lua, a folder as module/
            (found_in[place] / (module + ".lua" if target.is_file() else module)).symlink_to(target)
    own, shared_dir = found_in["own"], found_in["shared"]
    inherited = os.environ.get("LUA_PATH", "").strip(";")
    middle = f";{inherited};;" if inherited else ";;"   # ';;' stands for luabridge's own path
    return f"{own}/?.lua;{own}/?/init.lua{middle}{shared_dir}/?.lua;{shared_dir}/?/init.lua"


def run_th(args: list[str], cwd: Path, env: dict[str, str], timeout: float, stdin: str = "",
           enough: Callable[[str], bool] | None = None) -> tuple[str, int | None]:
    """Output and exit status of `luabridge th ARGS`; status None when stopped: at the time limit,
    or as soon as `enough(output so far)` holds (a long run that has shown what it must)."""
    proc = subprocess.Popen([*luabridge_command(), "th", *args], cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                            start_new_session=True)
    chunks: list[str] = []
    ended = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            chunks.append(line)
        ended.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
    except BrokenPipeError:   # it ended without reading its input
        pass
    deadline = time.monotonic() + timeout
    stopped = False
    while not ended.wait(min(0.5, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline or (enough is not None and enough("".join(chunks))):
            stopped = True
            os.killpg(proc.pid, 9)
            break
    reader.join()
    status = proc.wait()
    return "".join(chunks), None if stopped else status


# --- programs -----------------------------------------------------------------------------------

def fell(values: list[float]) -> bool:
    """Whether a loss fell: the mean of its last quarter of values (at least one) below the mean of
    its first quarter. Per-batch losses of a few iterations are noisy (a batch is a random crop),
    so one value against another would fail a falling loss about as often as a coin."""
    if len(values) < 2:
        return False
    quarter = max(1, len(values) // 4)
    return sum(values[-quarter:]) / quarter < sum(values[:quarter]) / quarter


def run_program(p: Program, repos: Path, scale: float, repo: Repo | None = None) -> Result:
    def result(ok: bool, seconds: float, detail: str, out: str = "") -> Result:
        return Result("programs", p.name, p.repo, ok, seconds, detail, out, what=p.what, program=p)

    src = find_repo(repos, p.repo)
    if src is None:
        return result(False, 0.0, f"repository {p.repo} not found under {repos}")
    with tempfile.TemporaryDirectory(prefix="luabridge-real-") as tmp:
        work = Path(tmp) / src.name
        shutil.copytree(src, work, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        cwd = work / p.cwd
        try:
            lua_path = library_path(repos, repo, p.lua_modules, Path(tmp) / "lua_modules")
        except LookupError as e:
            return result(False, 0.0, str(e))
        # setup lines call `$LUABRIDGE th ...` to prepare what a program needs (e.g. a checkpoint), and
        # $PYTHON $CORPUS_TOOLS/<script> for data this project makes (corpus_caffemodel.py: a VGG-shaped caffemodel)
        env = {**os.environ, **p.env, "TMPDIR": tmp, "LUA_PATH": lua_path, "LUABRIDGE": " ".join(luabridge_command()),
               "PYTHON": sys.executable, "CORPUS_TOOLS": str(HERE)}
        if p.setup:
            prep = subprocess.run(p.setup, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                                  errors="replace", timeout=p.timeout * scale)
            if prep.returncode != 0:
                return result(False, 0.0, "setup failed: " + summary(prep.stdout + prep.stderr))
        start = time.perf_counter()
        # a long run (`until`) is stopped as soon as everything it must show has appeared
        enough = (lambda text: all(re.search(e, text, re.M) for e in p.expect)) if p.until else None
        out, status = run_th(p.args, cwd, env, p.timeout * scale, p.stdin, enough)
        seconds = time.perf_counter() - start
    missing = [e for e in p.expect if not re.search(e, out, re.M)]
    if status is None and not (p.until and not missing):
        return result(False, seconds, f"no result within {p.timeout * scale:.0f} s: " + summary(out), out)
    if status is not None and status != 0:
        return result(False, seconds, f"exit {status}: " + summary(out), out)
    if missing:
        return result(False, seconds, f"output lacks {missing[0]!r}: " + summary(out), out)
    if p.falls:
        values = [float(v) for v in re.findall(p.falls, out, re.M)]
        if not fell(values):
            return result(False, seconds, f"the values of {p.falls!r} did not fall: {values[:3]} ... {values[-3:]}", out)
    return result(True, seconds, "stopped once the expected output appeared" if status is None else "", out)


# --- models -------------------------------------------------------------------------------------

def lua_string(text: str) -> str:
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[\n{text}]{'=' * level}]"


def lua_sizes(sizes: list) -> str:
    """Sizes as a Lua table; a table of outputs (a gModule's, a ConcatTable's) nests one list per output."""
    return "{" + ", ".join(lua_sizes(s) if isinstance(s, list) else str(int(s)) for s in sizes) + "}"


def model_spec(m: Model) -> str:
    fields = [f"name = {lua_string(m.name)}", f"build = {lua_string(m.build)}",
              f"setup = {lua_string(m.setup) if m.setup else 'nil'}",
              f"backward = {'true' if m.backward else 'false'}"]
    if isinstance(m.input, str):
        fields.append(f"input = {lua_string(m.input)}")
    else:
        fields.append("input = {" + ", ".join(str(int(s)) for s in m.input) + "}")
    if m.output:
        fields.append("output = " + lua_sizes(m.output))
    return "return {\n  " + ",\n  ".join(fields) + "\n}\n"


def run_model(m: Model, repos: Path, scale: float, repo: Repo | None = None) -> Result:
    def result(ok: bool, seconds: float, detail: str, out: str = "") -> Result:
        return Result("models", m.name, m.repo, ok, seconds, detail, out, what=f"input {m.input}")

    src = find_repo(repos, m.repo)
    if src is None:
        return result(False, 0.0, f"repository {m.repo} not found under {repos}")
    with tempfile.TemporaryDirectory(prefix="luabridge-model-") as tmp:
        spec = Path(tmp) / "spec.lua"
        spec.write_text(model_spec(m))
        try:
            lua_path = library_path(repos, repo, m.lua_modules, Path(tmp) / "lua_modules")
        except LookupError as e:
            return result(False, 0.0, str(e))
        env = {**os.environ, **m.env, "TMPDIR": tmp, "LUA_PATH": lua_path}
        start = time.perf_counter()
        out, status = run_th([str(HARNESS), str(spec)], src / m.cwd, env, m.timeout * scale)
        seconds = time.perf_counter() - start
    if status is None:
        return result(False, seconds, f"no result within {m.timeout * scale:.0f} s: " + summary(out), out)
    if status != 0 or "corpus-model: ok" not in out:
        return result(False, seconds, summary(out, 1), out)
    shape = re.search(r"corpus-model: output (.+)", out)
    return result(True, seconds, "output " + (shape.group(1) if shape else "?"), out)


# --- requires -----------------------------------------------------------------------------------

def run_requires(corpus: Corpus, names: list[str], repos: Path) -> tuple[list[Result], dict[str, list[str]]]:
    """One result per repository and package it requires from outside itself (a luabridge package
    or a library), and the package names real code uses that luabridge lacks."""
    scans: dict[str, list[corpus_requires.FileRequires] | None] = {}
    wanted: set[str] = set()
    uses: set[tuple[str, str]] = set()
    for name in names:
        repo = corpus.repos[name]
        root = find_repo(repos, name)
        if root is None:
            scans[name] = None
            continue
        files = corpus_requires.lua_files(root, repo.exclude)
        found = [corpus_requires.scan_file(path, rel) for path, rel in files]
        rels = {rel for _, rel in corpus_requires.lua_files(root, [])}
        packages = corpus_requires.rockspec_packages(root)
        defined = corpus_requires.defined_names([path.read_text(errors="replace") for path, _ in files])
        for f in found:
            f.required = [m for m in f.required if not corpus_requires.in_repository(m, rels, f.path, packages)]
            wanted.update(m for m in f.required if not in_libraries(m, repo))
            f.names -= defined
            uses |= f.names
        scans[name] = found
    with tempfile.TemporaryDirectory(prefix="luabridge-requires-") as tmp:
        answer = corpus_requires.check_in_luabridge(luabridge_command(), sorted(wanted), sorted(uses), Path(tmp))
    results = []
    lacking: dict[str, list[str]] = defaultdict(list)
    for name in names:
        found = scans[name]
        if found is None:
            results.append(Result("requires", name, name, False, 0.0, f"repository {name} not found under {repos}"))
            continue
        repo = corpus.repos[name]
        first: dict[str, str] = {}     # module -> the first file requiring it
        for f in found:
            for module in f.required:
                first.setdefault(module, f.path)
            for pkg, field_name in f.names:
                if not answer["names"].get(f"{pkg}.{field_name}", True) and name not in lacking[f"{pkg}.{field_name}"]:
                    lacking[f"{pkg}.{field_name}"].append(name)
        for module, path in sorted(first.items()):
            status = True if in_libraries(module, repo) else answer["modules"].get(module, True)
            if status is True:
                results.append(Result("requires", f"{name}: {module}", name, True, 0.0, path))
            else:
                why = repo.explained.get(module) or corpus.explained.get(module, "")
                results.append(Result("requires", f"{name}: {module}", name, False, 0.0,
                                      f"module '{module}' not found ({path}: {status.split(chr(10))[0][:200]})",
                                      explained=why))
    return results, lacking


def in_libraries(module: str, repo: Repo) -> bool:
    """A module a library holds: 'fn.seq', or as a path, 'fn/seq' and 'fn/seq.lua'."""
    name = module[:-4] if module.endswith(".lua") else module
    name = name.replace("/", ".")
    return any(name == m or name.startswith(m + ".") for m in {**repo.shared, **repo.lua_modules})


# --- reports ------------------------------------------------------------------------------------

def summary(text: str, lines: int = 3) -> str:
    """The error line (a Lua error is printed before its traceback), else the last lines."""
    out = text.strip().splitlines()
    cut = next((i for i, line in enumerate(out) if line.startswith("stack traceback:")), len(out))
    return " | ".join(line.strip() for line in out[max(0, cut - lines):cut])


def cause(r: Result) -> str:
    """What groups failures: the error line without paths, line numbers and sizes."""
    text = r.detail.split(" | ")[-1]
    if r.depth == "requires":
        text = text.split(" (")[0]
    text = re.sub(r"^(exit \d+|setup failed|no result within \d+ s): ", lambda m: re.sub(r"\d+", "N", m.group(1)) + ": ", text)
    text = re.sub(r"(\S*/)?[\w.-]+\.lua:\d+: ", "", text)
    text = re.sub(r"\[string \"[^\"]*\"\]:\d+: ", "", text)
    text = re.sub(r"0x[0-9a-f]+", "0x?", text)
    return re.sub(r"\b\d+(\.\d+)?\b", "N", text)[:160]


def report(results: list[Result], out: Any = None) -> None:
    out = out or sys.stdout
    for depth in DEPTHS:
        mine = [r for r in results if r.depth == depth]
        if not mine:
            continue
        passed = sum(r.ok for r in mine)
        explained = sum(bool(r.explained) for r in mine if not r.ok)
        print(f"{depth}: {passed} of {len(mine)} passed ({100 * passed / len(mine):.1f}%), "
              f"{len(mine) - passed} failed ({explained} explained)", file=out)
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in results:
        if not r.ok:
            groups[(r.depth, "explained: " + r.explained if r.explained else cause(r))].append(r)
    if groups:
        print("failures by cause, largest group first:", file=out)
    for (depth, why), members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        names = ", ".join(m.name for m in members[:6]) + (" ..." if len(members) > 6 else "")
        print(f"  {len(members):3d} {depth:8s} {why}\n      {names}", file=out)


def markdown(results: list[Result], corpus: Corpus) -> str:
    """The docs' table (docs/conformance.md) (one row per depth) and its failures by cause, largest group first."""
    rows = ["| depth | repositories | runs | passed | failed (explained) | passed of those not explained |",
            "|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for depth in DEPTHS:
        mine = [r for r in results if r.depth == depth]
        if not mine:
            continue
        passed = sum(r.ok for r in mine)
        explained = sum(1 for r in mine if not r.ok and r.explained)
        rows.append(f"| {depth} | {len({r.repo for r in mine})} | {len(mine)} | {passed} ({100 * passed / len(mine):.1f}%) "
                    f"| {len(mine) - passed} ({explained}) | {100 * passed / max(1, len(mine) - explained):.1f}% |")
        for r in mine:
            if not r.ok:
                groups[(depth, ("explained: " + r.explained) if r.explained else cause(r))].append(r)
    lines = ["", "Failures by cause, largest group first:", ""]
    for (depth, why), members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        names = ", ".join(m.name for m in members[:5]) + (", ..." if len(members) > 5 else "")
        lines.append(f"- {len(members)} {depth}: {why} ({names})")
    return "\n".join(rows + (lines if groups else []))


def inventory(corpus: Corpus) -> str:
    """The repositories by kind, with their models and programs."""
    models = defaultdict(int, {r: sum(m.repo == r for m in corpus.models) for r in corpus.repos})
    programs = defaultdict(int, {r: sum(p.repo == r for p in corpus.programs) for r in corpus.repos})
    by_kind: dict[str, list[str]] = defaultdict(list)
    for name, repo in sorted(corpus.repos.items(), key=lambda kv: kv[0].lower()):
        by_kind[repo.kind or "other"].append(f"{name} ({models[name]}/{programs[name]})")
    lines = [f"{len(corpus.repos)} repositories, {len(corpus.models)} models, {len(corpus.programs)} programs "
             "(per repository: models/programs):", ""]
    for kind in sorted(by_kind, key=lambda k: -len(by_kind[k])):
        lines.append(f"- **{kind}** ({len(by_kind[kind])}): " + ", ".join(by_kind[kind]))
    return "\n".join(lines)


def quick_sample(items: list, every: int) -> list:
    return items[::every]


def run_all(jobs: list[Callable[[], Result]], workers: int, on_result: Callable[[Result], None]) -> list[Result]:
    results = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for r in pool.map(lambda job: job(), jobs):
            on_result(r)
            results.append(r)
    return results


def explain(r: Result, corpus: Corpus) -> Result:
    """r with the manifests' reason for its failure, if they give one (a logged run is explained
    again by the manifests of the moment)."""
    repo = corpus.repos.get(r.repo)
    if r.ok or not repo:
        return r
    if r.depth == "requires":
        module = r.name.split(": ", 1)[-1]
        r.explained = repo.explained.get(module) or corpus.explained.get(module, "") or r.explained
    elif r.name in repo.explained:
        r.explained = repo.explained[r.name]
    return r


def print_result(r: Result) -> None:
    verdict = "ok  " if r.ok else ("FAIL*" if r.explained else "FAIL")
    print(f"{verdict:5s} {r.depth:8s} {r.name[:44]:44s} {r.seconds:6.1f} s  {(r.explained or r.detail)[:300]}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repos", type=Path, help="folder of repositories (mirrors or checkouts)")
    ap.add_argument("--manifest", type=Path, nargs="*", help="manifest files (default: tools/corpus/*.toml)")
    ap.add_argument("--depth", choices=DEPTHS, nargs="*", help="depths to run (default: all three)")
    ap.add_argument("--repo", nargs="*", help="these repositories only (owner/name)")
    ap.add_argument("--only", nargs="*", help="these models and programs only (names)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="runs at once")
    ap.add_argument("--quick", action="store_true", help="a sample: one model in 10, one program in 10")
    ap.add_argument("--markdown", action="store_true", help="print the table of docs/conformance.md at the end")
    ap.add_argument("--inventory", action="store_true", help="list the repositories by kind, run nothing")
    ap.add_argument("--log", type=Path, help="append each result to this file as a JSON line, as it comes")
    ap.add_argument("--from-log", type=Path, help="print the report (and --markdown) of a --log file, run nothing "
                    "(a run logged twice counts once, as its later record)")
    ap.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every time limit")
    a = ap.parse_args(argv)
    corpus = load_manifest(a.manifest)
    if a.inventory:
        print(inventory(corpus))
        return 0
    if a.from_log:
        # a later record of the same run (a rerun appended to the log) replaces the earlier one
        records = [json.loads(line) for line in a.from_log.read_text().splitlines() if line.strip()]
        latest = {(r["depth"], r["repo"], r["name"]): r for r in records}
        logged = [explain(Result(**r), corpus) for r in latest.values()]
        report(logged)
        if a.markdown:
            print(markdown(logged, corpus))
        return 0
    log = open(a.log, "a") if a.log else None

    def show(r: Result) -> None:
        print_result(r)
        if log:
            fields = {k: v for k, v in r.__dict__.items() if k not in ("program", "output")}
            log.write(json.dumps(fields) + "\n")
            log.flush()
    depths = a.depth or list(DEPTHS)
    keep = (lambda x: (not a.repo or x.repo in a.repo) and (not a.only or x.name in a.only))
    models = [m for m in corpus.models if keep(m)]
    programs = [p for p in corpus.programs if keep(p)]
    if a.quick:
        models, programs = quick_sample(models, 10), quick_sample(programs, 10)
    results: list[Result] = []
    if "requires" in depths and not a.only:
        names = [n for n in corpus.repos if not a.repo or n in a.repo]
        found, lacking = run_requires(corpus, names, a.repos)
        for r in found:
            if log:
                log.write(json.dumps({k: v for k, v in r.__dict__.items() if k not in ("program", "output")}) + "\n")
        for name in names:
            mine = [r for r in found if r.repo == name]
            missing = [r.name.split(": ", 1)[1] + ("*" if r.explained else "") for r in mine if not r.ok]
            print(f"{'ok  ' if not missing else 'FAIL'}  requires {name:44s} {len(mine) - len(missing)} of {len(mine)} packages"
                  + (f"; missing: {', '.join(missing)}" if missing else ""), flush=True)
        results += found
        if lacking:
            print("package names real code uses that luabridge lacks (name: repositories):")
            for name, where in sorted(lacking.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                print(f"  {name}: {len(where)} ({', '.join(where[:4])}{' ...' if len(where) > 4 else ''})")
    if "models" in depths:
        results += run_all([lambda m=m: explain(run_model(m, a.repos, a.timeout_scale, corpus.repos.get(m.repo)), corpus)
                            for m in models], a.jobs, show)
    if "programs" in depths:
        results += run_all([lambda p=p: explain(run_program(p, a.repos, a.timeout_scale, corpus.repos.get(p.repo)), corpus)
                            for p in programs], a.jobs, show)
    report(results)
    if a.markdown:
        print(markdown(results, corpus))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
