"""Exceptions raised by otap_model. Messages name the field and say what was wrong."""


class OtapModelError(Exception):
    """Base class of every otap_model error."""


class SchemaError(OtapModelError, ValueError):
    """A table does not conform to its payload type's reference schema, or a bundle holds what is
    not a table of its signal. Also a ValueError, which OtapBundle raised for the latter before."""


class ConversionError(OtapModelError):
    """Input telemetry (OTLP protobuf or JSON, Zipkin) could not be converted.

    `field` is the dotted path of the offending field when known, e.g.
    ``resource_logs[0].scope_logs[1].log_records[7].trace_id``.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class MissingTableError(OtapModelError, KeyError):
    """`bundle[pt]` named a payload type the bundle has no table for. Also a KeyError, as a mapping's
    missing key is, so `except KeyError` keeps working."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])
