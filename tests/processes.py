"""The suite's own child processes (a pytest plugin: tests/conftest.py imports its fixtures and
hooks). The `spawn` fixture starts a process in a process group of its own and kills the whole
group when the test ends, pass or fail; run_in_own_group runs a command to its end and kills what
it left in its group. After every test, and at the end of the session, a child
process still running fails the run and is killed: a test that leaks one (a busy loop whose
assertion failed before it was stopped) cannot leave it spinning for as long as the machine runs.

Children are found in Linux's /proc; elsewhere the checks find none."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

# Children that libraries keep on purpose for the life of this process: multiprocessing starts
# one resource tracker (for spawned pools' semaphores) and keeps it until the process exits.
LONG_LIVED = ("from multiprocessing.resource_tracker import main",)

_PROC = Path("/proc")
# Children of run_in_own_group calls still under way (a module fixture's pool runs them across
# tests): the call ends them, so the check after a test leaves them alone.
_RUNS_UNDER_WAY: set[int] = set()
_RUNS_LOCK = threading.Lock()   # a child is in the set before the check can see it


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


def run_in_own_group(args: Any, timeout: float, **popen: Any) -> subprocess.CompletedProcess:
    """subprocess.run(args, capture_output=True, text=True, timeout=timeout) in a session of its
    own, whose whole process group is killed once the command ended or ran out of time: a shell's
    background job cannot outlive it (subprocess.run kills the shell alone). A job still holding
    the output pipes keeps it waiting, up to the timeout."""
    with _RUNS_LOCK:
        proc = subprocess.Popen(args, start_new_session=True, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **popen)
        _RUNS_UNDER_WAY.add(proc.pid)
    try:
        with proc:   # on leaving: waits for it
            try:
                out, err = proc.communicate(timeout=timeout)
            finally:
                _kill_group(proc.pid)
    finally:
        _RUNS_UNDER_WAY.discard(proc.pid)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


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
    with _RUNS_LOCK:
        leaked = [child for child in running_children() if child.pid not in before | _RUNS_UNDER_WAY]
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


# Source for a script run in a subprocess that forks: await_child(pid, seconds) prints "child exit
# N" once the forked child ends, or kills it and prints "child hung" when it outlives `seconds`.
AWAIT_CHILD = r"""
import os as _os, time as _time
def await_child(pid, seconds):
    deadline = _time.monotonic() + seconds
    while _time.monotonic() < deadline:
        done, status = _os.waitpid(pid, _os.WNOHANG)
        if done:
            print("child exit", _os.waitstatus_to_exitcode(status))
            return
        _time.sleep(0.05)
    _os.kill(pid, 9)
    _os.waitpid(pid, 0)
    print("child hung")
"""
