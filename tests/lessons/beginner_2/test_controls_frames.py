"""The explorer's frames after new axis limits: whichever path drew them, the pixels of a full redraw."""
import io

import numpy as np
from PIL import Image

from widgets.lessons.beginner_2.controls import make_accumulation_explorer


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def test_every_frame_of_a_session_equals_a_full_redraw():
    explorer = make_accumulation_explorer()
    moves = [("mistake", "loss_not_divided"), ("accumulation_steps", 16), ("micro_batch_size", 64),
             ("mistake", ""), ("accumulation_steps", 1), ("optimizer", "adamw")]
    for name, value in moves:
        explorer.controls[name].value = value
        frame = _pixels(explorer.image.value)
        explorer.render(full=True)
        assert int(np.abs(frame - _pixels(explorer.image.value)).max()) == 0, f"after {name}={value}"
