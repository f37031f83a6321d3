"""The Docker images' rules, checked on the files for each target an image is built as (the CPU
Dockerfile's runtime and test stages, the CUDA one): each base image pinned by an exact tag or a
digest, the locked dependencies installed in layers before the source is copied, every Python
package exact in the target's locks and the locks consistent with pyproject.toml, no pip cache, a
non-root user, a .dockerignore per Dockerfile, RUN lines valid shell.
The checkers are tried on bad Dockerfiles too, so a rule that checks nothing fails.
One slow test builds the CPU runtime image and runs it, where podman or docker and the base image are.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"


@dataclass(frozen=True)
class Target:
    dockerfile: str
    stage: str | None         # the stage built (--target), None for the last one
    extras: tuple[str, ...]   # the extras its locks must cover
    python: str               # the base image's Python, for markers in the requirements

    @property
    def id(self) -> str:
        return f"{self.dockerfile}:{self.stage}" if self.stage else self.dockerfile


RUNTIME_EXTRAS = ("onednn", "image", "plot")
RUNTIME = Target("Dockerfile", "runtime", RUNTIME_EXTRAS, "3.11")
# The test target runs the whole suite, so it needs what `make test` installs.
TEST = Target("Dockerfile", "test", ("test", "examples", *RUNTIME_EXTRAS), "3.11")
CUDA = Target("Dockerfile.cuda", None, ("gpu",), "3.10")
TARGETS = [RUNTIME, TEST, CUDA]
# What the runtime image leaves to the test target: test tools, PyTorch, Ray and what they pull.
TEST_ONLY = {"pytest", "hypothesis", "torch", "ray", "pyarrow", "pandas", "scipy", "scikit-learn", "build"}


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    logical, found = "", []
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not (logical or line.strip()):   # comments may sit inside
            continue                                                        # a continued instruction
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        word, _, rest = logical.strip().partition(" ")
        found.append((word.upper(), rest.strip()))
        logical = ""
    return found


def stage_chain(steps: list[tuple[str, str]], stage: str | None) -> list[tuple[str, str]]:
    """The steps a build of `stage` (the last stage when None) runs: its own and, through each
    `FROM <earlier stage>`, its ancestors', oldest first."""
    stages: dict[str, list[tuple[str, str]]] = {}
    order: list[list[tuple[str, str]]] = []
    for op, args in steps:
        if op == "FROM":
            words = args.split()
            order.append([])
            if len(words) >= 3 and words[-2].upper() == "AS":
                stages[words[-1]] = order[-1]
        order[-1].append((op, args))
    chain = stages[stage] if stage else order[-1]
    parent = from_image(chain[0][1])
    return (stage_chain(steps, parent) if parent in stages else []) + chain


def from_image(args: str) -> str:
    return [a for a in args.split() if not a.startswith("--")][0]


def pinned(image: str) -> bool:
    """A digest, or a tag naming an exact release (x.y.z), not `latest` or a floating `3.11-slim`."""
    if re.search(r"@sha256:[0-9a-f]{64}$", image):
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and re.match(r"v?\d+\.\d+\.\d+(?![.\d])", tag) is not None


def sources(args: str) -> list[str]:
    """The source paths of a COPY (its flags and destination left out)."""
    return [a for a in args.split() if not a.startswith("--")][:-1]


def base_images(steps: list[tuple[str, str]]) -> list[str]:
    """The images FROM names, less the earlier stages they name."""
    named = {args.split()[-1] for op, args in steps if op == "FROM" and " AS " in args.upper()}
    return [from_image(args) for op, args in steps if op == "FROM" and from_image(args) not in named]


def run_command(args: str) -> str:
    """A RUN's shell command, its flags (--mount=...) left out."""
    return re.sub(r"^(--\S+\s+)+", "", args)


def user_at_start(steps: list[tuple[str, str]]) -> str:
    """The user the CMD / ENTRYPOINT runs as: the last USER before it, root when none."""
    user = "root"
    for op, args in steps:
        if op == "USER":
            user = args.split(":")[0]
        if op in ("CMD", "ENTRYPOINT"):
            return user
    raise AssertionError("no CMD or ENTRYPOINT")


