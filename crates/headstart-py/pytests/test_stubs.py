"""The hand-written stubs match the package: `python -m mypy.stubtest headstart`."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.timeout(180)
def test_stubtest_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "headstart"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
