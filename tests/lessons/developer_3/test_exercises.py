"""Developer notebook 3's checkers: the right answer passes, each typical wrong answer fails with its message."""
import pytest
import torch

from tests.exercises.exercise_support import assert_incorrect
from tests.exercises.loops import make_loop
from widgets.core.accumulation import is_update_step
from widgets.exercises.toolkit import Status
from widgets.lessons.developer_3.exercises import gallery_exercises

GALLERY = gallery_exercises()


def test_sum_reduction():
    assert GALLERY.sum_reduction.check(1 / 32).correct
    assert_incorrect(GALLERY.sum_reduction.check(1 / 4), "1/K assumes a mean-reduced loss", "8x")
    assert_incorrect(GALLERY.sum_reduction.check(1 / 8), "1/b", "4x too big")
    assert_incorrect(GALLERY.sum_reduction.check(1), "32x too big")
    assert_incorrect(GALLERY.sum_reduction.check(1 / 128), "divides by K twice")
    assert_incorrect(GALLERY.sum_reduction.check(0.1), "3.2x the big-batch gradient")


# --- my_loop: the auditor is the judge; every correct variant passes, each fault is named --------

@pytest.mark.parametrize("options", [
    {},  # each loss x n_i/n before backward, zero_grad after the step
    {"scale": "boundary_share"},  # loss x n_i, .grad / n at the update, then the clip
    {"zero_grad": "window_start"},  # the pile cleared when a window starts instead of after the step
    {"scale": "boundary_share", "zero_grad": "window_start"},
])
def test_my_loop_accepts_every_correct_variant(options):
    feedback = GALLERY.my_loop.check(make_loop(**options))
    assert feedback.correct, feedback
    assert "n_i/n" in feedback.message and "mean loss" in feedback.message


def buffer_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """A separate buffer, torch.autograd.grad, .grad assigned once per update."""
    batches = list(batches)
    params = [p for p in model.parameters()]
    logged = []
    for start in range(0, len(batches), accumulation_steps):
        window = batches[start:start + accumulation_steps]
        n = sum(len(t) for _, t in window)
        buffer = [torch.zeros_like(p) for p in params]
        total = 0.0
        for x, y in window:
            loss = loss_fn(model(x), y)
            for b, g in zip(buffer, torch.autograd.grad(loss * (len(y) / n), params)):
                b += g
            total += loss.item() * len(y) / n
        for p, b in zip(params, buffer):
            p.grad = b
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()
        logged.append(total)
    return logged

def while_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    """The stream read window by window with a while loop; the pile emptied with model.zero_grad()."""
    stream, logged, done = iter(batches), [], False
    while not done:
        window = []
        for _ in range(accumulation_steps):
            try:
                window.append(next(stream))
            except StopIteration:
                done = True
                break
        if not window:
            break
        n, mean = sum(y.shape[0] for _, y in window), 0.0
        for x, y in window:
            loss = loss_fn(model(x), y)
            (loss * y.shape[0] / n).backward()
            mean += float(loss) * y.shape[0] / n
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        if scheduler:
            scheduler.step()
        model.zero_grad()
        logged.append(mean)
    return logged


@pytest.mark.parametrize("loop", [buffer_loop, while_loop])
def test_my_loop_accepts_right_loops_written_in_unusual_ways(loop):
    feedback = GALLERY.my_loop.check(loop)
    assert feedback.correct, feedback


@pytest.mark.parametrize("options, words", [
    ({"log": None}, ["returns nothing", "mean loss of each update"]),  # skipping the required log fails
    ({"backward": "window_sum"}, []),
    ({"scale": "K"}, []),
    ({"scale": "none"}, []),
    ({"scale": "none", "clip": None}, ["clip"]),
    ({"scale": "boundary_share", "clip": "before_rescale"}, []),
    ({"scale": "boundary_share", "clip": None}, ["clip"]),
    ({"clip": None}, ["clip"]),
    ({"clip": "every_micro_step"}, ["clip"]),
    ({"zero_grad": "every_micro_step"}, ["zero_grad()"]),
    ({"zero_grad": None}, ["zero_grad()"]),
    ({"step": "every"}, ["optimizer.step()"]),
    ({"step": "no_tail"}, ["optimizer.step()"]),
    ({"scheduler_at": "micro_step"}, ["scheduler.step()", "with_scheduler=True"]),
    ({"log": "last"}, ["log"]),
    ({"log": "divided"}, ["log"]),
])
def test_my_loop_names_the_fault_of_each_wrong_loop(options, words):
    assert_incorrect(GALLERY.my_loop.check(make_loop(**options)), "audit_training_loop(my_loop", *words)


