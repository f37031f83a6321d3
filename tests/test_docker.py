"""The Docker images' rules, checked on the files (no Docker daemon runs here): each base image pinned
by an exact tag or a digest, the locked dependencies installed in a layer before the source is
copied, every Python package exact in the image's lock and the lock consistent with pyproject.toml,
no pip cache, a non-root user, a .dockerignore per Dockerfile, RUN lines valid shell.
The checkers are tried on bad Dockerfiles too, so a rule that checks nothing fails.
One slow test builds the CPU image and runs it, where a daemon runs and LUABRIDGE_DOCKER_BUILD=1.
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

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"


@dataclass(frozen=True)
class Image:
    dockerfile: str
    extras: tuple[str, ...]   # the extras the image needs: its default command runs the tests
    python: str               # the base image's Python, for markers in the requirements


# The CPU image runs the whole suite, so it needs what `make test` installs.
IMAGES = [Image("Dockerfile", ("test", "examples", "onednn"), "3.11"),
          Image("Dockerfile.cuda", ("gpu",), "3.10")]
IDS = [i.dockerfile for i in IMAGES]


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
    return [[a for a in args.split() if not a.startswith("--")][0] for op, args in steps if op == "FROM"]


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


def lock_of(steps: list[tuple[str, str]]) -> Path:
    copied = [a for op, args in steps if op == "COPY" for a in sources(args) if a.endswith(".lock")]
    assert len(copied) == 1, copied
    return ROOT / copied[0]


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


def required(image: Image) -> list[Requirement]:
    """pyproject's runtime dependencies and those of the image's extras that apply to its Python."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for e in image.extras for r in project["optional-dependencies"][e]]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"python_version": image.python})]


@pytest.fixture(params=IMAGES, ids=IDS)
def image(request) -> Image:
    return request.param


@pytest.fixture
def steps(image: Image) -> list[tuple[str, str]]:
    return instructions((DOCKER / image.dockerfile).read_text())


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


def test_lock_pins_reject_ranges(tmp_path):
    lock = tmp_path / "x.lock"
    lock.write_text("# header\n--extra-index-url https://example.org\nA_b==1.0+cpu\nc==2\n")
    assert lock_pins(lock) == {"a-b": "1.0+cpu", "c": "2"}
    for bad in ("numpy>=1.24\n", "numpy\n", "numpy==1.*\n", "a==1\nA==2\n"):
        lock.write_text(bad)
        with pytest.raises(AssertionError):
            lock_pins(lock)


# --- the two images --------------------------------------------------------------------------------

def test_base_pinned_by_exact_tag(steps):
    bases = base_images(steps)
    assert bases and all(pinned(b) for b in bases), bases


def test_runs_as_a_non_root_user(steps):
    assert user_at_start(steps) not in ("root", "0")


def test_pip_keeps_no_cache(steps):
    installs = pip_installs(steps)
    assert installs and all(cache_off for _, _, cache_off in installs), installs


def test_dependencies_installed_before_the_source_copy(steps):
    """The lock alone is copied, installed with --no-deps, then the source, then the project
    without dependencies: a source edit rebuilds only the last layers, and nothing unlocked enters."""
    installs = pip_installs(steps)
    lock = lock_of(steps).relative_to(ROOT).as_posix()
    lock_copy = next(i for i, (op, args) in enumerate(steps) if op == "COPY" and lock in args)
    deps = [i for i, cmd, _ in installs if re.search(r"-r \S+\.lock", cmd)]
    assert len(deps) == 1 and lock_copy < deps[0] < source_copy(steps)
    assert all("--no-deps" in cmd for _, cmd, _ in installs), installs
    project = [i for i, cmd, _ in installs if re.search(r"\binstall\b.*\s\.(\s|$)", cmd)]
    assert len(project) == 1 and project[0] > source_copy(steps)


def test_lock_is_exact_and_covers_pyproject(image, steps):
    pins = lock_pins(lock_of(steps))
    for req in required(image):
        name = canonicalize_name(req.name)
        assert name in pins, f"{image.dockerfile}: {req} is missing from its lock"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), (
            f"{image.dockerfile}: {name}=={pins[name]} does not satisfy pyproject's {req}")


def test_cpu_lock_has_torch_as_its_cpu_build():
    steps = instructions((DOCKER / "Dockerfile").read_text())
    lock = lock_of(steps)
    assert lock_pins(lock)["torch"] == "2.13.0+cpu"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lock.read_text().splitlines()


def test_cuda_image_matches_cupy_to_the_cuda_runtime():
    steps = instructions((DOCKER / "Dockerfile.cuda").read_text())
    (base,) = base_images(steps)
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-runtime-ubuntu\d\d\.04", base), base
    assert "cupy-cuda12x" in lock_pins(lock_of(steps))


def test_default_command_runs_existing_tests(steps):
    (cmd,) = [json.loads(args) for op, args in steps if op == "CMD"]
    paths = [a for a in cmd if a.startswith("tests")]
    assert cmd[:3] == ["python", "-m", "pytest"] and paths, cmd
    assert all((ROOT / p).exists() for p in paths), paths


def test_lock_pins_the_installer_and_build_backend(steps):
    """pip (installed first) and the build backend (the project is built without isolation) are
    locked too, at versions pyproject's build-system accepts."""
    pins = lock_pins(lock_of(steps))
    assert "pip" in pins
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for req in map(Requirement, build):
        assert req.specifier.contains(Version(pins[canonicalize_name(req.name)])), req


def test_dockerignore_keeps_host_state_out(image):
    ignore = DOCKER / f"{image.dockerfile}.dockerignore"
    patterns = {line.strip().rstrip("/") for line in ignore.read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "build", "dist", "*.egg-info"} <= patterns, patterns
    needed = {"*", "**", "docker", "lua", "luabridge", "tests", "pyproject.toml", "setup.py", "*.lock"}
    assert not patterns & needed, patterns & needed


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_run_lines_are_valid_shell(steps):
    runs = [args for op, args in steps if op == "RUN" and not args.startswith("[")]
    assert runs
    for cmd in runs:
        r = subprocess.run(["bash", "-n", "-c", cmd], capture_output=True, text=True)
        assert r.returncode == 0, f"{cmd}\n{r.stderr}"


def test_bash_n_rejects_broken_shell():
    assert subprocess.run(["bash", "-n", "-c", "apt-get update && && ls"], capture_output=True).returncode


def daemon_reason() -> str | None:
    """Why the image cannot be built here, or None."""
    if shutil.which("docker") is None:
        return "no docker client"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "the Docker daemon is not running"
    if os.environ.get("LUABRIDGE_DOCKER_BUILD") != "1":
        return "building the image downloads ~1 GB: set LUABRIDGE_DOCKER_BUILD=1 to run it"
    return None


@pytest.mark.slow
def test_cpu_image_builds_and_runs():
    reason = daemon_reason()
    if reason:
        pytest.skip(f"docker build not run: {reason}")
    tag = "luabridge-test:latest"
    build = subprocess.run(["docker", "build", "-f", "docker/Dockerfile", "-t", tag, "."], cwd=ROOT,
                           capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run(["docker", "run", "--rm", tag, "sh", "-c",
                          "id -u && luabridge th -e 'print(torch.Tensor(2, 3):fill(1.5):sum())'"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    uid, total = run.stdout.split()[:2]
    assert uid != "0" and float(total) == 9.0