def pip_installs(steps: list[tuple[str, str]]) -> list[tuple[int, str, bool]]:
    """(step index, RUN command, pip's cache off) of each RUN that runs `pip install`."""
    cache_off, found = False, []
    for i, (op, args) in enumerate(steps):
        if op == "ENV" and re.search(r"\bPIP_NO_CACHE_DIR=(1|true|yes|on)\b", args, re.I):
            cache_off = True
        if op == "RUN" and re.search(r"\bpip3? install\b", args):
            found.append((i, args, cache_off or "--no-cache-dir" in args))
    return found


def source_copy(steps: list[tuple[str, str]]) -> int:
    """Index of the COPY of the whole build context (`COPY [--chown=...] . <dest>`)."""
    for i, (op, args) in enumerate(steps):
        if op == "COPY" and sources(args) == ["."]:
            return i
    raise AssertionError("no COPY of the build context")


def locks_of(steps: list[tuple[str, str]]) -> list[Path]:
    """The lock files the steps copy, in order."""
    copied = [ROOT / a for op, args in steps if op == "COPY" for a in sources(args) if a.endswith(".lock")]
    assert copied and len(set(copied)) == len(copied), copied
    return copied


def installed_pins(steps: list[tuple[str, str]]) -> dict[str, str]:
    """name -> version over all the locks a target installs, each package in one lock only."""
    pins: dict[str, str] = {}
    for lock in locks_of(steps):
        more = lock_pins(lock)
        assert not pins.keys() & more.keys(), f"{lock.name} repeats {sorted(pins.keys() & more.keys())}"
        pins |= more
    return pins


def lock_pins(path: Path) -> dict[str, str]:
    """name -> exact version of every requirement line (comments and pip options skipped)."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)", line)
        assert m, f"{path.name}: {line!r} is not an exact `name==version`"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"{path.name}: {name} is pinned twice"
        pins[name] = m.group(2)
    return pins


def required(target: Target) -> list[Requirement]:
    """pyproject's runtime dependencies and those of the target's extras that apply to its Python."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for e in target.extras for r in project["optional-dependencies"][e]]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"python_version": target.python})]


def target_steps(target: Target) -> list[tuple[str, str]]:
    return stage_chain(instructions((DOCKER / target.dockerfile).read_text()), target.stage)


@pytest.fixture(params=TARGETS, ids=[t.id for t in TARGETS])
def target(request) -> Target:
    return request.param


@pytest.fixture
def steps(target: Target) -> list[tuple[str, str]]:
    return target_steps(target)


# --- the checkers, on Dockerfiles that break each rule -------------------------------------------

BAD = """\
FROM python:3.11-slim
# a comment
COPY . /app
RUN pip install \\
      -r /app/requirements.txt
CMD ["python"]
"""


def test_parser_joins_continuations_and_drops_comments():
    assert instructions(BAD) == [
        ("FROM", "python:3.11-slim"), ("COPY", ". /app"),
        ("RUN", "pip install        -r /app/requirements.txt"), ("CMD", '["python"]')]


@pytest.mark.parametrize("ref, ok", [
    ("python:3.11.7-slim-bookworm", True), ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", True),
    ("python@sha256:" + "a" * 64, True), ("localhost:5000/py:1.2.3", True),
    ("python", False), ("python:latest", False), ("python:3.11-slim", False), ("python:3", False),
    ("nvidia/cuda:12-runtime-ubuntu22.04", False), ("nvidia/cuda:12.4-runtime", False),
    ("localhost:5000/python", False)])
def test_pinned(ref, ok):
    assert pinned(ref) is ok


def test_checkers_catch_a_bad_dockerfile():
    steps = instructions(BAD)
    assert not all(pinned(b) for b in base_images(steps))
    assert user_at_start(steps) == "root"
    assert [cache_off for _, _, cache_off in pip_installs(steps)] == [False]
    assert source_copy(steps) < pip_installs(steps)[0][0]
    good_user = instructions("FROM a:1.2.3\nUSER 1000:1000\nCMD x\n")
    assert user_at_start(good_user) == "1000"
    env = instructions("FROM a:1.2.3\nENV PIP_NO_CACHE_DIR=1\nRUN pip install x\nCMD x\n")
    assert [c for _, _, c in pip_installs(env)] == [True]


