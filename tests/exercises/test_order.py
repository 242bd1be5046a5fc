"""Cells run out of order: the NameError a notebook cell raises gets a sentence saying what to run first."""
import sys
import types

from widgets.exercises.order import explain_name_errors, name_error_note


def test_the_note_names_the_missing_name_and_how_to_run_the_cells_above():
    note = name_error_note("my_ratio")
    assert "`my_ratio` is not defined in this kernel yet" in note and "Run All Above" in note


def test_outside_ipython_nothing_is_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: None))
    assert explain_name_errors() is False


class FakeShell:
    """What explain_name_errors uses of IPython's shell: set_custom_exc and showtraceback."""

    def __init__(self):
        self.handled, self.shown = None, []

    def set_custom_exc(self, types_, handler):
        self.handled = (types_, handler)

    def showtraceback(self, exc_tuple, tb_offset=None):
        self.shown.append(exc_tuple[1])


def test_in_ipython_a_name_error_gets_the_note_and_keeps_its_traceback(monkeypatch):
    shell = FakeShell()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert explain_name_errors() is True
    types_, handler = shell.handled
    assert types_ == (NameError,)
    try:
        fresh_model  # noqa: B018, F821 - as in a cell run before the one that defines it
    except NameError as error:
        handler(shell, NameError, error, error.__traceback__)
        handler(shell, NameError, error, error.__traceback__)  # shown twice: noted once
    (shown,) = set(shell.shown)
    assert shown.__notes__ == [name_error_note("fresh_model")]
