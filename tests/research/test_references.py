"""The cited works: every key the notebooks use exists, and an unknown key is refused by name."""
import pytest

from widgets.research.references import REFERENCES, cite


def test_cite_numbers_the_works_in_order():
    text = cite("gao2021", "ioffe2015")
    assert text.startswith("[1] Gao") and "\n[2] Ioffe" in text


def test_the_2024_bug_is_cited_with_its_threads():
    for thread in ("trl issue #2175", "transformers PR #34191", "torchtune PR #1875"):
        assert thread in REFERENCES["ga_bug_2024"]


@pytest.mark.parametrize("keys, match", [((), "at least one"), (("smith1999",), "unknown")])
def test_bad_keys_are_refused(keys, match):
    with pytest.raises(ValueError, match=match):
        cite(*keys)
