"""`make demo`: the main job on embedded defaults: Spark in local mode encodes, a Quiver store in a
local folder (demo-output/store) persists, a subscriber reads every bundle back for checking."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from rich.console import Console

from .pipeline import run_pipeline
from .report import render
from .spark import spark_session

OUTPUT = Path("demo-output")


def main() -> int:
    console = Console(width=170)
    store = OUTPUT / "store"
    if store.exists():
        shutil.rmtree(store)
    console.print("Starting Spark (local[2]) ...")
    spark = spark_session("local[2]", "adaptive-arrow-demo")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        console.print(
            f"Generating 20,000 records per signal (batches of 5,000); Spark tasks encode them, "
            f"the driver stores them in a Quiver store at {store} ..."
        )
        result = run_pipeline(store, spark=spark)
    finally:
        spark.stop()
    render(result, console)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
