"""A command hook: reads the hook event (JSON) on stdin and appends one line to turns.log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

event = json.load(sys.stdin)
last = next((m for m in reversed(event["messages"]) if m["role"] == "assistant"), None)
answer = (last or {}).get("content") or ""
with Path("turns.log").open("a", encoding="utf-8") as log:
    log.write(f"{event['session_id']} turn {event['turn']}: {len(answer)} chars\n")
