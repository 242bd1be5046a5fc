"""The site's kernel-free explorer and bricks (site/interactive.py): a sample of the states drawn ahead, as a page
holds them (its block's JSON and the picture files), is what the widget draws when a cell builds it at that setting;
the pages start where the notebook cells start; bad input to the builder is refused naming it."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

from widgets.lessons.beginner_1 import make_bricks_widget
from widgets.lessons.beginner_2 import make_accumulation_explorer

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("site_interactive", ROOT / "site" / "interactive.py")
interactive = sys.modules[SPEC.name] = importlib.util.module_from_spec(SPEC)  # dataclasses look their module up
SPEC.loader.exec_module(interactive)


def on_the_page(controls, states, out_dir: Path) -> dict[tuple, interactive.State]:
    """The states as the page holds them: the block's JSON, each picture read back from the file it names."""
    html = interactive.block("test", controls, states, "a note", out_dir)
    data = json.loads(re.search(r'<script type="application/json">(.*?)</script>', html, re.S)[1])
    return {tuple(json.loads(v) for v in key.split("|")): interactive.State((out_dir / s["png"]).read_bytes(),
                                                                           s["alt"], s["readout"])
            for key, s in data["states"].items()}


def test_explorer_states_are_what_the_kernel_draws(tmp_path):
    # Each compared with an explorer built at that setting, as a learner's cell would build it.
    controls, states = interactive.explorer_states(dict(accumulation_steps=16, micro_batch_size=32),
                                                   accumulation_steps=(1, 16), micro_batch_size=(32,),
                                                   mistake=("", "step_every_micro_step"))
    assert [c.name for c in controls] == ["accumulation_steps", "micro_batch_size", "mistake"]
    assert len(states) == 4 and states[1, 32, ""] != states[16, 32, ""] != states[16, 32, "step_every_micro_step"]
    page = on_the_page(controls, states, tmp_path)
    for (K, b, mistake) in states:
        fresh = make_accumulation_explorer(accumulation_steps=K, micro_batch_size=b, mistake=mistake or None)
        assert page[K, b, mistake] == interactive.shown(fresh), (K, b, mistake)
        fresh.close()


def test_bricks_states_are_what_the_kernel_draws(tmp_path):
    # Reached by moving the widget's controls (K down and up, the box on and off, the trips one by one); each
    # compared with a widget built at that setting: the scene's limits never change, so the path leaves no trace.
    controls, states = interactive.bricks_states(dict(micro_batch_size=5, accumulation_steps=3), trips=(1, 3))
    assert [c.name for c in controls] == ["trip", "accumulation_steps", "divided"]
    assert len(states) == 2 * (2 + 4)
    page = on_the_page(controls, states, tmp_path)
    for (trip, K, forget) in states:
        fresh = make_bricks_widget(micro_batch_size=5, accumulation_steps=K, trip=trip, divided=not forget)
        assert page[trip, K, forget] == interactive.shown(fresh), (trip, K, forget)
    # The forgotten division shows only once the wall stands, as in the notebook.
    assert states[3, 3, True] != states[3, 3, False] and states[2, 3, True] == states[2, 3, False]


@pytest.mark.parametrize("cells, make", [(interactive.EXPLORER_CELLS, make_accumulation_explorer),
                                         (interactive.BRICKS_CELLS, make_bricks_widget)])
def test_each_page_starts_where_its_notebook_cell_starts(cells, make):
    for (stem, cell_id), start in cells.items():
        cell = next(c for c in nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", 4).cells if c.get("id") == cell_id)
        saved = [out.data["text/plain"] for out in cell.outputs if "text/plain" in out.get("data", {})]
        bundle = make(**start)._repr_mimebundle_()
        assert saved == [(bundle[0] if isinstance(bundle, tuple) else bundle)["text/plain"]], (stem, cell_id)


def test_bad_input_is_refused_naming_it(tmp_path):
    start = dict(accumulation_steps=4, micro_batch_size=2)
    with pytest.raises(TypeError, match="out_dir must be a pathlib.Path"):
        interactive.snippets(str(tmp_path))
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="out_dir must be a folder"):
        interactive.snippets(tmp_path / "file")
    with pytest.raises(ValueError, match=r"accumulation_steps must be whole numbers from 1 to 16, got \(4, 32\)"):
        interactive.explorer_states(start, accumulation_steps=(4, 32))
    with pytest.raises(ValueError, match="micro_batch_size must be whole numbers"):
        interactive.explorer_states(start, micro_batch_size=(2.5,))
    with pytest.raises(ValueError, match="mistake must be among the explorer's"):
        interactive.explorer_states(start, mistake=("", "forgot_everything"))
    with pytest.raises(ValueError, match=r"accumulation_steps must start at one of its values \(1, 2\), got 4"):
        interactive.explorer_states(start, accumulation_steps=(1, 2))
    with pytest.raises(ValueError, match="grid holds 448 pictures, at most 100"):
        interactive.explorer_states(start, accumulation_steps=range(1, 17), micro_batch_size=range(1, 8))
    with pytest.raises(ValueError, match=r"trips must be whole numbers from 1 to 8, got \(\)"):
        interactive.bricks_states(dict(micro_batch_size=5, accumulation_steps=4), trips=())
