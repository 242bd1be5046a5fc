"""The loop auditor names the right mistake for every bug of the gallery and passes a correct loop.

Each wrong loop below is the correct one with one classic mistake, marked `# BUG`.
"""
import pytest
import torch

from widgets.audit.auditor import audit_training_loop


def example_share(batches, i, K):
    """n_i / n: micro-batch i's share of the examples of its update (1/K for K equal micro-batches;
    the auditor's last micro-batch holds fewer examples, as a DataLoader with drop_last=False leaves it)."""
    start = i // K * K
    return len(batches[i][1]) / sum(len(y) for _, y in batches[start : start + K])


def correct_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, losses = len(batches), [], []
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y)
        (loss * share).backward()
        losses.append(loss.item() * share)
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad()
            logged.append(sum(losses))  # the mean loss of the update: each micro-batch's mean weighted n_i/n
            losses = []
    return logged


def correct_clipping_loop(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        (loss_fn(model(x), y) * share).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()


def loss_not_divided(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for i, (x, y) in enumerate(batches):
        loss_fn(model(x), y).backward()  # BUG
        if (i + 1) % accumulation_steps == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def loss_divided_twice(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y) * share
        (loss * share).backward()  # BUG: divided again
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def divided_while_sum(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        loss = torch.nn.functional.mse_loss(model(x), y, reduction="sum")  # BUG: sums over examples
        (loss * share).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def zero_grad_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        optimizer.zero_grad()  # BUG
        (loss_fn(model(x), y) * share).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()


def step_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        (loss_fn(model(x), y) * share).backward()
        optimizer.step()  # BUG
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.zero_grad()


def forget_final_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        (loss_fn(model(x), y) * share).backward()
        if (i + 1) % accumulation_steps == 0:  # BUG: the last, shorter group never steps
            optimizer.step()
            optimizer.zero_grad()


def tail_divided_by_k(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    for i, (x, y) in enumerate(batches):
        (loss_fn(model(x), y) / accumulation_steps).backward()  # BUG for the shorter last group
        if (i + 1) % accumulation_steps == 0 or i + 1 == len(batches):
            optimizer.step()
            optimizer.zero_grad()


def log_divided_loss(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n, logged, total = len(batches), [], 0.0
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        loss = loss_fn(model(x), y) * share
        loss.backward()
        total += loss.item()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
            logged.append(total / (i % accumulation_steps + 1))  # BUG: averages losses already divided
            total = 0.0
    return logged


def clip_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        (loss_fn(model(x), y) * share).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # BUG: on the half-built pile
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()


def scheduler_every_micro_step(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
    n = len(batches)
    for i, (x, y) in enumerate(batches):
        share = example_share(batches, i, accumulation_steps)
        (loss_fn(model(x), y) * share).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()  # BUG


GALLERY = [
    (loss_not_divided, {}, "loss_not_divided"),
    (loss_divided_twice, {}, "loss_divided_twice"),
    (divided_while_sum, {}, "loss_sum_reduction"),
    (zero_grad_every_micro_step, {}, "zero_grad_every_micro_step"),
    (step_every_micro_step, {}, "step_every_micro_step"),
    (forget_final_step, {}, "forget_final_step"),
    (tail_divided_by_k, {}, "tail_divided_by_k"),
    (log_divided_loss, {}, "log_divided_loss"),
    (clip_every_micro_step, dict(clip_norm=1.0), "clip_every_micro_step"),
    (scheduler_every_micro_step, dict(with_scheduler=True), "scheduler_every_micro_step"),
]


@pytest.mark.parametrize("K", [1, 2, 4, 5])
@pytest.mark.parametrize("options", [{}, dict(with_scheduler=True)])
def test_correct_loop_matches_the_reference(K, options):
    report = audit_training_loop(correct_loop, K, **options)
    assert report.matches_reference, str(report)
    assert report.mistakes == frozenset() and report.findings == []
    assert "Verdict: matches the reference." in str(report)
    assert report.update_ratios == pytest.approx([1.0] * len(report.update_ratios))


def test_correct_clipping_loop_matches_the_reference():
    report = audit_training_loop(correct_clipping_loop, 4, clip_norm=1.0)
    assert report.matches_reference, str(report)


@pytest.mark.parametrize("loop, options, mistake", GALLERY, ids=[m for _, _, m in GALLERY])
def test_each_gallery_bug_is_named(loop, options, mistake):
    report = audit_training_loop(loop, 4, **options)
    assert report.mistakes == {mistake}, str(report)
    assert not report.matches_reference and len(report.findings) == 1
    ratios_all_one = report.update_ratios == pytest.approx([1.0] * 3)
    verdict = "every update used the reference gradient, but the loop differs from the reference elsewhere" \
        if ratios_all_one else "differs from the reference"
    assert f"Verdict: {verdict}. Mistakes: {mistake}" in str(report)


@pytest.mark.parametrize("loop, options, mistake", GALLERY, ids=[m for _, _, m in GALLERY])
def test_each_gallery_bug_is_named_for_another_k(loop, options, mistake):
    assert audit_training_loop(loop, 3, **options).mistakes == {mistake}


def test_ratios_say_k_times_and_one_over_k():
    assert audit_training_loop(loss_not_divided, 4).update_ratios[:2] == pytest.approx([4, 4])
    assert audit_training_loop(loss_divided_twice, 4).update_ratios[:2] == pytest.approx([0.25, 0.25])
    ratios = audit_training_loop(tail_divided_by_k, 4).update_ratios  # 10 batches: groups of 4, 4, 2
    assert ratios[:2] == pytest.approx([1, 1]) and 0 < ratios[2] < 1  # the tail weighs 1/4 + 1/4, not 5/7 + 2/7


def test_report_counts_steps_and_zero_grads():
    report = audit_training_loop(step_every_micro_step, 4)
    assert report.counts["optimizer.step()"] == (10, 3)
    assert report.counts["backward passes"] == (10, 10)
    assert "10 steps, the reference 3" in report.findings[0]
    assert audit_training_loop(zero_grad_every_micro_step, 4).counts["zero_grad()"] == (10, 3)


def test_log_divided_loss_gives_the_factor():
    report = audit_training_loop(log_divided_loss, 4)
    assert "4 x more" in report.findings[0] and "Fix: log loss.item() before dividing" in report.findings[0]


def test_a_loop_that_returns_nothing_gets_a_note_not_a_mistake():
    report = audit_training_loop(loss_not_divided, 4)
    assert any("logging not checked" in n for n in report.notes)
    assert report.log_checked is False


def test_log_checked_says_whether_a_returned_log_was_compared():
    assert audit_training_loop(correct_loop, 4).log_checked is True  # a right log
    assert audit_training_loop(log_divided_loss, 4).log_checked is True  # a wrong one, named
    assert audit_training_loop(correct_clipping_loop, 4, clip_norm=1.0).log_checked is False  # none returned

    def returns_a_string(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        correct_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        return "done"

    assert audit_training_loop(returns_a_string, 4).log_checked is False  # no list of numbers to compare


def test_num_batches_divisible_by_k_tests_no_tail():
    assert audit_training_loop(forget_final_step, 4, num_batches=8).matches_reference


def test_a_loop_that_raises_is_reported_with_where():
    def broken(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        for x, y in batches:
            loss = loss_fn(model(x), y.T)  # wrong shape
            loss.backward()
            raise RuntimeError("boom")

    report = audit_training_loop(broken, 4)
    assert report.mistakes == {"loop_raised"}
    assert "RuntimeError: boom" in report.findings[0]
    assert 'at line' in report.findings[0] and 'of broken: raise RuntimeError("boom")' in report.findings[0]
    assert "Traceback" not in str(report)


def test_an_error_raised_inside_torch_points_at_the_learners_line():
    def shapes(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        x, y = batches[0]
        model(x.T)

    report = audit_training_loop(shapes, 4)
    assert report.mistakes == {"loop_raised"}
    assert "line" in report.findings[0] and "model(x.T)" in report.findings[0]


def test_a_loop_that_never_calls_backward():
    def no_backward(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        for x, y in batches:
            loss_fn(model(x), y)
            optimizer.step()

    report = audit_training_loop(no_backward, 4)
    assert report.mistakes == {"never_calls_backward"}
    assert "Fix: call loss.backward()" in report.findings[0]


def test_a_loop_with_no_zero_grad_leaks_into_the_next_update():
    def no_zero(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        n = len(batches)
        for i, (x, y) in enumerate(batches):
            share = example_share(batches, i, accumulation_steps)
            (loss_fn(model(x), y) * share).backward()
            if (i + 1) % accumulation_steps == 0 or i + 1 == n:
                optimizer.step()

    assert audit_training_loop(no_zero, 4).mistakes == {"zero_grad_missing"}


@pytest.mark.parametrize(
    "kwargs, error, word",
    [
        (dict(loop=42), TypeError, "loop"),
        (dict(loop=correct_loop, accumulation_steps=0), ValueError, "accumulation_steps"),
        (dict(loop=correct_loop, accumulation_steps=2.0), TypeError, "accumulation_steps"),
        (dict(loop=correct_loop, accumulation_steps=True), TypeError, "accumulation_steps"),
        (dict(loop=correct_loop, num_batches=0), ValueError, "num_batches"),
        (dict(loop=correct_loop, with_scheduler="yes"), TypeError, "with_scheduler"),
        (dict(loop=correct_loop, clip_norm=-1.0), ValueError, "clip_norm"),
        (dict(loop=lambda model, optimizer: None), TypeError, r"loop must accept \(model, optimizer, loss_fn"),
        (dict(loop=lambda m, o, l, b, k: None, with_scheduler=True), TypeError, "scheduler"),
    ],
)
def test_bad_arguments_raise_naming_the_parameter(kwargs, error, word):
    with pytest.raises(error, match=word):
        audit_training_loop(**kwargs)


def test_deterministic_and_leaves_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    a, b = audit_training_loop(tail_divided_by_k, 4), audit_training_loop(tail_divided_by_k, 4)
    assert str(a) == str(b) and a.update_ratios == b.update_ratios
    assert torch.equal(torch.rand(1), expected)


def test_scheduler_stepped_before_the_optimizer():
    def early(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        n = len(batches)
        for i, (x, y) in enumerate(batches):
            share = example_share(batches, i, accumulation_steps)
            (loss_fn(model(x), y) * share).backward()
            if (i + 1) % accumulation_steps == 0 or i + 1 == n:
                scheduler.step()  # before the step
                optimizer.step()
                optimizer.zero_grad()

    report = audit_training_loop(early, 4, with_scheduler=True)
    assert report.mistakes == {"scheduler_before_step"}
    assert "learning rates [0.025, 0.0375, 0.05], reference [0.0125, 0.025, 0.0375]" in report.findings[0]


def test_scheduler_never_stepped():
    assert audit_training_loop(correct_loop, 4, with_scheduler=True).matches_reference

    def ignores_it(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        return correct_loop(model, optimizer, loss_fn, batches, accumulation_steps)

    assert audit_training_loop(ignores_it, 4, with_scheduler=True).mistakes == {"scheduler_wrong_count"}


def test_clipping_missing_or_to_another_norm():
    assert audit_training_loop(correct_loop, 4, clip_norm=1.0).mistakes == {"clip_missing"}
    assert audit_training_loop(correct_clipping_loop, 4, clip_norm=0.5).mistakes == {"clip_norm_differs"}


def test_logging_the_last_micro_batch_or_nonsense():
    def last_only(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        logged = correct_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        return [loss * 0 + 1.0 for loss in logged]

    assert audit_training_loop(last_only, 4).mistakes == {"log_wrong"}

    def returns_a_string(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        correct_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        return "done"

    assert audit_training_loop(returns_a_string, 4).mistakes == {"bad_return_value"}

    def logs_last(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        n, logged = len(batches), []
        for i, (x, y) in enumerate(batches):
            share = example_share(batches, i, accumulation_steps)
            loss = loss_fn(model(x), y) * share
            loss.backward()
            if (i + 1) % accumulation_steps == 0 or i + 1 == n:
                optimizer.step()
                optimizer.zero_grad()
                logged.append(loss.item() / share)  # the last micro-batch, undone
        return logged

    assert audit_training_loop(logs_last, 4).mistakes == {"log_last_micro_batch"}


def test_the_uneven_final_group_dropped():
    def drops_tail(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        usable = len(batches) // accumulation_steps * accumulation_steps
        for i, (x, y) in enumerate(batches[:usable]):
            (loss_fn(model(x), y) / accumulation_steps).backward()
            if (i + 1) % accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()

    report = audit_training_loop(drops_tail, 4)
    assert report.mistakes == {"tail_dropped"}


def test_averaging_the_pile_instead_of_the_loss_is_accepted():
    def averages_grad(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        n = len(batches)
        for i, (x, y) in enumerate(batches):
            (loss_fn(model(x), y) * len(y)).backward()  # the summed loss of the micro-batch
            if (i + 1) % accumulation_steps == 0 or i + 1 == n:
                examples = sum(len(t) for _, t in batches[i - i % accumulation_steps : i + 1])
                for p in model.parameters():
                    p.grad /= examples
                optimizer.step()
                optimizer.zero_grad()

    report = audit_training_loop(averages_grad, 4)
    assert report.matches_reference, str(report)
    assert any("rescales .grad instead of the loss" in n for n in report.notes)


def test_a_loop_that_changes_the_weights_by_hand():
    def nudges(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        correct_loop(model, optimizer, loss_fn, batches, accumulation_steps)
        with torch.no_grad():
            model.weight.add_(0.01)

    report = audit_training_loop(nudges, 4)
    assert report.mistakes == {"differs_from_reference"}
    assert "max |difference| = 0.01" in report.findings[0]
