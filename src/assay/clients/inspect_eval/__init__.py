"""Inspect AI integration (the `inspect` extra): `inspect eval assay/benchmark -T benchmark=slug@version
-T url=… --model …` runs a published Assay benchmark. See `task.py`."""
