"""Training ahead: the explorer's kept records, and the settings one move away trained while idle.

A setting is trained once and its record kept. Right after a slider moves a notch, the next notch
the same way is trained in the kernel's idle time (a learner pressing an arrow key again finds it
ready); once the learner pauses (`QUIET_S`), the other settings one move away (K and b a notch
either way, a main mistake chosen or dropped, the optimizer switched, the sliders' ends) are trained too, one per
event-loop turn, with the backgrounds their axis limits need. Outside a kernel (a script, a test)
nothing runs in the background: `train_ahead` does the same work on request.

Only where one learner has the machine (`trains_ahead_here`): under JupyterHub (a hub room, Binder's
shared nodes) every idle explorer's work ahead competes for the same cores, and a room of learners
waits longer for it than for training on request (`benchmarks/benchmark.py --room 20`, README).
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import weakref
from collections import OrderedDict

from widgets.core.config import OPTIMIZER_NAMES, AccumulationConfig
from widgets.core.shared import B_RANGE, K_RANGE  # the slider ranges
from widgets.core.training import RunRecord, run_regimes

_RECORDS_KEPT = 64  # records of settings shown, each a few kB; as many again trained ahead, never shown
AHEAD_PER_CHANGE = 12  # settings trained ahead after one change, at most (see `_moves_away`)
IDLE_GAP_S = 0.02  # between two steps ahead: the kernel's event loop reads a waiting message first
QUIET_S = 0.3  # no change for this long: the learner is reading, train the other moves ahead
TRAIN_AHEAD_ENV = "LAB_TRAIN_AHEAD"  # on | off | unset: train ahead unless JupyterHub serves the kernel


def trains_ahead_here(environ=os.environ) -> bool:
    """Does the explorer train ahead in this kernel's idle time? LAB_TRAIN_AHEAD=on or off decides;
    unset, it does unless JupyterHub started the server (JUPYTERHUB_USER is set: a hub room, Binder),
    where several learners share the cores."""
    setting = environ.get(TRAIN_AHEAD_ENV, "").strip().lower()
    if setting not in ("", "on", "off"):
        raise ValueError(f"{TRAIN_AHEAD_ENV} must be 'on' or 'off' (or unset), got {environ[TRAIN_AHEAD_ENV]!r}")
    return setting == "on" if setting else "JUPYTERHUB_USER" not in environ


class TrainsAhead:
    """The explorer's records, kept, and its work ahead; a base class of `AccumulationExplorer`.

    The explorer calls `_start_ahead(main_mistakes)` before its first `_record_for(config)` (the record
    to show, trained or reused), `_plan_ahead(config, values, before)` after each change (values:
    its controls' values now and before the change) and `_stop_ahead()` when it closes. It provides
    `controls` (name -> widget, in the order of those values), `closed`, and `_prepare_frame(record)`,
    which draws the background showing `record` would need."""

    def _start_ahead(self, main_mistakes: tuple[str, ...]) -> None:
        self._main_mistakes = main_mistakes  # first in the dropdown: choosing one (or none) is one move
        self._records: OrderedDict[AccumulationConfig, RunRecord] = OrderedDict()  # shown
        self._ahead_records: OrderedDict[AccumulationConfig, RunRecord] = OrderedDict()  # trained ahead
        self._ahead: list[AccumulationConfig] = []  # settings one move away, to train while idle
        self._plan: tuple | None = None  # (config, control values, values before): `_ahead` not listed yet
        self._frames_ahead: list[RunRecord] = []  # trained ahead; their backgrounds drawn once all are trained
        self._idle_call: asyncio.TimerHandle | None = None
        self._quiet = False  # has the learner paused since the last change (see `_train_one_ahead`)?
        self._notch: AccumulationConfig | None = None  # the next notch of the slider just moved, the same way
        self._in_idle_time = trains_ahead_here()  # else `train_ahead` runs only on request

    def _record_for(self, config: AccumulationConfig, ahead: bool = False) -> RunRecord:
        """Run (or reuse) the three regimes for `config`. Shown records and records trained `ahead`
        are kept apart, each the last `_RECORDS_KEPT`, so training ahead never evicts a shown one."""
        if config in self._records:
            self._records.move_to_end(config)
            return self._records[config]
        record = self._ahead_records.pop(config, None)
        if record is None:
            record = run_regimes(config)  # under known_torch_state: a learner's float16 changes no verdict
        kept = self._ahead_records if ahead else self._records
        kept[config] = record
        if len(kept) > _RECORDS_KEPT:
            kept.popitem(last=False)
        return record

    def _plan_ahead(self, config: AccumulationConfig, values: tuple, before: tuple) -> None:
        """Drop what the last change planned; plan the moves from `config` (listed when idle)."""
        self._plan, self._ahead, self._frames_ahead, self._quiet = (config, values, before), [], [], False
        if self._idle_call is not None:
            self._idle_call.cancel()
            self._idle_call = None
        self._train_ahead_when_idle(0.0)  # at the loop's next turn: the new frame is already on its way

    def _train_ahead_when_idle(self, delay: float) -> None:
        """In a kernel, queue one step ahead on its event loop (which runs widget callbacks too).
        Outside one (a script, a test) nothing runs in the background: `train_ahead` does it on request."""
        if (not self._in_idle_time or self._idle_call is not None or self.closed
                or not (self._plan or self._ahead or self._frames_ahead)):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._idle_call = loop.call_later(delay, _train_one_ahead, weakref.ref(self))

    def train_ahead(self, max_steps: int | None = None, seconds: float | None = None, *,
                    next_notch_only: bool = False) -> int:
        """Work ahead for the settings one move from the last change, until all is done, `max_steps`
        were taken or `seconds` passed; returns the steps taken. A step trains one setting or, once
        all are trained, draws the background one of them needs (new axis limits: a redraw of the
        text). `next_notch_only`: only the next notch of the slider just moved, the same way (what
        the kernel does before the learner pauses). The list is made here, off the slider's path.
        A setting that fails is dropped (moving there shows why)."""
        if self._plan is not None:
            config, values, before = self._plan
            self._plan = None
            kept = self.trained_settings()
            notch = _next_notch(config, values, before, list(self.controls))
            self._ahead = [c for c in ([notch] if notch else []) + _moves_away(config, self._main_mistakes) if c not in kept]
            self._ahead = list(dict.fromkeys(self._ahead))[:AHEAD_PER_CHANGE]
            self._notch = notch
        if next_notch_only:
            if not self._ahead or self._ahead[0] != self._notch:
                return 0
            max_steps = 1
        elif not self.closed:
            self.canvas.remember_boxes_now()  # the last frame's Axes extents, left for idle time
        start, steps = time.perf_counter(), 0
        while (self._ahead or self._frames_ahead) and (max_steps is None or steps < max_steps) and not self.closed:
            if seconds is not None and time.perf_counter() - start >= seconds:
                break
            try:
                if self._ahead:
                    config = self._ahead.pop(0)
                    if config in self._records or config in self._ahead_records:
                        continue
                    self._frames_ahead.append(self._record_for(config, ahead=True))
                else:
                    self._prepare_frame(self._frames_ahead.pop(0))
            except Exception:  # noqa: BLE001 - a neighbour that cannot run is simply not ready
                continue
            steps += 1
        return steps

    def trained_settings(self) -> frozenset[AccumulationConfig]:
        """The settings whose runs are kept: showing one of them only redraws."""
        return frozenset(self._records) | frozenset(self._ahead_records)

    def _stop_ahead(self) -> None:
        """Stop training ahead and drop the kept records (the explorer is closing)."""
        self._ahead, self._plan, self._frames_ahead = [], None, []
        if self._idle_call is not None:
            self._idle_call.cancel()
            self._idle_call = None
        self._records, self._ahead_records = OrderedDict(), OrderedDict()


def _next_notch(config: AccumulationConfig, values: tuple, before: tuple, names: list[str]) -> AccumulationConfig | None:
    """The next notch, the same way, of the K or b slider that just moved (None: neither moved,
    or the config refuses it)."""
    moved = {n: (v, old) for n, v, old in zip(names, values, before) if v != old}
    for name in ("accumulation_steps", "micro_batch_size"):
        if name in moved:
            new, old = moved[name]
            found = _settings_from(config, [{name: new + (1 if new > old else -1)}])
            return found[0] if found else None
    return None


def _moves_away(config: AccumulationConfig, main_mistakes: tuple[str, ...]) -> list[AccumulationConfig]:
    """The settings one move from `config`, likeliest first: K and b one notch either way; one of
    `main_mistakes` chosen (or dropped, if chosen), the optimizer switched; K's and b's ends."""
    K, b = config.accumulation_steps, config.micro_batch_size
    steps = [{"accumulation_steps": K + 1}, {"accumulation_steps": K - 1},
             {"micro_batch_size": b + 1}, {"micro_batch_size": b - 1}]
    steps += [{"mistake": None if config.mistake == m else m} for m in main_mistakes]
    steps += [{"optimizer": name} for name in OPTIMIZER_NAMES if name != config.optimizer]
    steps += [{"accumulation_steps": k} for k in K_RANGE] + [{"micro_batch_size": m} for m in B_RANGE]
    return _settings_from(config, steps)


def _settings_from(config: AccumulationConfig, steps: list[dict]) -> list[AccumulationConfig]:
    """`config` with each change in `steps` made, in order, without repeats or `config` itself;
    settings the sliders or the config refuse (K x b over the examples, a tail >= K) are left out."""
    K, b = config.accumulation_steps, config.micro_batch_size
    found: list[AccumulationConfig] = []
    for change in steps:
        k = change.get("accumulation_steps", K)
        if not (K_RANGE[0] <= k <= K_RANGE[1] and B_RANGE[0] <= change.get("micro_batch_size", b) <= B_RANGE[1]):
            continue
        try:  # the tail slider's max follows K, which clamps the tail
            neighbour = dataclasses.replace(config, tail_micro_batches=min(config.tail_micro_batches, k - 1), **change)
        except ValueError:
            continue
        if neighbour != config and neighbour not in found:
            found.append(neighbour)
    return found


def _train_one_ahead(ref: weakref.ref) -> None:
    """One step ahead in the kernel's event loop, then the next one queued after a short gap, so that
    a message waiting (the learner's next move) is read in between. Holds the explorer weakly."""
    explorer = ref()
    if explorer is None:
        return
    explorer._idle_call = None
    try:
        if explorer._quiet:
            explorer.train_ahead(max_steps=1)
            explorer._train_ahead_when_idle(IDLE_GAP_S)
        else:  # right after a change: only the next notch; the rest once the learner pauses
            explorer.train_ahead(next_notch_only=True)
            explorer._quiet = True
            explorer._train_ahead_when_idle(QUIET_S)
    except Exception:  # noqa: BLE001 - work ahead is optional; an error would print in a later cell
        explorer._plan, explorer._ahead, explorer._frames_ahead = None, [], []
