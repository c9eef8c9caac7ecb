"""What recall put into a request, for the channels' end-to-end memory tests."""

from __future__ import annotations

import json
from typing import Any


def recalled(body: dict[str, Any]) -> str:
    """The recalled-memory block of the request's last user message ("" when none)."""
    text = json.dumps(body["messages"][-1], ensure_ascii=False)
    start = text.find("<recalled_memory>")
    return "" if start < 0 else text[start : text.find("</recalled_memory>")]
