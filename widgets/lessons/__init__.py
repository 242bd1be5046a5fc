"""One folder per notebook: its `__init__.py` imports what the notebook uses; a file's name tells its role."""
