"""tests/processes.py, the suite's guard against leaked child processes: running_children sees a
child that runs and no longer one that ended; spawn kills what a test started, its children too,
pass or fail; a test or a session that leaves a child running fails, and the child is killed."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from processes import run_in_own_group, running_children

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds child processes in Linux's /proc")

HERE = Path(__file__).resolve().parent
DEADLINE = 120   # seconds: only a broken check waits that long


def runs(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (an unreaped zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


def wait_until(condition, what: str, seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


def test_running_children_sees_a_child_until_it_ends():
    before = running_children()
    proc = subprocess.Popen(["sleep", "600"])
    try:
        new = [c for c in running_children() if c not in before]
        assert [(c.pid, c.command) for c in new] == [(proc.pid, "sleep 600")]
    finally:
        proc.kill()
    proc.wait()
    assert running_children() == before


def test_spawn_kills_the_process_group(spawn):
    """A shell that started a background job: both end with the fixture's teardown (here called
    inside the test, as pytest calls it after)."""
    shell = spawn(["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    job = int(shell.stdout.readline())
    assert runs(shell.pid) and runs(job)
    spawn.end()
    assert shell.returncode == -9
    wait_until(lambda: not runs(job), "the shell's job killed")


def test_run_in_own_group_ends_what_the_command_left(tmp_path):
    """A shell's background job ends with the shell's run, and with a run that timed out."""
    done = run_in_own_group(["sh", "-c", "sleep 600 > /dev/null 2>&1 & echo $!"], timeout=DEADLINE)
    left = int(done.stdout)
    assert done.returncode == 0
    wait_until(lambda: not runs(left), "the background job killed")
    job = tmp_path / "job"
    with pytest.raises(subprocess.TimeoutExpired):
        run_in_own_group(["sh", "-c", f"sleep 600 > /dev/null 2>&1 & echo $! > {job}; wait"], timeout=2)
    wait_until(lambda: not runs(int(job.read_text())), "the timed-out run's job killed")


LEAKY_TESTS = """
import subprocess
from pathlib import Path

import pytest

PIDS = Path({pids!r})


def note(pid):
    with PIDS.open("a") as f:
        f.write(f"{{pid}}\\n")


@pytest.fixture(scope="session")
def cluster():
    note(subprocess.Popen(["sleep", "600"]).pid)   # never stopped
    yield


def test_uses_the_cluster(cluster):
    pass


def test_leaks_a_child():
    note(subprocess.Popen(["sleep", "600"]).pid)


def test_spawned_failing(spawn):
    shell = spawn(["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    note(shell.pid)
    note(int(shell.stdout.readline()))
    assert False, "fails with its processes running"


def test_clean():
    subprocess.run(["true"], check=True)
"""


def test_a_leaked_child_fails_the_test_and_the_session(tmp_path):
    """A pytest run with this plugin: the test that leaked fails in its teardown, the session
    fixture's leftover fails the session, and every process those tests started is gone."""
    pids = tmp_path / "pids"
    (tmp_path / "test_leaky.py").write_text(LEAKY_TESTS.format(pids=str(pids)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "processes", "-p", "no:cacheprovider", "-q",
                          "-o", "addopts=", "test_leaky.py"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=DEADLINE)
    out = run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, out
    assert "ERROR test_leaky.py::test_leaks_a_child" in out
    assert "the test left child processes running" in out
    assert "FAILED test_leaky.py::test_spawned_failing" in out
    assert "the test session left child processes running (killed now):" in out
    assert "1 failed, 3 passed, 1 error" in out
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 4
    wait_until(lambda: not any(map(runs, started)), "every process the tests started killed")
