"""The exception transport optimisation raises on tables it cannot sort or renumber."""

from __future__ import annotations

from ..errors import AdaptiveArrowError


class TransportError(AdaptiveArrowError, ValueError):
    """A table's ids, parent ids, sort order or id encoding are unusable.

    The message names the payload type and column, and says what to fix.
    """
