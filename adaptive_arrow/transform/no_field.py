"""NoField: an optional field stays out of the emitted schema until it carries a value."""

from __future__ import annotations

import pyarrow as pa


class NoField:
    """Removes the field. The node drops this transform when a value shows up (missing-field event)."""

    def transform(self, field: pa.Field) -> pa.Field | None:
        return None

    def __repr__(self) -> str:
        return "NoField()"
