"""Misuse of the store's Python API fails at once with ConfigError naming the key (or argument) and
the value: non-finite durations, fractional sizes and counts, inconsistent backoff pairs, a bad
subscription timeout, a store path that is no path. An empty bundle is refused with what to do."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from quiver_store import (
    ConfigError,
    NotAStoreError,
    QuiverError,
    QuiverStore,
    RecordBundle,
    RetentionConfig,
    SegmentConfig,
    StoreConfig,
    SubscriberConfig,
    WalConfig,
    core_path,
    open_cores,
)

QUIET = StoreConfig(wal=WalConfig(durability="none"))

# Every size or count field, with the config class that holds it.
INTEGER_FIELDS = [
    (SegmentConfig, "target_size", "segment"),
    (SegmentConfig, "max_stream_count", "segment"),
    (SegmentConfig, "max_dictionary_size", "segment"),
    (WalConfig, "max_size", "wal"),
    (WalConfig, "max_chunks", "wal"),
    (WalConfig, "rotation_size", "wal"),
    (RetentionConfig, "size_cap", "retention"),
    (RetentionConfig, "steady_state_headroom", "retention"),
    (SubscriberConfig, "ack_log_checkpoint_interval", "subscribers"),
    (SubscriberConfig, "ack_log_rotation_size", "subscribers"),
    (StoreConfig, "cores", None),
]
# Every duration (or factor), which may be fractional but must be finite.
FLOAT_FIELDS = [
    (SegmentConfig, "max_open_duration", "segment"),
    (WalConfig, "flush_interval", "wal"),
    (RetentionConfig, "max_age", "retention"),
    (RetentionConfig, "backpressure_timeout", "retention"),
    (RetentionConfig, "maintenance_interval", "retention"),
    (SubscriberConfig, "nack_backoff_initial", "subscribers"),
    (SubscriberConfig, "nack_backoff_max", "subscribers"),
    (SubscriberConfig, "nack_backoff_multiplier", "subscribers"),
    (SubscriberConfig, "orphan_timeout", "subscribers"),
]


def _key(section: str | None, name: str) -> str:
    return name if section is None else f"{section}.{name}"


@pytest.mark.parametrize(("kind", "name", "section"), INTEGER_FIELDS)
@pytest.mark.parametrize("value", [2.5, 64e6, True, math.nan])
def test_sizes_and_counts_must_be_whole_numbers(kind: type, name: str, section: str | None, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        kind(**{name: value})
    message = str(caught.value)
    assert message.startswith(f"{_key(section, name)} must be ")
    assert message.endswith(f"got {value!r}")
    expected = "a number" if isinstance(value, bool) else "a whole number (an int)"
    assert f"must be {expected}" in message


@pytest.mark.parametrize(("kind", "name", "section"), FLOAT_FIELDS)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_durations_must_be_finite(kind: type, name: str, section: str | None, value: float) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(_key(section, name))} must be a finite number.*, got {value!r}$"):
        kind(**{name: value})


def test_an_unset_limit_is_none_not_infinity() -> None:
    with pytest.raises(ConfigError, match=r"^retention\.max_age must be a finite number \(None means no limit\), got inf$"):
        RetentionConfig(max_age=math.inf)
    assert RetentionConfig(max_age=None, size_cap=None).max_age is None
    assert SegmentConfig(max_open_duration=2, target_size=1 << 20).max_open_duration == 2  # an int duration is fine


@pytest.mark.parametrize(("kind", "name", "section"), INTEGER_FIELDS)
def test_numpy_integers_are_stored_as_ints(kind: type, name: str, section: str | None) -> None:
    default = getattr(kind(), name) or 3  # the default passes the cross-field checks (None: no limit)
    config = kind(**{name: np.int64(default)})
    assert getattr(config, name) == default and type(getattr(config, name)) is int
    with pytest.raises(ConfigError, match=rf"^{re.escape(_key(section, name))} must be a whole number \(an int\), got np\.float64\(2\.5\)$"):
        kind(**{name: np.float64(2.5)})


@pytest.mark.parametrize(("kind", "name", "section"), FLOAT_FIELDS)
def test_numpy_durations_are_stored_as_floats(kind: type, name: str, section: str | None) -> None:
    config = kind(**{name: np.float32(2.5)})
    assert getattr(config, name) == 2.5 and type(getattr(config, name)) is float
    with pytest.raises(ConfigError, match=rf"^{re.escape(_key(section, name))} must be a finite number.*, got nan$"):
        kind(**{name: np.float64("nan")})


def test_numpy_byte_counts_of_the_wal_are_stored_as_ints() -> None:
    wal = WalConfig(preallocate=np.uint32(0), direct_bundle_size=np.int64(4096))
    assert (wal.preallocate, wal.direct_bundle_size) == (0, 4096)
    assert type(wal.preallocate) is int and type(wal.direct_bundle_size) is int
    with pytest.raises(ConfigError, match=r"^wal\.preallocate must be a whole number of bytes >= 0 .*, got np\.int64\(-1\)$"):
        WalConfig(preallocate=np.int64(-1))


def test_backoff_pairs_must_be_consistent() -> None:
    with pytest.raises(ConfigError, match=r"^subscribers\.nack_backoff_multiplier must be >= 1 .*, got 0\.5$"):
        SubscriberConfig(nack_backoff_multiplier=0.5)
    with pytest.raises(
        ConfigError,
        match=r"^subscribers\.nack_backoff_max \(0\.01\) must not be below subscribers\.nack_backoff_initial \(1\)$",
    ):
        SubscriberConfig(nack_backoff_initial=1, nack_backoff_max=0.01)
    same = SubscriberConfig(nack_backoff_initial=0.5, nack_backoff_max=0.5, nack_backoff_multiplier=1)
    assert (same.nack_backoff_initial, same.nack_backoff_max, same.nack_backoff_multiplier) == (0.5, 0.5, 1)


@pytest.fixture
def subscription(tmp_path: Path):  # type: ignore[no-untyped-def]
    with QuiverStore.open(tmp_path / "store", QUIET) as store:
        yield store.subscribe("a")


@pytest.mark.parametrize("timeout", [math.nan, "1", b"1", True, -1, -0.5, [1]])
def test_a_bad_subscription_timeout_is_refused_before_waiting(subscription, timeout: object) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as caught:
        subscription.next(timeout=timeout)
    assert str(caught.value) == f"timeout must be None or a number of seconds >= 0, got {timeout!r}"


def test_good_timeouts_still_wait_and_return(tmp_path: Path) -> None:
    with QuiverStore.open(tmp_path / "store", QUIET) as store:
        sub = store.subscribe("a")
        assert sub.next(timeout=0) is None
        assert sub.next(timeout=0.01) is None
        store.ingest(RecordBundle({0: pa.record_batch({"x": pa.array([1, 2])})}))
        store.flush()
        for timeout in (math.inf, 10**400, 5):  # beyond the longest condition wait: waits like None
            delivery = sub.next(timeout=timeout)
            assert delivery is not None and delivery.bundle.slots[0].column(0).to_pylist() == [1, 2]
            delivery.defer()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (None, "store path must be a str, bytes or os.PathLike naming a directory, got NoneType None"),
        (123, "store path must be a str, bytes or os.PathLike naming a directory, got int 123"),
        ("", "store path is empty: pass the store's directory (QuiverStore.open creates it when missing)"),
        (b"", "store path is empty: pass the store's directory (QuiverStore.open creates it when missing)"),
        ("a\0b", "store path 'a\\x00b' contains a NUL character"),
    ],
)
def test_open_refuses_what_is_not_a_path(path: object, message: str) -> None:
    with pytest.raises(NotAStoreError) as caught:
        QuiverStore.open(path)  # type: ignore[arg-type]
    assert isinstance(caught.value, ConfigError)
    assert str(caught.value) == message


@pytest.mark.parametrize("spell", [str, Path, lambda p: str(p).encode()])
def test_open_takes_str_pathlike_and_bytes_paths(tmp_path: Path, spell) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "store"
    with QuiverStore.open(spell(target), QUIET) as store:
        assert store.path == str(target)
        store.ingest(RecordBundle({0: pa.record_batch({"x": pa.array([7])})}))
    with QuiverStore.open(target, QUIET) as store:
        assert [b.slots[0].column(0).to_pylist() for _, _, b in store.bundles()] == [[7]]


def test_open_refuses_a_config_or_layout_of_the_wrong_type(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config must be a StoreConfig, got dict$"):
        QuiverStore.open(tmp_path / "a", {"wal": {}})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^layout must be a quiver_store\.Layout, got str$"):
        QuiverStore.open(tmp_path / "b", layout="otap")  # type: ignore[arg-type]


def test_a_bundle_without_slots_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    with QuiverStore.open(tmp_path / "store", QUIET) as store:
        with pytest.raises(QuiverError) as caught:
            store.ingest(RecordBundle({}))
        assert str(caught.value).startswith("cannot ingest a bundle without any slot: it holds no data to store. Skip empty input")
        assert "an OTLP request without records" in str(caught.value)
        assert store.ingest(RecordBundle({0: pa.record_batch({"x": pa.array([1])})})).sequence >= 0  # the store goes on


@pytest.mark.parametrize("root", [None, 123, ""])
def test_open_cores_and_core_path_refuse_a_root_that_is_not_a_path(root) -> None:
    with pytest.raises(NotAStoreError, match=r"^store path "):
        open_cores(root, 2)
    with pytest.raises(NotAStoreError, match=r"^store path "):
        core_path(root, 0)


@pytest.mark.parametrize("core", [-1, 1.5, True, "0"])
def test_core_path_refuses_a_core_that_is_not_a_core_number(tmp_path, core) -> None:
    with pytest.raises(ConfigError, match=rf"^core must be an int >= 0, got {re.escape(repr(core))}$"):
        core_path(str(tmp_path), core)


def _values(store: QuiverStore) -> list[int]:
    return [b.slots[0].column(0)[0].as_py() for _, _, b in store.bundles()]


def _one(value: int) -> RecordBundle:
    return RecordBundle({0: pa.record_batch({"v": pa.array([value], pa.int64())})})


@pytest.mark.parametrize("reason", [5, "", None, b"flush"])
def test_finalize_now_refuses_a_reason_that_is_not_a_non_empty_str(tmp_path: Path, reason: object) -> None:
    """A non-str reason once killed the applier inside the seal, after it had let go of the open
    segment: the call hung and the acknowledged bundles were gone after a reopen."""
    with QuiverStore.open(tmp_path) as store:
        for value in (1, 2, 3):
            store.ingest(_one(value))
        with pytest.raises(ConfigError, match=rf"finalize_now\(reason=\.\.\.\): the reason must be a non-empty str, got {re.escape(repr(reason))}"):
            store.finalize_now(reason)  # type: ignore[arg-type]
        store.ingest(_one(4))
        assert store.finalize_now("requested") is not None
        assert _values(store) == [1, 2, 3, 4]


def test_a_seal_that_fails_loses_nothing_acknowledged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any error while sealing fails the waiting finalize_now instead of hanging it, and stops the
    store placing bundles (fail-stop), so no later segment's WAL truncation passes the open
    segment's entries; a reopen replays every acknowledged bundle."""
    store = QuiverStore.open(tmp_path)
    for value in (1, 2, 3):
        store.ingest(_one(value))

    def broken() -> None:
        raise RuntimeError("injected seal failure")

    monkeypatch.setattr(store, "_wait_for_room", broken)
    with pytest.raises(QuiverError, match=r"sealing the open segment \('requested'\) failed: RuntimeError\('injected seal failure'\)"):
        store.finalize_now()
    monkeypatch.undo()
    with pytest.raises(QuiverError, match=r"stopped accepting bundles: placing logged bundles into segments failed "
                       r"\(RuntimeError\('injected seal failure'\)\); every bundle it acknowledged is kept in the WAL"):
        store.ingest(_one(4))
    store.close()
    with QuiverStore.open(tmp_path) as reopened:
        reopened.ingest(_one(4))
        reopened.flush()
        assert _values(reopened) == [1, 2, 3, 4]
