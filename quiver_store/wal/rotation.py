"""Names of the WAL files: the active `quiver.wal` and rotated chunks `quiver.wal.<generation>`.

Every file has a generation; a rotated chunk keeps its generation as its suffix, so one rename
retires the active file and nothing is ever shifted. The active file's generation is one more than
the newest chunk's (or the sidecar's generation when every chunk was deleted).
"""

from __future__ import annotations

from ..fs import FileSystem
from .format import decimal

ACTIVE = "quiver.wal"
QUARANTINE_DIR = "quarantine"


def chunk_name(generation: int) -> str:
    return f"{ACTIVE}.{generation}"


def list_chunks(fs: FileSystem, wal_dir: str) -> list[int]:
    """Generations of the rotated chunks present, ascending."""
    gens = []
    for name in fs.listdir(wal_dir):
        # names the store never writes (non-ASCII digits, past 2**63-1) are another program's files
        generation = decimal(name[len(ACTIVE) + 1 :]) if name.startswith(ACTIVE + ".") else None
        if generation is not None:
            gens.append(generation)
    return sorted(gens)

