"""Fixtures for the black-box Python suites: a real laminar broker per test module
(`broker`) and a private one per test (`own_broker`, for kill -9 and restarts)."""

import os
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from laminar_broker import BrokerProcess  # noqa: E402

GROUPS_ENABLED = os.environ.get("LAMINAR_TEST_GROUPS") == "1"


def pytest_collection_modifyitems(config, items):
    if GROUPS_ENABLED:
        return
    skip = pytest.mark.skip(reason="needs groups/idempotence in the broker: set LAMINAR_TEST_GROUPS=1")
    for item in items:
        if "groups" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def broker():
    process = BrokerProcess()
    yield process
    process.stop()


@pytest.fixture
def own_broker():
    process = BrokerProcess()
    yield process
    process.stop()


@pytest.fixture
def topic_name(request):
    """A fresh topic name per test, readable in broker logs."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"
