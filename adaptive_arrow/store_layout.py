"""The OTAP adapter's layout contract for Quiver: slot id = OTAP payload type id.

Quiver itself knows nothing of OTAP; this contract tells it what each slot holds, which columns
carry event time (for segment time ranges), and which root slot marks a bundle's signal. Its hash
guards every WAL written with it.
"""

from __future__ import annotations

from otap_model import DATA_POINT_FAMILIES, ROOT_PAYLOAD, PayloadType
from quiver_store import Layout

_EVENT_TIME = {
    PayloadType.LOGS: ("time_unix_nano",),
    PayloadType.SPANS: ("start_time_unix_nano",),
    **{family[0]: ("time_unix_nano",) for family in DATA_POINT_FAMILIES},
}

OTAP_LAYOUT = Layout(
    name="otap",
    slots={int(pt): pt.name for pt in PayloadType if pt not in (PayloadType.UNKNOWN, PayloadType.MULTIVARIATE_METRICS)},
    event_time_columns={int(pt): cols for pt, cols in _EVENT_TIME.items()},
    root_slots={int(pt): signal.value for signal, pt in ROOT_PAYLOAD.items()},
)
