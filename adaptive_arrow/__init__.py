"""Adaptive Arrow encoder and decoder for OTAP tables.

Annotated reference schemas become transformation trees; each batch is inspected once, the
schema corrected (optional columns appear, dictionary indices widen or fall back to plain types)
and the record routed to the Arrow IPC stream of its signature, wrapped in the OTel Arrow
``BatchArrowRecords`` envelope.
"""

from .config import EncoderConfig
from .decoder import Decoder
from .encoder import Encoder
from .envelope import ArrowPayload, BatchArrowRecords
from .errors import (
    AdaptiveArrowError,
    ConfigError,
    DecodingError,
    EncodingError,
    EnvelopeError,
    SchemaUpdateLimitError,
    SparkJobError,
)
from .events import EncoderStats, Event, EventKind
from .signature import schema_fingerprint, schema_signature

__all__ = [
    "AdaptiveArrowError",
    "ArrowPayload",
    "BatchArrowRecords",
    "ConfigError",
    "Decoder",
    "DecodingError",
    "Encoder",
    "EncoderConfig",
    "EncoderStats",
    "EncodingError",
    "EnvelopeError",
    "Event",
    "EventKind",
    "SchemaUpdateLimitError",
    "SparkJobError",
    "schema_fingerprint",
    "schema_signature",
]
