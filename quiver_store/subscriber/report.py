"""Read-only view of a store's subscribers for `quiver inspect` (never modifies a file)."""

from __future__ import annotations

import datetime as dt
import os

from rich.markup import escape
from rich.table import Table

from ..errors import QuiverError
from ..fs import DEFAULT_FS, FileSystem
from .registry import read_offline


def _when(ns: int) -> str:
    if not ns:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def subscriber_table(path: str, fs: FileSystem = DEFAULT_FS, *, on_disk: list[int] | None = None) -> Table:
    """Subscribers with their high-water mark, gap set, lag and drops, rebuilt from the ack log.

    The gap set is what is resolved (acked or dropped) past the mark, not what is missing: its
    columns say so, and list a segment resolved whole as `seq:*`. `on_disk` (segment sequence
    numbers present) restricts lag to segments that still exist.
    """
    table = Table(title=f"subscribers of {escape(path)}")
    for col in (
        "subscriber",
        "mark",
        "resolved > mark",
        "seg:bundle (first 8)",
        "lag bundles",
        "lag segments",
        "dropped",
        "state",
        "last seen",
    ):
        table.add_column(
            col,
            justify="right"
            if col in ("mark", "resolved > mark", "lag bundles", "lag segments", "dropped")
            else "left",
        )
    try:
        state = read_offline(path, fs=fs)
    except QuiverError as exc:
        table.caption = f"[red]ack log unreadable: {exc}"
        return table
    catalog = state.catalog
    if on_disk is not None:
        for seq in [s for s in catalog if s not in set(on_disk)]:
            catalog.remove(seq)
    for sub in sorted(state.subscribers.values(), key=lambda s: s.name):
        sub.complete_known(catalog)
        lag_b, lag_s = sub.lag(catalog)
        ahead = sorted([(s, i, str(i)) for s, i in sub.gap_keys()] + [(s, -1, "*") for s in sub.done])
        resolved = sub.gap_set_size() + sum(catalog.count(s) or 0 for s in sub.done)
        shown = ", ".join(f"{s}:{i}" for s, _, i in ahead[:8]) + (" ..." if len(ahead) > 8 else "")
        table.add_row(
            escape(sub.name),
            str(sub.mark),
            str(resolved),
            shown or "-",
            str(lag_b),
            str(lag_s),
            str(sub.dropped_total),
            "orphaned" if sub.orphaned else "active",
            _when(sub.last_seen_ns),
        )
    files = sorted(n for n in fs.listdir(path) if n.startswith("ack.")) if fs.exists(path) else []
    size = sum(fs.file_size(os.path.join(path, n)) for n in files)
    table.caption = (
        f"ack log: {', '.join(files) or 'none'} ({size} bytes, {state.records} records after the checkpoint)"
    )
    return table
