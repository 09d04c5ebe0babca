"""Identity: the field is emitted exactly as the reference declares it."""

from __future__ import annotations

import pyarrow as pa


class Identity:
    """Leaves the field unchanged (required fields without a dictionary annotation)."""

    def transform(self, field: pa.Field) -> pa.Field | None:
        return field

    def __repr__(self) -> str:
        return "Identity()"
