"""The pipeline timeline, the activations per stage and the FSDP bytes drawings."""
import pytest
from matplotlib.figure import Figure

from widgets.lessons.researcher_7.draw import KIND_COLOUR, draw_held_bytes, draw_in_flight, draw_timeline
from widgets.lessons.researcher_7.pipeline import simulate


def test_timeline_draws_one_cell_per_operation_where_the_simulator_put_it():
    timeline = simulate("1f1b", 3, 4)
    ax = Figure().subplots()
    drawn = draw_timeline(timeline, ax)
    forwards = [op for op in timeline.ops if op.kind == "F"]
    assert len(drawn["F"]) == len(forwards) == 12 and len(drawn["B"]) == 12
    assert [(bar.get_x(), bar.get_y() + bar.get_height() / 2) for bar in drawn["F"]] == \
        [(op.start, op.stage) for op in forwards]
    assert drawn["F"][0].get_facecolor()[:3] != drawn["B"][0].get_facecolor()[:3]
    assert KIND_COLOUR["F"] != KIND_COLOUR["B"]
    assert [t.get_text() for t in drawn["labels"]] == [str(op.micro_batch) for op in timeline.ops]
    assert ax.get_xlim() == (0, timeline.makespan) and "bubble 0.333" in ax.get_title()


def test_timeline_labels_can_be_left_out():
    assert draw_timeline(simulate("gpipe", 2, 2), Figure().subplots(), label_cells=False)["labels"] == []


def test_in_flight_bars_per_schedule():
    timelines = [simulate(s, 4, 8) for s in ("gpipe", "1f1b")]
    drawn = draw_in_flight(timelines, Figure().subplots())
    assert [b.get_height() for b in drawn["gpipe"]] == [8, 8, 8, 8]
    assert [b.get_height() for b in drawn["1f1b"]] == [4, 3, 2, 1]


def test_held_bytes_lines():
    drawn = draw_held_bytes({"sync": [5e7, 5e7], "no_sync": [1e8, 5e7]}, 1e8, Figure().subplots())
    assert list(drawn["no_sync"].get_ydata()) == [100, 50]  # MB
    assert drawn["full"].get_ydata()[0] == 100


def test_bad_input():
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        draw_timeline(simulate("gpipe", 2, 2), None)
