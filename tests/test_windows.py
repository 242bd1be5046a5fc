"""As on Windows (no fcntl, resource, pwd, grp, SIGALRM, setitimer, fork): every module of `widgets`
imports, an exercise checks, an audit judges a correct loop and stops one that never ends."""
import os
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import importlib.util, os, signal, sys
    import torch  # torch's own Linux build registers fork handlers: loaded before the names go
    for name in ("fcntl", "resource", "pwd", "grp"):
        sys.modules[name] = None  # import raises ImportError, as on Windows
    for name in ("SIGALRM", "setitimer", "getitimer", "ITIMER_REAL"):
        if hasattr(signal, name):
            delattr(signal, name)
    for name in ("fork", "register_at_fork"):
        if hasattr(os, name):
            delattr(os, name)
    from pathlib import Path
    root = Path(importlib.util.find_spec("widgets").origin).parent
    names = sorted(".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
                   for p in root.rglob("*.py"))
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:
            failed.append(f"{name}: {type(error).__name__}: {error}")
    print("FAILED", len(failed), "of", len(names))
    print("\\n".join(failed))

    from widgets.lessons.developer_2 import loop_exercises
    from widgets.lessons.developer_2.exercises import is_boundary
    ex = loop_exercises()
    print("RIGHT", ex.boundary.check(is_boundary).correct)
    print("WRONG", ex.boundary.check(lambda m, k, t: (m + 1) % k == 0).correct)

    from widgets.audit import audit_training_loop
    from widgets.core.loops import train_loop
    report = audit_training_loop(train_loop, 4)
    print("AUDIT", report.matches_reference, sorted(report.mistakes))

    def spins(model, optimizer, loss_fn, batches, accumulation_steps, scheduler=None):
        while True:
            pass
    print("STOPPED", sorted(audit_training_loop(spins, 4, time_limit_s=0.5).mistakes))
""")


def test_widgets_work_without_the_unix_only_modules(tmp_path):
    env = dict(os.environ, LAB_PROGRESS_FILE=str(tmp_path / "progress.json"))
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "FAILED 0 of" in out, out
    assert "RIGHT True" in out and "WRONG False" in out, out
    assert "AUDIT True []" in out and "STOPPED ['time_limit']" in out, out
    assert (tmp_path / "progress.json").exists()