STAGES = """\
FROM python:3.11.7-slim AS deps
RUN --mount=type=secret,id=ca echo deps
FROM deps AS extra
RUN echo extra
FROM extra AS test
CMD ["test"]
FROM deps AS runtime
CMD ["runtime"]
"""


def test_stage_chain_follows_from_to_the_base():
    steps = instructions(STAGES)
    assert [a for _, a in stage_chain(steps, "test")] == [
        "python:3.11.7-slim AS deps", "--mount=type=secret,id=ca echo deps",
        "deps AS extra", "echo extra", "extra AS test", '["test"]']
    assert stage_chain(steps, None) == stage_chain(steps, "runtime")
    assert [a for _, a in stage_chain(steps, "runtime")][-2:] == ["deps AS runtime", '["runtime"]']
    assert base_images(steps) == ["python:3.11.7-slim"]
    assert run_command(steps[1][1]) == "echo deps"


def test_lock_pins_reject_ranges(tmp_path):
    lock = tmp_path / "x.lock"
    lock.write_text("# header\n--extra-index-url https://example.org\nA_b==1.0+cpu\nc==2\n")
    assert lock_pins(lock) == {"a-b": "1.0+cpu", "c": "2"}
    for bad in ("numpy>=1.24\n", "numpy\n", "numpy==1.*\n", "a==1\nA==2\n"):
        lock.write_text(bad)
        with pytest.raises(AssertionError):
            lock_pins(lock)


# --- the targets: the CPU runtime and test stages, the CUDA image ---------------------------------

def test_base_pinned_by_exact_tag(steps):
    bases = base_images(steps)
    assert len(bases) == 1 and pinned(bases[0]), bases


def test_runs_as_a_non_root_user(steps):
    assert user_at_start(steps) not in ("root", "0")


def test_pip_keeps_no_cache(steps):
    installs = pip_installs(steps)
    assert installs and all(cache_off for _, _, cache_off in installs), installs


def test_dependencies_installed_before_the_source_copy(steps):
    """Each lock alone is copied, then installed with --no-deps, all before the source, then the
    project without dependencies (built into a wheel by a stage of its own, or from the source): a
    source edit rebuilds only the last layers, and nothing unlocked enters."""
    installs = pip_installs(steps)
    for lock in locks_of(steps):
        copy = next(i for i, (op, args) in enumerate(steps) if op == "COPY" and lock.name in args)
        deps = [i for i, cmd, _ in installs if re.search(rf"-r \S*{re.escape(lock.name)}\b", cmd)]
        assert len(deps) == 1 and copy < deps[0] < source_copy(steps), (lock.name, deps)
    assert all("--no-deps" in cmd for _, cmd, _ in installs), installs
    # the project: its source (`.`), or the wheel the wheel stage built from it
    project = [i for i, cmd, _ in installs if re.search(r"\binstall\b.*\s(\.|/wheels/\*\.whl)(\s|$)", cmd)]
    assert len(project) == 1 and project[0] > source_copy(steps)


def test_locks_are_exact_and_cover_pyproject(target, steps):
    pins = installed_pins(steps)
    for req in required(target):
        name = canonicalize_name(req.name)
        assert name in pins, f"{target.id}: {req} is missing from its locks"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), (
            f"{target.id}: {name}=={pins[name]} does not satisfy pyproject's {req}")


def test_locks_were_resolved_by_lock_py(steps):
    """No pin written by hand: every lock says it was generated, and for which extras."""
    for lock in locks_of(steps):
        text = lock.read_text()
        assert text.startswith("# Generated by docker/lock.py"), lock.name
        assert "by hand" not in text, lock.name


def test_runtime_image_is_slim():
    """The runtime target has what a user runs with (the covering test checks it) and no test tools,
    PyTorch or Ray; the test target has them, in its own lock."""
    runtime = installed_pins(target_steps(RUNTIME))
    assert not runtime.keys() & TEST_ONLY, sorted(runtime.keys() & TEST_ONLY)
    assert TEST_ONLY <= installed_pins(target_steps(TEST)).keys()


