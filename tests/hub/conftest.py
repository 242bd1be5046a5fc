"""The hub tests (`make hub-test`): they start a real JupyterHub as root, create system users and
spawn servers, so the main run (`make test`, `make check`) never collects them.

Collected only when LAB_HUB_TESTS=1 (make hub-test sets it); then each is marked `hub` and `slow`.
One room for the whole module (tests/hub/test_room.py): a hub on a free loopback port, in a
throw-away state folder, with throw-away users; stopped, users deleted, at the end whatever happens.
"""
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ENABLED = os.environ.get("LAB_HUB_TESTS") == "1"
collect_ignore_glob = [] if ENABLED else ["test_*.py"]


def pytest_configure(config):
    config.addinivalue_line("markers", "hub: starts the room's JupyterHub as root (make hub-test; LAB_HUB_TESTS=1)")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.startswith("tests/hub/"):
            item.add_marker(pytest.mark.hub)
            item.add_marker(pytest.mark.slow)
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="the hub tests run as root (system users)"))



@pytest.fixture(scope="session")
def room():
    """The room (tests/hub/support.py), one for the session; stopped, users deleted, whatever happens."""
    pytest.importorskip("jupyterhub", reason="run in the hub's environment: make hub-test")
    from tests.hub.support import start_room, stop_room

    state = Path(tempfile.mkdtemp(prefix="lab-hub-test-"))
    try:
        yield start_room(state)
    finally:
        stop_room(state)
        shutil.rmtree(state, ignore_errors=True)


REPORT: dict[str, str] = {}  # what the tests found enforcing the room's limits here: printed at the end


@pytest.fixture(scope="session")
def report() -> dict[str, str]:
    return REPORT


def pytest_terminal_summary(terminalreporter):
    if REPORT:
        terminalreporter.section("the room's limits on this machine, as the hub tests exercised them")
        for what, how in REPORT.items():
            terminalreporter.write_line(f"{what}: {how}")
