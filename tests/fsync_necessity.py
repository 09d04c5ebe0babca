"""Which fsyncs carry a durability promise: the power-loss sweep of tests/test_power_loss.py run
once per sync call site of the store, with that site's syncs making nothing durable. A site whose
removal the sweep notices is needed; the others are listed with the sweep's verdict so each can be
explained (docs/reliability.md) or removed.

Run:  .venv/bin/python -m tests.fsync_necessity [--seeds 2] [--direct]     (about 5 minutes)

`--direct` runs the workload where every third bundle skips the WAL for a segment of its own.
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import tempfile
from pathlib import Path

from quiver_store import StoreConfig

from .powerloss import PowerLossFS
from .test_power_loss import CONFIG, DIRECT, reopened, run_subscribed_workload


def sweep_fails(root: Path, skip_sync_site: str, seeds: int = 2, config: StoreConfig = CONFIG) -> str | None:
    """The first failure of the crash sweep with one sync call site left out, or None: every crash
    point with `seeds` random fates, and once with every unsynced file reordered (odd pages landed,
    even ones not: the state that needs a header synced before the first entry)."""
    for seed in range(seeds):
        counting = PowerLossFS(str(root / "count"))
        run_subscribed_workload(str(root / "count"), counting, config)
        shutil.rmtree(root / "count")  # the next count must start from an empty directory too
        for crash_at in range(counting.ops + 1):
            live = root / f"m-live-{crash_at}"
            try:
                failure = _reboots_fail(live, crash_at, seed, skip_sync_site, config)
            finally:
                shutil.rmtree(live, ignore_errors=True)  # a leftover would pass for a store that survived
            if failure:
                return f"crash at op {crash_at}: {failure}"
    return None


def _reboots_fail(live: Path, crash_at: int, seed: int, skip_sync_site: str, config: StoreConfig) -> str | None:
    """Run the workload into `live` until the crash; reboot its images (random fates, and reordered
    for the first seed) and say what the first one that breaks a promise got wrong."""
    fs = PowerLossFS(str(live), crash_at=crash_at, skip_sync_site=skip_sync_site)
    ingested, acked, attempted = run_subscribed_workload(str(live), fs, config)
    for reordered in (False, True) if seed == 0 else (False,):
        image = live.with_name(f"{live.name}-image-{reordered}")
        fs.durable_image(str(image), random.Random(seed * 1000 + crash_at), reordered=reordered)
        try:
            got, redelivered = reopened(image, config)
        except Exception as exc:  # a store that no longer opens is a failure the sweep found
            return repr(exc)
        finally:
            shutil.rmtree(image, ignore_errors=True)
        lost = set(ingested) - set(got) - set(acked) - set(attempted)  # acked segments may be deleted
        if lost:
            return f"acknowledged {sorted(lost)} lost"
        if set(acked) & set(redelivered) or set(ingested) - set(acked) - set(attempted) - set(redelivered):
            return f"acked {acked}, redelivered {redelivered}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=2, help="random fates per crash point")
    ap.add_argument("--direct", action="store_true", help="the workload with direct (WAL-bypassing) bundles")
    args = ap.parse_args(argv)
    config = DIRECT if args.direct else CONFIG
    logging.disable(logging.CRITICAL)
    root = Path(tempfile.mkdtemp(prefix="fsync-necessity-"))
    try:
        fs = PowerLossFS(str(root / "sites"))
        run_subscribed_workload(str(root / "sites"), fs, config)
        baseline = sweep_fails(root, "", args.seeds, config)
        print(f"{'(every sync kept)':45} {'FAILS: ' + baseline[:160] if baseline else 'the sweep passed'}", flush=True)
        needed = 0
        for site in sorted(fs.sync_sites):
            failure = sweep_fails(root, site, args.seeds, config)
            needed += failure is not None
            print(f"{site:45} {'needed: ' + failure[:160] if failure else 'the sweep passed without it'}", flush=True)
        print(f"{needed} of {len(fs.sync_sites)} sync call sites are needed by the sweep")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
