"""Run *as the learner* by the room view and the export: print their progress file as JSON on stdout.

The room view runs as root; reading a learner's file as root would follow whatever the learner put
at that path (a symlink to a root-only file). Run with the learner's uid, this script reads only
what the learner can read, and changes nothing: `read_store` takes no lock and writes nothing.
"""
import json
import sys

from widgets.lab.progress import ProgressError, read_store

try:
    store = read_store()  # $HOME/.gradient-accumulation-lab/progress.json
    print(json.dumps({"sets": store["sets"], "records": store["records"], "problem": None}))
except ProgressError as error:
    print(json.dumps({"sets": {}, "records": [], "problem": str(error)}))
sys.stdout.flush()
