"""Test-run settings shared by every test module.

Hypothesis explores new random examples on every developer run; under CI (CI=true) it replays
a fixed, derandomized set so a landing never depends on the luck of the draw. A failure found
locally is kept in .hypothesis/ and replayed until fixed.
"""

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of a test run (local[2]), started by the first test that asks for it."""
    from adaptive_arrow.spark import spark_session

    session = spark_session("local[2]", "adaptive-arrow-tests", **{"spark.driver.memory": "1g"})
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
