"""Transport optimisation of plain OTAP tables: multi-record sort, dense id reassignment, and
delta / quasi-delta encoding of id columns (issue: sorting and delta ids).

Contract between the encoder and this module:

* ``optimize(bundle, config)`` takes a plain ``OtapBundle`` and returns one whose tables have the
  same reference columns and types, rows sorted, ids renumbered densely in sorted order, and id /
  parent_id columns holding delta or quasi-delta values, each marked with the field metadata
  ``encoding`` = ``plain`` | ``delta`` | ``quasidelta`` (as the Rust reference does).
* ``restore(bundle)`` undoes the id encodings: every id / parent_id column becomes plain (metadata
  ``encoding`` removed). Columns without ``encoding`` metadata or marked ``plain`` are left as they
  are, so the decoder accepts both encoded and plain id columns.
"""

from __future__ import annotations

from otap_model import OtapBundle

ENCODING_KEY = b"encoding"


def optimize(bundle: OtapBundle, config: object | None = None) -> OtapBundle:
    """Placeholder until the sorting issue lands: returns the bundle unchanged (ids stay plain)."""
    return bundle


def restore(bundle: OtapBundle) -> OtapBundle:
    """Placeholder until the sorting issue lands: plain ids need no restoration."""
    return bundle