def test_runtime_is_the_default_target():
    steps = instructions((DOCKER / RUNTIME.dockerfile).read_text())
    assert stage_chain(steps, None) == stage_chain(steps, RUNTIME.stage)


def test_test_lock_has_torch_as_its_cpu_build():
    lock = locks_of(target_steps(TEST))[-1]
    assert lock_pins(lock)["torch"] == "2.13.0+cpu"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lock.read_text().splitlines()


def test_cuda_image_matches_cupy_to_the_cuda_runtime():
    steps = target_steps(CUDA)
    (base,) = base_images(steps)
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-runtime-ubuntu\d\d\.04", base), base
    assert "cupy-cuda12x" in installed_pins(steps)


def default_command(steps: list[tuple[str, str]]) -> list[str]:
    (cmd,) = [json.loads(args) for op, args in steps if op == "CMD"]
    return cmd


@pytest.mark.parametrize("target", [TEST, CUDA], ids=[TEST.id, CUDA.id])
def test_test_targets_run_existing_tests(target):
    cmd = default_command(target_steps(target))
    paths = [a for a in cmd if a.startswith("tests")]
    assert cmd[:3] == ["python", "-m", "pytest"] and paths, cmd
    assert all((ROOT / p).exists() for p in paths), paths


def test_runtime_command_runs_an_existing_example():
    cmd = default_command(target_steps(RUNTIME))
    assert cmd[0] == "python" and len(cmd) == 2 and (ROOT / cmd[1]).is_file(), cmd


def test_locks_pin_the_installer_and_build_backend(steps):
    """pip (installed first) and the build backend (the project is built without isolation) are
    locked too, at versions pyproject's build-system accepts."""
    pins = installed_pins(steps)
    assert "pip" in pins
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for req in map(Requirement, build):
        assert req.specifier.contains(Version(pins[canonicalize_name(req.name)])), req


def test_dockerignore_keeps_host_state_out(target):
    ignore = DOCKER / f"{target.dockerfile}.dockerignore"
    patterns = {line.strip().rstrip("/") for line in ignore.read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "build", "dist", "*.egg-info"} <= patterns, patterns
    needed = {"*", "**", "docker", "lua", "luabridge", "tests", "examples", "pyproject.toml", "setup.py",
              "*.lock"}
    assert not patterns & needed, patterns & needed


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_run_lines_are_valid_shell(steps):
    runs = [run_command(args) for op, args in steps if op == "RUN" and not args.startswith("[")]
    assert runs
    for cmd in runs:
        r = subprocess.run(["bash", "-n", "-c", cmd], capture_output=True, text=True)
        assert r.returncode == 0, f"{cmd}\n{r.stderr}"


def test_bash_n_rejects_broken_shell():
    assert subprocess.run(["bash", "-n", "-c", "apt-get update && && ls"], capture_output=True).returncode


# --- the runtime image, built and run ---------------------------------------------------------------

SMOKE_TAG = "luabridge-smoke:test"   # kept after the test: its layers are the next build's cache


def container_engine() -> tuple[str | None, str]:
    """(podman, else a docker whose daemon answers; why neither when None)."""
    if shutil.which("podman"):
        return "podman", ""
    if shutil.which("docker") is None:
        return None, "neither podman nor docker is installed"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return None, "no podman, and the Docker daemon is not running"
    return "docker", ""


