"""Where the CPU of a room's change goes, in one plain process: the bricks (beginner_1) and the explorer
(beginner_2) as their notebooks build them, each control on the page moved as `make hub-room`'s learners
move it (`hub.client.new_setting`, seeded), with CPU time (not wall time) around each change.

    python benchmarks/change_cost.py            # 300 changes of each picture

An explorer change at a setting not seen before trains its three runs, watched (`widgets.core.training`),
then draws and encodes the frame. Measured apart, by wrapping them from outside: the training, the drawing
and encoding (`render`; the bricks' `FastCanvas.png`), and, on the same settings again afterwards, the
lesson's loops alone, unwatched and unrecorded (fresh weights, optimizer and warmup each, as `_train` makes
them; the big- and small-batch runs only where the change had to train them). Watching and recording is
the training less the loops (the draws too); the rest (the readout, the controls' own traits) is the change
less both. 50 changes of each picture come first, unmeasured: a process's first runs cost more, and a
room's kernels have run their notebook's cells before a learner moves a control. With a room measured
(`benchmarks/hub_room.py`), the costs are weighted as its learners picked controls, beside what its
kernels and servers spent. Writes benchmarks/results/change_cost.json.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import platform
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import psutil  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's widgets/ and hub/
from hub.client import new_setting  # noqa: E402
from hub.sizing import measured_rooms  # noqa: E402
from widgets.core import loops, training  # noqa: E402
from widgets.draw.style import FastCanvas  # noqa: E402
from widgets.lessons.beginner_1 import make_bricks_widget  # noqa: E402
from widgets.lessons.beginner_2 import controls as explorer_module  # noqa: E402

RESULT = ROOT / "benchmarks" / "results" / "change_cost.json"


def on_page(widget) -> list:
    """The controls on the page a room's learner moves: `widget` and its boxes' children, as `Kernel.on_page`."""
    found, todo = [], [widget]
    while todo:
        w = todo.pop(0)
        todo += list(getattr(w, "children", ()))
        if new_setting(w.get_state(), random.Random(0)) is not None:
            found.append(w)
    return found


def walk(widget, changes: int, seed: int) -> list[float]:
    """Move `changes` controls of `widget` as the room does; the CPU milliseconds of each change."""
    rng, controls, spent = random.Random(seed), on_page(widget), []
    for _ in range(changes):
        control = rng.choice(controls)
        setting = new_setting(control.get_state(), rng)
        if setting is None:
            continue
        start = time.process_time()
        for name, value in setting.items():
            setattr(control, name, value)
        spent.append((time.process_time() - start) * 1e3)
    return spent


def bare_loops(config, draws, trained_references: bool) -> None:
    """The runs `run_regimes` made for `config` on `draws`, by the lesson's loops alone: no watch, no record."""
    K = config.accumulation_steps
    runs = [(getattr(loops, config.mistake or "train"), draws.micro, K)]
    if trained_references:
        runs += [(loops.train, draws.big, 1), (loops.train, draws.micro[::K], 1)]
    with training.known_torch_state(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Detected call of `lr_scheduler.step", UserWarning)
        for loop, batches, steps in runs:
            model = training.make_model(config.seed)
            optimizer = training.make_optimizer(config.optimizer, model.parameters(), config.learning_rate)
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, training.linear_warmup(config.warmup_updates))
            loop(model, optimizer, training.mse, batches, steps, scheduler, max_norm=config.max_grad_norm)


def measure_explorer(changes: int, seed: int) -> dict:
    trained, frames, spent = [], [], {"training": 0.0, "drawing": 0.0}
    references = training._draws_and_references

    def timed_run(config):
        hits, start = references.cache_info().hits, time.process_time()
        record = training.run_regimes(config)
        spent["training"] += time.process_time() - start
        missed = references.cache_info().hits == hits
        draws, _ = references(dataclasses.replace(config, mistake=None))  # there now: a hit, not timed
        trained.append((config, draws, missed))
        return record

    explorer_module.record_for = functools.lru_cache(maxsize=64)(timed_run)
    render = explorer_module.AccumulationExplorer.render

    def timed_render(self, full=False):
        start = time.process_time()
        render(self, full)
        spent["drawing"] += time.process_time() - start
        frames.append(len(self.image.value))

    explorer_module.AccumulationExplorer.render = timed_render
    explorer = explorer_module.make_accumulation_explorer(accumulation_steps=4, micro_batch_size=2)  # beginner_2's
    walk(explorer, 50, seed + 1)  # first calls cost more (a notebook's cells have made them in a room's kernel)
    trained.clear()
    frames.clear()
    spent.update(training=0.0, drawing=0.0)
    redrawn = sum(c.full_redraws for c in explorer.canvases)
    per_change = walk(explorer, changes, seed)
    start = time.process_time()
    for config, draws, trained_references in trained:
        bare_loops(config, draws, trained_references)
    loops_s = time.process_time() - start
    n = len(per_change)
    total = sum(per_change) / n
    training_ms, drawing_ms, loops_ms = (spent["training"] * 1e3 / n, spent["drawing"] * 1e3 / n, loops_s * 1e3 / n)
    return {
        "changes": n, "new_runs": len(trained), "panels_redrawn_in_full": sum(c.full_redraws for c in explorer.canvases) - redrawn,
        "cpu_ms_mean": round(total, 1), "cpu_ms_median": round(statistics.median(per_change), 1),
        "mean_ms": {"training": round(training_ms, 1), "of_which_the_loops_alone": round(loops_ms, 1),
                    "of_which_watching_and_recording": round(training_ms - loops_ms, 1), "drawing_and_encoding": round(drawing_ms, 1),
                    "rest": round(total - training_ms - drawing_ms, 1)},
        "frame_kb_mean": round(statistics.mean(frames) / 1024, 1),  # the PNG each new frame sends
        "controls": descriptions(explorer),
    }


def measure_bricks(changes: int, seed: int) -> dict:
    spent, png = [0.0], FastCanvas.png

    def timed_png(self, full=False):
        start = time.process_time()
        frame = png(self, full)
        spent[0] += time.process_time() - start
        return frame

    FastCanvas.png = timed_png
    bricks = make_bricks_widget(micro_batch_size=5, accumulation_steps=4)  # beginner_1's
    walk(bricks, 50, seed + 1)
    spent[0] = 0.0
    per_change = walk(bricks, changes, seed)
    n = len(per_change)
    return {"changes": n, "cpu_ms_mean": round(sum(per_change) / n, 1), "cpu_ms_median": round(statistics.median(per_change), 1),
            "mean_ms": {"drawing_and_encoding": round(spent[0] * 1e3 / n, 1)}, "controls": descriptions(bricks)}


def descriptions(widget) -> list[str]:
    return [control.description for control in on_page(widget)]


def room_mix(measured: dict) -> dict | None:
    """These costs weighted as the largest room measured picked its controls, beside what its kernels spent."""
    rooms = measured_rooms()
    if not rooms:
        return None
    room = rooms[-1]
    by_control, total = room["changes_by_control"], room["changes"]
    share = {name: sum(by_control.get(c, 0) for c in measured[name]["controls"]) / total for name in ("explorer", "bricks")}
    mix = sum(share[n] * measured[n]["cpu_ms_mean"] for n in share)
    drawing = sum(share[n] * measured[n]["mean_ms"]["drawing_and_encoding"] for n in share)
    return {"room": f"hub_room_{room['learners']}.json", "share_of_changes": {**{n: round(v, 3) for n, v in share.items()},
                                                         "other (no picture)": round(1 - sum(share.values()), 3)},
            "kernel_ms_per_change_here": round(mix, 1), "of_which_drawing_and_encoding": round(drawing, 1),
            "room_kernels_ms_per_change": room["cpu_ms_by_process"]["kernels"]["median"],
            "room_server_ms_per_change": room["cpu_ms_by_process"]["server"]["median"],
            "room_all_ms_per_change": room["cpu_ms_per_change"]["median"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=300, help="changes of each picture (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not 10 <= args.changes <= 10_000:
        parser.error(f"--changes must be from 10 to 10000, got {args.changes}")
    torch.set_num_threads(1)  # what the lab's runs use (`known_torch_state`); the bare loops too
    result = {"explorer": measure_explorer(args.changes, args.seed), "bricks": measure_bricks(args.changes, args.seed)}
    result |= {"room_mix": room_mix(result),
              "command": "python benchmarks/change_cost.py" + (f" --changes {args.changes}" if args.changes != 300 else ""),
              "measured_on": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {psutil.cpu_count()} cores",
              "torch": torch.__version__}
    RESULT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
