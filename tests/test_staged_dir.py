"""StagedDir.publish is all or nothing: a move that fails (EIO, ENOSPC, EACCES on one file) leaves
the output directory byte for byte as it was; when putting it back fails too, nothing is deleted and
the error says where every file is. Faults are injected into os.replace, at every call in turn."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quiver_store.staged_dir import StagedDir

EARLIER = [f"r-{i:06d}.pb" for i in range(5)]  # an earlier run's files, all replaced (--overwrite)
NEW = [f"r-{i:06d}.pb" for i in range(3)]  # this run's: three take the earlier names, two earlier ones go
EIO = OSError(errno.EIO, "Input/output error")


def contents(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (relative path -> bytes), directories as b'<dir>'."""
    return {str(p.relative_to(directory)): b"<dir>" if p.is_dir() else p.read_bytes() for p in sorted(directory.rglob("*"))}


def earlier_run(out: Path, earlier: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in earlier:
        (out / name).write_bytes(f"earlier {name}".encode())
    (out / "notes.txt").write_bytes(b"the user's")


def staged(out: Path, earlier: list[str], new: list[str]) -> StagedDir:
    staging = StagedDir.create(out, [out / n for n in earlier])
    for name in new:
        staging.write(name, f"new {name}".encode())
    return staging


@contextlib.contextmanager
def failing_replace(fails: Callable[[int], bool]) -> Iterator[list[tuple[str, str]]]:
    """os.replace raising EIO at the calls (numbered from 1) for which `fails` is true; yields the
    calls made."""
    replace, calls = os.replace, []

    def patched(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append((str(src), str(dst)))
        if fails(len(calls)):
            raise OSError(errno.EIO, "Input/output error", str(src), None, str(dst))
        replace(src, dst)

    with mock.patch.object(os, "replace", patched):
        yield calls


def test_a_publish_moves_the_earlier_files_aside_then_the_new_ones_in(tmp_path: Path) -> None:
    """What the fault tests number: 5 moves aside, 3 moves in; then the earlier files are deleted."""
    out = tmp_path / "out"
    earlier_run(out, EARLIER)
    staging = staged(out, EARLIER, NEW)
    with failing_replace(lambda _: False) as calls:
        staging.publish()
    assert [(Path(a).parent.name, Path(b).parent.name) for a, b in calls] == [("out", ".earlier")] * 5 + [(staging.path.name, "out")] * 3
    staging.discard()
    assert contents(out) == {"notes.txt": b"the user's", **{n: f"new {n}".encode() for n in NEW}}


@pytest.mark.parametrize(("existing", "k"), [(True, k) for k in range(1, 9)] + [(False, k) for k in range(1, 4)])
def test_a_move_failing_at_any_point_leaves_out_byte_for_byte_as_it_was(tmp_path: Path, k: int, existing: bool) -> None:
    """Was: the new files moved before the failure stayed in --out over the earlier run's, and
    discard() deleted the rest of them with the staging directory."""
    out = tmp_path / "a" / "out"
    if existing:
        earlier_run(out, EARLIER)
    before = contents(tmp_path)
    staging = staged(out, EARLIER if existing else [], NEW)
    with failing_replace(lambda n: n == k), pytest.raises(OSError) as raised:
        staging.publish()
    staging.discard()
    assert contents(tmp_path) == before
    exc = raised.value
    assert not exc.published and exc.state("--out") == "--out is left as it was"  # type: ignore[attr-defined]
    aside = len(EARLIER) if existing else 0
    assert exc.failure == (f"{EARLIER[k - 1]} (moving the earlier file aside): Input/output error" if k <= aside  # type: ignore[attr-defined]
                           else f"{NEW[k - aside - 1]}: Input/output error")


@pytest.mark.parametrize("k", range(1, 9))
def test_a_ctrl_c_between_two_moves_leaves_out_as_it_was(tmp_path: Path, k: int) -> None:
    out = tmp_path / "out"
    earlier_run(out, EARLIER)
    before = contents(out)
    staging = staged(out, EARLIER, NEW)
    replace, calls = os.replace, []

    def interrupted(src: str, dst: str) -> None:
        calls.append(src)
        if len(calls) == k:
            raise KeyboardInterrupt
        replace(src, dst)

    with mock.patch.object(os, "replace", interrupted), pytest.raises(KeyboardInterrupt):
        staging.publish()
    staging.discard()
    assert contents(out) == before


@pytest.mark.parametrize("k", range(2, 9))
def test_when_putting_out_back_fails_too_nothing_is_lost_and_the_message_says_where_it_is(tmp_path: Path, k: int) -> None:
    """A file system that fails every move from the k-th on (EIO, then read-only): the rollback
    cannot move anything either. Every earlier and every new file is still somewhere the message
    names, and discard() keeps the staging directory that holds them."""
    out = tmp_path / "out"
    earlier_run(out, EARLIER)
    staging = staged(out, EARLIER, NEW)
    with failing_replace(lambda n: n >= k), pytest.raises(OSError) as raised:
        staging.publish()
    staging.discard()
    exc = raised.value
    in_out = min(max(k - 1 - len(EARLIER), 0), len(NEW))  # new files moved in before the failure
    aside = min(k - 1, len(EARLIER))  # earlier files moved aside before it
    assert exc.new_in_out == NEW[:in_out] and exc.earlier_kept == EARLIER[:aside]  # type: ignore[attr-defined]
    assert exc.staged_left == NEW[in_out:]  # type: ignore[attr-defined]
    held = contents(out)
    assert held == {
        "notes.txt": b"the user's",
        **{n: f"earlier {n}".encode() for n in EARLIER[aside:]},
        **{n: f"new {n}".encode() for n in NEW[:in_out]},
        staging.path.name: b"<dir>",
        f"{staging.path.name}/.earlier": b"<dir>",
        **{f"{staging.path.name}/.earlier/{n}": f"earlier {n}".encode() for n in EARLIER[:aside]},
        **{f"{staging.path.name}/{n}": f"new {n}".encode() for n in NEW[in_out:]},
    }
    state = exc.state("--out")  # type: ignore[attr-defined]
    failed = NEW[in_out - 1] if in_out else EARLIER[0]  # the rollback's first move: the last new file in, else the first aside
    parts = [f"putting --out back failed too ({failed}: Input/output error), so nothing was deleted: "]
    if in_out:
        parts.append("--out holds this run's " + ", ".join(NEW[:in_out]) + (f" ({in_out} files)" if in_out > 1 else "") + "; ")
    if in_out < len(NEW):
        left = NEW[in_out:]
        parts.append(f"{staging.path} holds this run's " + (f"{left[0]} .. {left[-1]}" if len(left) > 2 else ", ".join(left))
                     + (f" ({len(left)} files)" if len(left) > 1 else "") + "; ")
    kept = EARLIER[:aside]
    parts.append(f"{staging.path}/.earlier holds --out's earlier " + (f"{kept[0]} .. {kept[-1]}" if len(kept) > 2 else ", ".join(kept))
                 + (f" ({len(kept)} files)" if len(kept) > 1 else "") + f"; move them back into place by hand, then delete {staging.path}")
    assert state == "".join(parts)


def test_a_clean_up_that_fails_after_every_file_is_in_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    earlier_run(out, EARLIER)
    staging = staged(out, EARLIER, NEW)
    with mock.patch.object(os, "unlink", side_effect=EIO), pytest.raises(OSError) as raised:
        staging.publish()
    staging.discard()
    exc = raised.value
    assert exc.published and staging.published  # type: ignore[attr-defined]
    assert exc.failure == f"{staging.path.name}/.earlier/{EARLIER[0]}: Input/output error"  # type: ignore[attr-defined]
    assert exc.state("--out") == f"delete {staging.path}, which holds the 5 earlier file(s) of --out they replaced"  # type: ignore[attr-defined]
    assert {n: (out / n).read_bytes() for n in NEW} == {n: f"new {n}".encode() for n in NEW}
    assert sorted(os.listdir(staging.path / ".earlier")) == EARLIER


@settings(max_examples=300, deadline=None)
@given(earlier=st.sets(st.integers(0, 5), max_size=4), new=st.sets(st.integers(0, 5), min_size=1, max_size=4),
       failing=st.sets(st.integers(1, 20), max_size=6))
def test_no_fault_pattern_loses_a_file_or_misstates_where_it_is(earlier: set[int], new: set[int], failing: set[int]) -> None:
    """Any set of failing os.replace calls, the rollback's included: success; or --out exactly as
    it was; or every file where the error's lists put it."""
    earlier_names, new_names = sorted(f"r-{i:06d}.pb" for i in earlier), sorted(f"r-{i:06d}.pb" for i in new)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        earlier_run(out, earlier_names)
        before = contents(out)
        staging = staged(out, earlier_names, new_names)
        with failing_replace(lambda n: n in failing):
            try:
                staging.publish()
            except OSError as exc:
                error: OSError | None = exc
            else:
                error = None
        staging.discard()
        new_bytes = {n: f"new {n}".encode() for n in new_names}
        if error is None:
            assert contents(out) == {"notes.txt": b"the user's", **new_bytes}
            return
        if error.rollback_failure is None:  # type: ignore[attr-defined]
            assert contents(out) == before
            assert error.state("--out") == "--out is left as it was"  # type: ignore[attr-defined]
            return
        stuck, kept, left = error.new_in_out, error.earlier_kept, error.staged_left  # type: ignore[attr-defined]
        assert sorted(stuck + left) == new_names and set(kept) <= set(earlier_names)
        held = {n: (out / n).read_bytes() for n in os.listdir(out) if not n.startswith(".")}
        assert held == {"notes.txt": b"the user's", **{n: f"earlier {n}".encode() for n in earlier_names if n not in kept},
                        **{n: new_bytes[n] for n in stuck}}
        assert contents(staging.path / ".earlier") == {n: f"earlier {n}".encode() for n in kept}
        assert {n: (staging.path / n).read_bytes() for n in left} == {n: new_bytes[n] for n in left}
        state = error.state("--out")  # type: ignore[attr-defined]
        assert state.startswith("putting --out back failed too (") and state.endswith(f"then delete {staging.path}")
        assert ("--out holds this run's " in state) == bool(stuck) and ("--out's earlier " in state) == bool(kept)
        assert (f"{staging.path} holds this run's " in state) == bool(left)
