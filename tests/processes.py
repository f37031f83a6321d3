"""The suite's own child processes (a pytest plugin: tests/conftest.py imports its fixtures and
hooks). The `spawn` fixture starts a process in a process group of its own and kills the whole
group when the test ends, pass or fail. After every test, and at the end of the session, a child
process still running fails the run and is killed: a test that leaks one (a busy loop whose
assertion failed before it was stopped) cannot leave it spinning for as long as the machine runs.

Children are found in Linux's /proc; elsewhere the checks find none."""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

# Children that libraries keep on purpose for the life of this process: multiprocessing starts
# one resource tracker (for spawned pools' semaphores) and keeps it until the process exits.
LONG_LIVED = ("from multiprocessing.resource_tracker import main",)

_PROC = Path("/proc")


@dataclass(frozen=True)
class Child:
    pid: int
    command: str

    def __str__(self) -> str:
        return f"{self.pid} {self.command}"


def _parent_and_state(pid: str) -> tuple[int, str] | None:
    try:
        stat = (_PROC / pid / "stat").read_bytes()
    except OSError:  # ended meanwhile
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # the command in parentheses may hold spaces
    return int(fields[1]), fields[0].decode()


def _command(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def running_children(parent: int | None = None) -> list[Child]:
    """The child processes of `parent` (this process) that still run, less the long-lived ones
    libraries keep (LONG_LIVED); ended ones that nobody waited for yet (zombies) run no more."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in (os.listdir(_PROC) if _PROC.is_dir() else []):
        seen = entry.isdigit() and _parent_and_state(entry)
        if seen and seen[0] == parent and seen[1] != "Z":
            command = _command(int(entry))
            if not any(mark in command for mark in LONG_LIVED):
                found.append(Child(int(entry), command))
    return found


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # every process of the group ended
        pass


def kill(children: list[Child]) -> None:
    """SIGKILL to each child, with its process group when it leads one (its own children too);
    never to the group of this process."""
    for child in children:
        try:
            leads_a_group = os.getpgid(child.pid) == child.pid != os.getpgrp()
            if not leads_a_group:
                os.kill(child.pid, signal.SIGKILL)
        except ProcessLookupError:  # ended meanwhile
            continue
        if leads_a_group:
            _kill_group(child.pid)


def describe(children: list[Child]) -> str:
    return "\n".join(f"  {child}" for child in children)


class Spawner:
    """spawn(args, **popen): subprocess.Popen(args, **popen) in a new session (so a process
    group) of its own; end() kills every group started, then waits for the processes."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen] = []

    def __call__(self, args: Any, **popen: Any) -> subprocess.Popen:
        proc = subprocess.Popen(args, start_new_session=True, **popen)
        self.started.append(proc)
        return proc

    def end(self) -> None:
        for proc in self.started:
            _kill_group(proc.pid)  # a group outlives its leader: killed even when the leader ended
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen]]:
    """Starts processes (subprocess.Popen's arguments) that end with the test, pass or fail."""
    spawner = Spawner()
    yield spawner
    spawner.end()


@pytest.fixture(autouse=True)
def no_leaked_children() -> Iterator[None]:
    """Fails a test that leaves a child process running (and kills it): start processes with the
    spawn fixture, or wait for them (subprocess.run)."""
    before = {child.pid for child in running_children()}
    yield
    leaked = [child for child in running_children() if child.pid not in before]
    if leaked:
        kill(leaked)
        pytest.fail("the test left child processes running (killed now; start them with the spawn "
                    "fixture):\n" + describe(leaked), pytrace=False)


_AT_START = pytest.StashKey[set]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.stash[_AT_START] = {child.pid for child in running_children()}


@pytest.hookimpl(tryfirst=True)  # before the terminal summary, which is printed after every other
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Children still running once every fixture ended (a cluster a module fixture started and did
    not shut down): the run fails, and they are killed."""
    leaked = [child for child in running_children() if child.pid not in session.stash.get(_AT_START, set())]
    if not leaked:
        return
    kill(leaked)
    message = "the test session left child processes running (killed now):\n" + describe(leaked)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\n" + message, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
