"""Shared by the Python package's tests: where the build is, and the
command-line tools the tests compare with."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ACCRUE_BUILD_DIR", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(BUILD, "python_packages"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "models"))
SPIRALS = os.path.join(ROOT, "examples", "spirals")


def tool(name):
    return os.path.join(BUILD, "bin", name)


def run(*cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def spirals():
    import numpy as np
    return dict(np.load(os.path.join(SPIRALS, "data.npz")))
