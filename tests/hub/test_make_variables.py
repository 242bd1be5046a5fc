"""No shell from make variables: every value the room's root recipes take is refused before anything
runs unless it is what its variable allows (the Makefile's guard, then hub/settings.py).

Each hostile value tries to run `touch` (or `id`) as root; the test runs the real make target and
checks that make stopped, named the variable, and that nothing ran: no file, no `uid=0` printed.
HUB_VENV points at a folder that does not exist, so that a value let through would show (make would
start building an environment there) rather than use a real one.
"""
from __future__ import annotations

import os
import subprocess

import pytest

from hub.settings import TEST_COPY_MARK, check_make
from tests.hub.support import ROOT

# variable -> the target whose recipe reads it
TARGETS = {"LEARNERS": "hub", "IP": "hub", "PORT": "hub", "LIMITS": "hub", "N": "hub-room", "HUB_STATE": "hub-stop",
           "HUB_VENV": "hub", "HUB_PYTHON": "hub", "HUB_TEST_COPY": "hub-test", "WHEELS": "hub", "TORCH": "hub"}
HOSTILE = ["a;id", "x;touch {F};#", "`touch {F}`", "$(touch {F})", "$(shell touch {F})", "x\ntouch {F}", "a b;touch {F}"]


@pytest.mark.parametrize("variable", sorted(TARGETS))
@pytest.mark.parametrize("template", HOSTILE)
def test_a_hostile_value_runs_nothing(variable, template, tmp_path):
    marker = tmp_path / "F"
    value = template.format(F=marker)
    made = subprocess.run(["make", "--no-print-directory", TARGETS[variable], f"{variable}={value}",
                           f"HUB_VENV={tmp_path / 'no-venv'}" if variable != "HUB_VENV" else "N=10"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if not k.startswith("LAB_MAKE_")})
    said = made.stdout + made.stderr
    assert made.returncode != 0, said
    assert variable in said, said  # the message names it
    assert not marker.exists() and "uid=0" not in said, said  # nothing ran
    assert not (tmp_path / "no-venv").exists()  # not even the first step of the room


def test_the_values_a_room_uses_pass():
    good = {"LEARNERS": "ada, ben,cy", "IP": "192.168.1.10", "PORT": "8000", "N": "10", "LIMITS": "memory=4G,kernels=2",
            "HUB_VENV": "/opt/gradient-accumulation-lab/venv", "HUB_PYTHON": "/usr/bin/python3",
            "HUB_STATE": "/var/lib/gradient-accumulation-lab-hub", "HUB_TEST_COPY": "/tmp/lab-hub-test-copy-never-made",
            "WHEELS": "wheelhouse", "TORCH": "cpu"}
    assert check_make({f"LAB_MAKE_{k}": v for k, v in good.items()}) == []
    assert check_make({"LAB_MAKE_LEARNERS": "", "LAB_MAKE_LIMITS": "", "LAB_MAKE_WHEELS": "", "LAB_MAKE_TORCH": ""}) == []


def test_hub_test_never_replaces_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "work.txt").write_text("keep")
    assert check_make({"LAB_MAKE_HUB_TEST_COPY": str(tmp_path)})  # no mark: refused, nothing deleted
    assert (tmp_path / "work.txt").read_text() == "keep"
    assert check_make({"LAB_MAKE_HUB_TEST_COPY": "/"}) and check_make({"LAB_MAKE_HUB_TEST_COPY": "/tmp"})
    tmp_path.chmod(0o755)  # the copy's folder must be open to the learners
    made = tmp_path / "copy"
    made.mkdir()
    (made / TEST_COPY_MARK).touch()
    assert check_make({"LAB_MAKE_HUB_TEST_COPY": str(made)}) == []  # its own copy: replaced
    (tmp_path / "link").symlink_to(made)
    assert check_make({"LAB_MAKE_HUB_TEST_COPY": str(tmp_path / "link")})  # a link to one: refused
