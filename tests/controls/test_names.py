"""`Picture` and `name_picture`: a live figure's text alternative (under ipywidgets 8, its title)."""
from widgets.controls.names import Picture, name_picture


def test_name_picture_sets_the_text_alternative_and_returns_the_image():
    image = Picture(format="png")
    assert name_picture(image, "The bricks: 4 trips of 5") is image
    if image.has_trait("tooltip"):  # ipywidgets 8
        assert image.tooltip == "The bricks: 4 trips of 5"


def test_the_front_end_receives_an_empty_description_beside_the_tooltip():
    """ipywidgets 8's view sets the title only when `description` is "" (and fails when it is missing)."""
    state = name_picture(Picture(format="png"), "a figure").get_state()
    assert state["description"] == "" and state.get("tooltip", "a figure") == "a figure"
