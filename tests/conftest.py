"""Test-run settings shared by every test module.

Hypothesis explores new random examples on every developer run; under CI (CI=true) it replays
a fixed, derandomized set so a landing never depends on the luck of the draw. A failure found
locally is kept in .hypothesis/ and replayed until fixed.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")
