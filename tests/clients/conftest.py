"""The client package's tests run against a served askhuman (``tests/api``'s door).

This tree's ``clients/python`` goes first on the path, so the tests exercise the
package next to them whatever copy is installed in the environment.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from tests.api.conftest import ci, door, fake_feishu, fake_slack, settings  # noqa: F401
