"""What every target shares: coverage of our own Python code (never of numba kernels), the
libFuzzer entry point, and the writer of seed inputs."""

from __future__ import annotations

import gc
import os
import random
import types
from collections.abc import Callable

import atheris
import numba.core.registry

OURS = ("otap_model", "adaptive_arrow", "quiver_store")


def instrument_our_code() -> int:
    """Instrument every loaded function of our packages except the Python source of numba
    kernels: numba cannot type atheris' tracing calls when it compiles a kernel for a new
    signature. Call it once everything the target uses is imported."""
    kernels = {id(o.py_func) for o in gc.get_objects() if isinstance(o, numba.core.registry.CPUDispatcher)}
    count = 0
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and id(obj) not in kernels and (obj.__module__ or "").startswith(OURS):
            atheris.instrument_func(obj)
            count += 1
    return count


def fuzz(one) -> None:  # type: ignore[no-untyped-def]
    """Instrument, then hand the command line (corpus directories, libFuzzer flags) to libFuzzer."""
    import sys

    instrument_our_code()
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


class Seeds:
    """Writes seed inputs into a corpus directory as seed0, seed1, ..."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.count = 0

    def put(self, data: bytes) -> None:
        with open(os.path.join(self.directory, f"seed{self.count}"), "wb") as f:
            f.write(data)
        self.count += 1


def seed_each_kind(directory: str, kinds: int, first_kind: Callable[[bytes], int], length: int) -> None:
    """Seeds for a recipe target: for each kind of edit, random bytes whose first edit is of that
    kind (as the target's `first_kind` reads an input)."""
    put = Seeds(directory).put
    rng = random.Random(0)
    for kind in range(kinds):
        while first_kind(data := rng.randbytes(length)) != kind:
            pass
        put(data)
