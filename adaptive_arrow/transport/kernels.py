"""numba loops for the id encodings: one fused, branchy pass each, writing into arrays the caller
allocated with numpy (numba's own allocations page-fault; numpy's do not).

Arithmetic wraps at the width of ``out`` (u16 or u32), so decoding ``encode(x)`` gives ``x`` back
even when a delta is negative. ``valid`` is a bool mask, or an empty array when every slot is valid.
``eq[i]`` says row ``i`` equals row ``i - 1`` on the table's quasi-delta columns (``eq[0]`` is False).

Compilation is cached on disk when numba finds a writable cache directory; when none is writable
(read-only package directory and home, ``NUMBA_CACHE_DIR`` unwritable) numba refuses ``cache=True``
at decoration time, so the kernels are compiled per process instead and ``CACHED`` is False.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np


def _compile(fn: Callable[..., Any]) -> tuple[Any, bool]:
    try:
        return numba.njit(cache=True, nogil=True)(fn), True
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(cache=False, nogil=True)(fn), False


def _delta_encode(values: np.ndarray, valid: np.ndarray, out: np.ndarray) -> None:
    check = valid.size != 0
    prev = 0
    for i in range(values.size):
        if check and not valid[i]:
            out[i] = 0
            continue
        v = values[i]
        out[i] = v - prev
        prev = v


def _delta_decode(values: np.ndarray, valid: np.ndarray, out: np.ndarray) -> None:
    check = valid.size != 0
    acc = 0
    for i in range(values.size):
        if check and not valid[i]:
            out[i] = 0
            continue
        acc += values[i]
        out[i] = acc


def _quasi_delta_encode(values: np.ndarray, eq: np.ndarray, out: np.ndarray) -> None:
    prev = 0
    for i in range(values.size):
        v = values[i]
        out[i] = v - prev if eq[i] else v
        prev = v


def _quasi_delta_decode(values: np.ndarray, eq: np.ndarray, out: np.ndarray) -> None:
    prev = 0
    for i in range(values.size):
        v = values[i] + prev if eq[i] else values[i]
        out[i] = v
        prev = out[i]


delta_encode, _c1 = _compile(_delta_encode)
delta_decode, _c2 = _compile(_delta_decode)
quasi_delta_encode, _c3 = _compile(_quasi_delta_encode)
quasi_delta_decode, _c4 = _compile(_quasi_delta_decode)

CACHED: bool = _c1 and _c2 and _c3 and _c4
"""True when the compiled kernels are cached on disk (False: compiled in every process)."""

NO_NULLS = np.empty(0, dtype=np.bool_)
"""The ``valid`` argument meaning "every slot is valid"."""
