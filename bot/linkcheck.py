"""Whether a link the model wrote would mislead: its visible text names another address.

`[https://good.example](https://evil.example/phish)` shows one address and opens another. The
channels ask `misleading(label, target)` before they render a live link; a misleading one is
shown as its text followed by the real address, so the reader sees where it goes. A label names
an address when one of its words is a URL (`scheme://...`) or a host (`name.tld`, a path
allowed); it matches the target when the hosts are the same and the target's address begins with
what the label shows. The label is compared as a reader sees it: compatibility forms folded
(NFKC: a fullwidth dot is a dot) and invisible characters dropped.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

# A word that reads as an address: a scheme, or dotted labels ending in a top-level name of
# letters (so "version 1.2" and "e.g." are words, "good.example" and "пример.рф" are hosts).
_URL = re.compile(r"^[^\W\d_][\w+.-]*://\S*$")
_HOST = re.compile(r"^(?:[^\W_](?:[\w-]*[^\W_])?\.)+[^\W\d_]{2,}\.?(?::\d+)?(?:[/?#]\S*)?$")
_TRIM = "()[]{}<>\"'«»‹›“”‘’,;!?"


def misleading(label: str, target: str) -> bool:
    """True when `label`, shown as a link to `target`, names an address other than `target`."""
    wanted = _address(target if "://" in target else f"//{target}")
    for word in _reader_text(label).split():
        word = word.strip(_TRIM).rstrip(".:")
        if _URL.match(word):
            shown = _address(word)
        elif _HOST.match(word):
            shown = _address(f"//{word}")
        else:
            continue
        if shown is None or wanted is None or not _covers(shown, wanted):
            return True
    return False


def _reader_text(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text)
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def _address(url: str) -> tuple[str, str] | None:
    """(host, the rest) of a URL, in the form two spellings of one address share."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".").lower()
    except ValueError:
        return None
    if not host:
        return None
    rest = parts.path.rstrip("/") + (f"?{parts.query}" if parts.query else "")
    return host, rest


def _covers(shown: tuple[str, str], wanted: tuple[str, str]) -> bool:
    shown_host, shown_rest = shown
    wanted_host, wanted_rest = wanted
    host_of = shown_host.removeprefix("www.") == wanted_host.removeprefix("www.")
    return host_of and wanted_rest.startswith(shown_rest)
