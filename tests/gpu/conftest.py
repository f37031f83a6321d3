"""The GPU tests: CUDA tensors, nn on CUDA, DLPack and the tinyflow sessions on the device.

They run with CuPy when it is importable and sees a device, else with numpy standing in for
CuPy (the same backend code, run on the host), and say which in pytest's header, in the
terminal summary and in the reason of any test that needs the real device.
LUABRIDGE_GPU_TESTS=cupy makes a missing CuPy or device an error instead (bench/device_check.sh).
"""
from __future__ import annotations

from typing import Any

import pytest

from gpu_mode import MODE, XP
from luabridge.providers.torch_cuda import arrays as cuda


def pytest_report_header(config: Any) -> str:
    return f"tests/gpu: {MODE}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"tests/gpu ran with {MODE}")


@pytest.fixture(autouse=True)
def device(lua: Any) -> Any:
    """Every test here runs with XP behind CUDA tensors; the module is restored after."""
    cuda.use_array_module(XP)
    yield XP
    cuda.use_array_module(None)