# Wrong loops the auditor tells apart only on a problem whose last micro-batch holds fewer examples
# (dividing by the number of micro-batches, a plain mean in the log) or that sees one backward over a
# concatenated window: the auditor's problem has that short micro-batch, and it names a window in one pass.
@pytest.mark.parametrize("options", [{"backward": "concat"}, {"scale": "count"}, {"scale": "boundary_count"},
                                     {"log": "plain"}])
def test_my_loop_rejects_what_only_an_uneven_last_micro_batch_shows(options):
    feedback = GALLERY.my_loop.check(make_loop(**options))
    assert_incorrect(feedback, "audit_training_loop(my_loop")


@pytest.mark.parametrize("options", [{}, {"scale": "none", "clip": None}, {"log": "last"}, {"step": "no_tail"},
                                     {"scale": "count"}, {"log": None}])
def test_the_checker_and_the_auditor_cannot_disagree(options):
    from widgets.audit import audit_training_loop
    from widgets.lessons.developer_3.exercises import AUDITS

    loop = make_loop(**options)
    reports = [audit_training_loop(loop, **settings) for settings in AUDITS]
    audited = all(r.matches_reference and r.log_checked for r in reports)
    assert GALLERY.my_loop.check(loop).correct is audited


def test_the_worked_answer_its_pasted_source_and_the_labs_loop_pass():
    from widgets.core.loops import train_loop
    from widgets.lessons.developer_3.exercises import my_loop

    shown = GALLERY.my_loop.solution(anyway=True).code
    pasted = {"torch": torch, "is_update_step": is_update_step}
    exec(compile(shown, "<pasted cell>", "exec"), pasted)
    for answer in (my_loop, pasted["my_loop"]):
        assert GALLERY.my_loop.check(answer).correct, answer
    assert not GALLERY.my_loop.check(train_loop).correct  # it clips only when asked: step 2 asks


def test_my_loop_other_answers():
    def my_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        ...
    assert GALLERY.my_loop.check(my_loop).status is Status.NOT_ATTEMPTED
    assert_incorrect(GALLERY.my_loop.check("my_loop"), "pass the function itself")
    no_scheduler = lambda model, optimizer, loss_fn, batches, accumulation_steps: make_loop()(  # noqa: E731
        model, optimizer, loss_fn, batches, accumulation_steps)
    assert_incorrect(GALLERY.my_loop.check(no_scheduler), "scheduler")


class _Hostile:
    def __iter__(self):
        raise RuntimeError("no")

    def __str__(self):
        raise RuntimeError("no")

    __repr__ = __str__


def test_my_loop_survives_hostile_answers():
    def raises_oddly(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        raise SystemExit(1)

    def returns_hostile(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        make_loop()(model, optimizer, loss_fn, batches, accumulation_steps, scheduler)
        return _Hostile()

    for answer in (_Hostile(), "123", raises_oddly, returns_hostile):
        assert GALLERY.my_loop.check(answer).status is Status.INCORRECT, answer


def test_the_checker_gives_one_finding_a_line_each_count_the_loops_own():
    """A loop with several faults (issue 36: three findings came as one paragraph, '4 values for 10 updates')."""
    def no_accumulation(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        logged = []
        for inputs, targets in batches:
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            logged.append(loss.item())
        return logged[:4]  # fewer values than updates: the count said must be these 4

    message = GALLERY.accumulate.check(no_accumulation).message
    findings = [line for line in message.splitlines() if line.startswith("- ")]
    assert len(findings) >= 2 and message.splitlines()[0].endswith("found:"), message
    assert "4 values for 10 updates" in message, message