def image_id(engine: str, ref: str) -> str | None:
    r = subprocess.run([engine, "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


@pytest.fixture(scope="module")
def runtime_image() -> tuple[str, str]:
    """(engine, tag) of the runtime image, built from this tree; the previous build's image is
    removed (its dependency layers stay, shared with this one)."""
    engine, why = container_engine()
    if engine is None:
        pytest.skip(f"image not built: {why}")
    (base,) = base_images(target_steps(RUNTIME))
    exists = [engine, "image", "exists", base] if engine == "podman" else [engine, "image", "inspect", base]
    if subprocess.run(exists, capture_output=True).returncode != 0:
        pytest.skip(f"image not built: the base {base} is not in {engine}'s storage "
                    "(docker/README.md: pull it, or make it with docker/make_base.sh)")
    before = image_id(engine, SMOKE_TAG)
    # PIP_CERT: the CA bundle pip trusts here (a proxy that re-signs TLS), handed to the build's pip
    ca = ["--secret", f"id=ca,src={os.environ['PIP_CERT']}"] if os.environ.get("PIP_CERT") else []
    build = subprocess.run([engine, "build", "-f", "docker/Dockerfile", "--target", RUNTIME.stage, *ca,
                            "-t", SMOKE_TAG, "."], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    if before and before != image_id(engine, SMOKE_TAG):
        subprocess.run([engine, "rmi", before], capture_output=True)
    return engine, SMOKE_TAG


def offline(image: tuple[str, str], *command: str) -> subprocess.CompletedProcess:
    """Runs the command (the image's default when none) in a new container without a network."""
    engine, tag = image
    r = subprocess.run([engine, "run", "--rm", "--network", "none", tag, *command],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{command}: {r.stdout[-2000:]}{r.stderr[-2000:]}"
    return r


@pytest.mark.slow
def test_runtime_image_runs_as_a_user_who_owns_app(runtime_image):
    r = offline(runtime_image, "sh", "-c", "id -u && stat -c %U /app && touch /app/written && ls /app/written")
    uid, owner, written = r.stdout.split()
    assert uid != "0" and owner == "luabridge" and written == "/app/written"


@pytest.mark.slow
def test_runtime_image_has_exactly_its_lock(runtime_image):
    offline(runtime_image, "pip", "check")
    listed = json.loads(offline(runtime_image, "pip", "list", "--format=json").stdout)
    installed = {canonicalize_name(p["name"]): p["version"] for p in listed}
    assert installed.pop("luabridge") == project_version()
    assert installed == installed_pins(target_steps(RUNTIME))


def project_version() -> str:
    """luabridge's version, read from the one place it is written."""
    text = (ROOT / "luabridge" / "core" / "version.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def lua_table(a: np.ndarray) -> str:
    """A nested Lua table literal of the array, each float exact (repr round-trips)."""
    return "{" + ", ".join(lua_table(r) if np.ndim(r) else repr(float(r)) for r in a) + "}"


@pytest.mark.slow
def test_runtime_image_runs_nn(runtime_image):
    """An nn.Linear forward in `luabridge th -e`, against numpy float64."""
    rng = np.random.default_rng(7)
    weight, bias, x = rng.standard_normal((2, 3)), rng.standard_normal(2), rng.standard_normal(3)
    script = (f"require 'nn'; local m = nn.Linear(3, 2); m.weight:copy(torch.Tensor({lua_table(weight)})); "
              f"m.bias:copy(torch.Tensor({lua_table(bias)})); "
              f"local y = m:forward(torch.Tensor({lua_table(x)})); "
              "for i = 1, 2 do io.write(string.format('%.17g\\n', y[i])) end")
    out = offline(runtime_image, "luabridge", "th", "-e", script).stdout.split()
    np.testing.assert_allclose([float(v) for v in out], weight @ x + bias, rtol=1e-13)


@pytest.mark.slow
def test_runtime_image_runs_the_lua52compat_luajit(runtime_image):
    """The image's luabridge runs its own LuaJIT, built with LUA52COMPAT in the wheel stage: `#`
    of a table calls its __len, and a call's `(` may open a new line."""
    script = "local n = #setmetatable({}, {__len = function() return 3 end})\nprint\n(n)"
    assert offline(runtime_image, "luabridge", "th", "-e", script).stdout.split() == ["3"]


@pytest.mark.slow
def test_runtime_image_loads_onednn(runtime_image):
    """The onednn extra's library loads (it needs the image's libgomp1)."""
    r = offline(runtime_image, "luabridge", "th", "-e", "print(require('torch.backend.cpu.dnnl').available)")
    assert r.stdout.split() == ["true"]


@pytest.mark.slow
def test_runtime_image_default_command_runs_offline(runtime_image):
    """examples/demo.py ends by printing a numpy array Lua wrote into, and its transpose."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    a[:, :2] = -1
    assert offline(runtime_image).stdout.endswith(f"{a}\n{a.T}\n")
