"""The id kernels and the multi-key sort, checked against plain-Python references."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adaptive_arrow.transport import TransportError, kernels
from adaptive_arrow.transport.delta import delta_decode, quasi_delta_decode
from adaptive_arrow.transport.ids import renumber_delta
from adaptive_arrow.transport.sort import sort_indices

ids_u16 = st.lists(st.one_of(st.none(), st.integers(0, 2**16 - 1)), max_size=60)


@settings(max_examples=100, deadline=None)
@given(ids_u16, st.sampled_from([pa.uint16(), pa.uint32()]))
def test_renumbered_delta_ids_keep_nulls_wrap_and_decode(values: list[int | None], type_: pa.DataType) -> None:
    ids = pa.array(values, type_)
    encoded, mapping = renumber_delta(ids, "T.id")
    assert encoded.is_null().equals(ids.is_null())
    seen: dict[int, int] = {}
    dense = [None if v is None else seen.setdefault(v, len(seen)) for v in values]
    assert delta_decode(encoded).to_pylist() == dense  # dense ids in order of first appearance
    assert all(int(mapping.lut[old]) == new for old, new in seen.items())
    # the running value skips nulls: each valid slot stores the step from the previous valid one
    present = [v for v in dense if v is not None]
    steps = [(b - a) % 2 ** type_.bit_width for a, b in zip([0, *present], present)]
    assert [v for v in encoded.to_pylist() if v is not None] == steps


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.booleans()), max_size=60), st.randoms())
def test_quasi_delta_of_permuted_values_round_trips(rows: list[tuple[int, bool]], rng: random.Random) -> None:
    values = np.array([v for v, _ in rows], dtype=np.uint32)
    perm = np.arange(len(rows), dtype=np.intp)
    rng.shuffle(perm)
    eq = np.array([e for _, e in rows], dtype=np.bool_)
    if eq.size:
        eq[0] = False
    ordered = values[perm]
    for rows_arg in (kernels.IDENTITY, perm):
        source = values if rows_arg is perm else ordered
        out = np.empty_like(values)
        kernels.quasi_delta_perm(source, rows_arg, eq, out)
        for i in range(len(rows)):
            expected = (int(ordered[i]) - int(ordered[i - 1])) % 2**32 if eq[i] else int(ordered[i])
            assert int(out[i]) == expected
        assert quasi_delta_decode(pa.array(out, pa.uint32()), eq).to_pylist() == ordered.tolist()
        kernels.delta_perm(source, rows_arg, out)
        assert delta_decode(pa.array(out, pa.uint32())).to_pylist() == ordered.tolist()


def test_kernels_work_without_any_writable_cache_directory(tmp_path: Path) -> None:
    """With NUMBA_CACHE_DIR read-only (and home and the module's own __pycache__ unusable), numba
    refuses cache=True at decoration; the module must still import, compile and compute."""
    package = tmp_path / "pkg"
    package.mkdir()
    shutil.copy(kernels.__file__, package / "kernels.py")
    (package / "__pycache__").write_text("a file, so no cache directory can be made here")
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    (read_only / "blocked").write_text("")
    read_only.chmod(0o555)
    # root ignores permission bits: point below a regular file, which no user can mkdir into
    cache_dir = read_only / "blocked" / "numba" if os.geteuid() == 0 else read_only / "numba"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "HOME": str(cache_dir),
           "XDG_CACHE_HOME": str(cache_dir), "PYTHONDONTWRITEBYTECODE": "1"}
    script = (
        "import importlib.util, numpy as np\n"
        f"spec = importlib.util.spec_from_file_location('kernels_copy', {str(package / 'kernels.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "out = np.empty(4, np.uint16)\n"
        "m.delta_perm(np.array([3, 5, 5, 2], np.uint16), m.IDENTITY, out)\n"
        "print(m.CACHED, out.tolist())\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    finally:
        read_only.chmod(0o755)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "False [3, 2, 0, 65533]"
    assert not cache_dir.exists()


def test_kernels_cache_when_a_directory_is_writable(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    script = "from adaptive_arrow.transport import kernels; print(kernels.CACHED)"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


# ---------------------------------------------------------------------------------------------
# Multi-key sort

_string = st.one_of(st.none(), st.sampled_from(["", "a", "b", "ab", "é", "zz"]))
_int = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
_float = st.one_of(st.none(), st.floats(allow_nan=False).map(lambda f: f + 0.0))  # -0.0 -> 0.0
_rows = st.lists(
    st.tuples(_string, st.one_of(st.none(), st.binary(max_size=3)), st.one_of(st.none(), st.binary(min_size=2, max_size=2)),
              _int, st.integers(0, 255), st.one_of(st.none(), st.booleans()), _float,
              st.one_of(st.none(), st.integers(0, 10**18))),
    max_size=40,
)
_COLUMNS = [("s", pa.string()), ("b", pa.binary()), ("f", pa.binary(2)), ("i", pa.int64()),
            ("u", pa.uint8()), ("o", pa.bool_()), ("d", pa.float64()), ("t", pa.timestamp("ns"))]


@settings(max_examples=150, deadline=None)
@given(_rows, st.lists(st.sampled_from(["s", "b", "f", "i", "u", "o", "d", "t", "sd"]), min_size=1, max_size=4))
def test_sort_is_stable_with_nulls_last_on_every_column_type(rows: list[tuple], keys: list[str]) -> None:
    columns = {name: pa.array([r[i] for r in rows], type_) for i, (name, type_) in enumerate(_COLUMNS)}
    columns["sd"] = columns["s"].dictionary_encode()
    batch = pa.RecordBatch.from_pydict(columns)
    order = sort_indices(batch, keys, "T")
    got = list(range(len(rows))) if order is None else order.tolist()
    py = {name: columns[name].to_pylist() for name in columns if name != "t"}
    py["t"] = [r[7] for r in rows]  # nanosecond timestamps as their integer values

    def key(i: int) -> tuple:
        return tuple((py[k][i] is None, py[k][i] if py[k][i] is not None else 0) for k in keys)

    assert got == sorted(range(len(rows)), key=key)  # Python's sort is stable


def test_sort_of_sorted_rows_is_none_and_nan_sorts_after_numbers() -> None:
    batch = pa.RecordBatch.from_pydict({"d": pa.array([float("nan"), None, 1.0, float("-inf")])})
    assert sort_indices(batch, ["d"], "T").tolist() == [3, 2, 0, 1]
    assert sort_indices(batch.take([3, 2, 0, 1]), ["d"], "T") is None


def test_sort_by_an_unsortable_column_is_reported() -> None:
    batch = pa.RecordBatch.from_pydict({"l": pa.array([[1], [2]])})
    with pytest.raises(TransportError, match=r"T\.l: cannot sort by a column of type list<item: int64>"):
        sort_indices(batch, ["l"], "T")
