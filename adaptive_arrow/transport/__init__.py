"""Transport optimisation of plain OTAP tables: multi-record sort, dense id reassignment, and
delta / quasi-delta encoding of id columns.

Contract between the encoder and this package:

* ``optimize(bundle, config)`` takes a plain ``OtapBundle`` and returns one whose tables have the
  same reference columns and types, rows sorted, ids renumbered densely in sorted order, and id /
  parent_id columns holding delta or quasi-delta values, each marked with the field metadata
  ``encoding`` = ``plain`` | ``delta`` | ``quasidelta`` (as the Rust reference does).
  ``config.sort_orders`` (optional) maps payload type ids to the column paths to sort by.
* ``restore(bundle)`` undoes the id encodings: every id / parent_id column becomes plain (metadata
  ``encoding`` removed). Columns without ``encoding`` metadata or marked ``plain`` are left as they
  are, so the decoder accepts both encoded and plain id columns. ``check_encoding`` says which
  marks it can undo (the encoder checks its input with it too).

The restored bundle equals the input up to the renumbering of ids (ids are only unique within one
bundle) and the order of rows.
"""

from .columns import DELTA, ENCODING_KEY, PLAIN, QUASI_DELTA
from .errors import TransportError
from .optimizer import check_encoding, optimize, restore
from .sort import DEFAULT_SORT_ORDERS, REFERENCE_SORT_ORDERS, resolve_sort_orders

__all__ = [
    "DEFAULT_SORT_ORDERS",
    "DELTA",
    "ENCODING_KEY",
    "PLAIN",
    "QUASI_DELTA",
    "REFERENCE_SORT_ORDERS",
    "TransportError",
    "check_encoding",
    "optimize",
    "resolve_sort_orders",
    "restore",
]
