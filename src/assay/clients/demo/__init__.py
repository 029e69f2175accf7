"""`assay demo`: the bundled "front office" benchmark (`front_office/`, a benchmark package) worked
end to end by a scripted reference agent (`agent.py`) against an in-process service (`runner.py`)."""

from __future__ import annotations

from assay.clients.demo.runner import PACKAGE, DemoResult, run_demo

__all__ = ["PACKAGE", "DemoResult", "run_demo"]
