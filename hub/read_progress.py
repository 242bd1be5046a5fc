"""Run *as the learner* by the room view: print their progress records as JSON on stdout.

The room view runs as root; reading a learner's file as root would follow whatever the learner put
at that path (a symlink to a root-only file). Run with the learner's uid, this script reads only
what the learner can read, and changes nothing: `read_records` takes no lock and writes nothing.
"""
import json
import sys
from dataclasses import asdict

from widgets.lab.progress import ProgressError, read_records

try:
    records = [asdict(r) for r in read_records()]  # $HOME/.gradient-accumulation-lab/progress.json
    print(json.dumps({"records": records, "problem": None}))
except ProgressError as error:
    print(json.dumps({"records": [], "problem": str(error)}))
sys.stdout.flush()
