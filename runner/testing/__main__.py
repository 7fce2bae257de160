"""``python -m runner.testing serve SCRIPT``: serve a script until Ctrl+C."""

from __future__ import annotations

import sys

from runner.testing.server import main

sys.exit(main())
