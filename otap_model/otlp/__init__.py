"""OTLP (protobuf and JSON) <-> plain OTAP tables. Field mapping: docs/otlp-mapping.md."""

from .decode import from_otlp
from .encode import to_otlp
from .json import from_otlp_json, to_otlp_json
from .normalize import normalize_otlp

__all__ = ["from_otlp", "from_otlp_json", "normalize_otlp", "to_otlp", "to_otlp_json"]
