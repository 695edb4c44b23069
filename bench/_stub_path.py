"""Put `tests/` on `sys.path`, so a bench imports the HTTP provider stand-ins.

The stubs (`OpenAIStub`, `AnthropicStub`) are test infrastructure in `tests/provider_stubs`,
outside the wheel. A bench that uses one imports this module first (`import _stub_path`),
then `provider_stubs.<name>`; importing it twice inserts the path once.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parents[1] / "tests")
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
