"""Exceptions raised by adaptive_arrow. Messages say what was wrong, where, and what to do."""

from __future__ import annotations


class AdaptiveArrowError(Exception):
    """Base class of every adaptive_arrow error."""


class ConfigError(AdaptiveArrowError, ValueError):
    """An EncoderConfig value is out of range."""


class EncodingError(AdaptiveArrowError):
    """The encoder rejected a bundle; the encoder's state is unchanged."""


class SchemaUpdateLimitError(EncodingError):
    """One batch would need more schema updates of a table than `max_schema_updates` allows."""


class DecodingError(AdaptiveArrowError):
    """Encoded records could not be decoded back into plain OTAP tables."""


class EnvelopeError(DecodingError):
    """Bytes are not a well-formed BatchArrowRecords protobuf message, or an envelope was built
    from fields of the wrong type (a str record, payloads that are not ArrowPayloads)."""


class SparkJobError(AdaptiveArrowError):
    """A Spark job over telemetry was set up wrongly, or one of its rows could not be encoded."""
