"""pytest's setup for the Python package's tests: the source tree's package (python/, over
build/'s library), and a scheme shared by the tests."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))


@pytest.fixture(scope="session")
def scheme():
    """Two shells of 30 directions spread by a Fibonacci lattice, and 3 b = 0: (bvals, bvecs
    as (3, M)), the directions unit vectors in FSL's frame."""
    n = 30
    k = np.arange(n) + 0.5
    z = 1 - k / n  # one hemisphere: antipodal directions are the same measurement
    r = np.sqrt(1 - z * z)
    phi = np.pi * (1 + 5 ** 0.5) * k
    g = np.stack([r * np.cos(phi), r * np.sin(phi), z])
    bvals = np.concatenate([np.zeros(3), np.full(n, 1000.0), np.full(n, 2500.0)])
    bvecs = np.concatenate([np.tile([[1.0], [0.0], [0.0]], 3), g, g], axis=1)
    return bvals, bvecs
