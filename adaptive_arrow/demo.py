"""`make demo`: the main job on embedded defaults, in a local folder (demo-output/)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from rich.console import Console

from .pipeline import run_pipeline
from .report import render

OUTPUT = Path("demo-output")


def main() -> int:
    console = Console(width=170)
    store = OUTPUT / "store"
    if store.exists():
        shutil.rmtree(store)
    console.print(f"Generating 20,000 records per signal (batches of 5,000) into a Quiver store at {store} ...")
    result = run_pipeline(store)
    render(result, console)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
