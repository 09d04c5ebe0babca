"""OTAP data model: payload types, annotated reference schemas, conversions to and from OTLP,
OTLP/JSON and Zipkin, and a generator of realistic telemetry."""

from .bundle import OtapBundle
from .conform import conform
from .errors import ConversionError, MissingTableError, OtapModelError, SchemaError
from .generator import generate, generate_otlp
from .otlp import from_otlp, from_otlp_json, normalize_otlp, to_otlp, to_otlp_json
from .payload import (
    DATA_POINT_FAMILIES,
    ROOT_PAYLOAD,
    SIGNAL_PAYLOADS,
    PayloadType,
    Relation,
    Signal,
    relations,
    signal_of,
)
from .schema import Annotation, annotation, conforms, reference_schema
from .zipkin import from_zipkin_json

__all__ = [
    "DATA_POINT_FAMILIES",
    "ROOT_PAYLOAD",
    "SIGNAL_PAYLOADS",
    "Annotation",
    "ConversionError",
    "MissingTableError",
    "OtapBundle",
    "OtapModelError",
    "PayloadType",
    "Relation",
    "SchemaError",
    "Signal",
    "annotation",
    "conform",
    "conforms",
    "from_otlp",
    "from_otlp_json",
    "from_zipkin_json",
    "generate",
    "generate_otlp",
    "normalize_otlp",
    "reference_schema",
    "relations",
    "signal_of",
    "to_otlp",
    "to_otlp_json",
]
