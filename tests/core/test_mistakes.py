"""The correct loop and the classic mistakes (widgets.core.loops, listed by widgets.core.mistakes).

- `train` is what a learner copies: at most 20 lines of ordinary PyTorch, nothing imported but torch
  and the standard library, no switch in it; the auditor passes it with an uneven last window, a scheduler and clipping.
- each mistake's loop is `train` with only its `# BUG` lines changed, and the auditor names it as
  exactly that mistake (at K = 3 and 4, under the options its registry entry gives).
"""
from __future__ import annotations

import ast
import functools
import inspect
import re

import pytest

from widgets.audit import audit_training_loop
from widgets.core import loops
from widgets.core.config import NEEDS, check_mistake, waits_for
from widgets.core.mistakes import MISTAKES, mistake_diff, mistakes_table


def test_the_correct_loop_is_short_plain_pytorch():
    source = inspect.getsource(loops.train)
    assert len(source.splitlines()) <= 20
    assert max(len(line) for line in source.splitlines()) <= 100
    names = {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
    module_imports = [node for node in ast.parse(inspect.getsource(loops)).body
                      if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert {alias.name for node in module_imports for alias in node.names} == {"annotations", "contextlib", "itertools",
                                                                               "torch"}
    assert "bugs" not in names and " in bugs" not in source


@pytest.mark.parametrize("K", [3, 4])
@pytest.mark.parametrize("name", ["train", *loops.VARIANTS])
def test_the_auditor_passes_the_correct_loops_with_a_short_window_a_scheduler_and_clipping(name, K):
    loop = getattr(loops, name)
    report = audit_training_loop(loop, K, with_scheduler=True, clip_norm=1.0)
    assert report.matches_reference and report.num_batches % K, report
    assert audit_training_loop(functools.partial(loop, max_norm=None), K).matches_reference


@pytest.mark.parametrize("name", loops.VARIANTS)
def test_a_variant_is_the_correct_loop_with_its_own_lines_and_nothing_else_changed(name):
    import difflib
    ours = inspect.getsource(getattr(loops, name)).splitlines()[2:]  # after its signature and docstring
    theirs = inspect.getsource(loops.train).splitlines()[2:]
    changed = [line for line in difflib.ndiff(theirs, ours) if line[:1] in "+-"]
    assert 0 < len(changed) <= 30, changed  # the GPU recipe: autocast, a GradScaler, no_sync, their comments
    assert all(len(line) <= 100 for line in inspect.getsource(getattr(loops, name)).splitlines())


def test_the_registry_names_each_loop_and_nothing_else():
    functions = [name for name, f in vars(loops).items() if inspect.isfunction(f) and f.__module__ == loops.__name__]
    assert functions == ["train", *MISTAKES, *loops.VARIANTS, "train_loop"]
    for name, mistake in MISTAKES.items():
        assert mistake.name == name and mistake.loop.__name__ == name
        assert mistake.label and mistake.does and mistake.symptom and mistake.fix
        assert set(mistake.needs) <= set(NEEDS) and set(mistake.setting) == set(mistake.needs)
        assert not waits_for(name, **mistake.setting)


@pytest.mark.parametrize("name", list(MISTAKES))
def test_each_mistake_is_the_correct_loop_with_only_its_bug_lines_changed(name):
    diff = mistake_diff(name).splitlines()
    assert any(line[:1] in "+-" for line in diff)
    blocks, block = [], []
    for line in diff:  # consecutive added lines: each block carries its "# BUG"
        if line.startswith("+"):
            block.append(line)
        elif block:
            blocks.append(block)
            block = []
    blocks += [block] if block else []
    assert blocks and all(any("# BUG" in line for line in b) for b in blocks), diff
    assert sum(line[:1] in "+-" for line in diff) <= 4  # a mistake is a line or two, not a rewrite
    assert all(len(line) <= 100 for line in inspect.getsource(MISTAKES[name].loop).splitlines())


@pytest.mark.parametrize("K", [3, 4])
@pytest.mark.parametrize("name", list(MISTAKES))
def test_the_auditor_names_each_mistake_loop_as_its_mistake_and_nothing_else(name, K):
    loop, options = MISTAKES[name].audit_call()
    report = audit_training_loop(loop, K, **options)  # the default batches end in a short window
    assert report.loop_name == name
    assert report.mistakes == {name}, report


def test_no_loop_a_learner_is_shown_holds_a_switch():
    shown = (loops.train, loops.train_loop, *(m.loop for m in MISTAKES.values()), *(getattr(loops, v) for v in loops.VARIANTS))
    for function in shown:
        assert not re.search(r"\bin bugs\b", inspect.getsource(function))


def test_the_table_lists_every_mistake_with_its_link_and_the_rule():
    table = mistakes_table()
    assert [row[0] for row in table.rows] == [f"[{m.label}](developer_3_bug_gallery.ipynb#{m.name})"
                                              for m in MISTAKES.values()]
    assert mistakes_table("").rows[0][0] == f"[{MISTAKES['loss_not_divided'].label}](#loss_not_divided)"
    assert mistakes_table(None).rows[0][0] == MISTAKES["loss_not_divided"].label
    assert "once per window" in table.note


def test_check_mistake_names_the_allowed_ones():
    assert check_mistake(None) is None and check_mistake("loss_not_divided") == "loss_not_divided"
    with pytest.raises(ValueError, match="allowed: None or one of"):
        check_mistake("no_such_mistake")
    with pytest.raises(TypeError, match="one mistake's name"):
        check_mistake({"loss_not_divided"})


def test_a_mistake_says_which_setting_it_waits_for():
    assert waits_for("forget_final_step", tail_micro_batches=0) == {"tail_micro_batches": NEEDS["tail_micro_batches"][0]}
    assert waits_for("scheduler_every_micro_step", warmup_updates=1)
    assert not waits_for("loss_not_divided", tail_micro_batches=0, max_grad_norm=None, warmup_updates=0)
    assert not waits_for(None, tail_micro_batches=0)


def test_mistake_diff_needs_a_loop_name():
    with pytest.raises(ValueError, match="mistake_diff needs a mistake's name"):
        mistake_diff(None)
