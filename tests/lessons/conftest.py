"""The researcher lessons' models are tiny: one CPU thread runs them faster than two (and far faster on a
busy machine). The beginner and developer lessons keep torch's threads as a learner's kernel has them."""
import pytest

from widgets.core.threads import one_thread


@pytest.fixture(autouse=True, scope="module")
def _one_thread_for_researcher_lessons(request):
    if "researcher_" not in request.path.parent.name:
        yield
        return
    with one_thread():
        yield
