"""URLs made safe to show, print or store: no password, no key.

A gateway URL may be configured as ``http://user:pass@host:4000`` and a webhook or an
``api_base`` may carry ``?token=…``. Whatever reads a URL into something a person sees
or a file keeps (a snapshot, a screen, ``status --json``, a recording, an export) takes
it through :func:`redact_url`, once, where it enters: the userinfo before ``@`` becomes
``***`` and the value of every query parameter whose name looks like a credential
(token, key, password, secret, sig, auth, session, …) becomes ``***``. The URL the
console connects to is kept apart and never shown.

It works on any text, not only a bare URL: an error message holding a URL is
redacted in place. Pure; one search on text with no URL in it.
"""

from __future__ import annotations

import re

MASK = "***"

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#@\s\"'<>]*@")
_CREDENTIAL = re.compile(
    r"(?i)([?&;](?:[^=&;#\s\"'<>]*?)"
    r"(?:token|key|pass|pwd|secret|sig|auth|credential|session|jwt|bearer|cookie)"
    r"[^=&;#\s\"'<>]*=)[^&;#\s\"'<>]*")
_HINT = re.compile(r"(?i)@|[?&;][^=\s]*=")


def redact_url(text: str) -> str:
    """``text`` with every URL's userinfo and credential-looking query values masked."""
    if _HINT.search(text) is None:
        return text
    return _CREDENTIAL.sub(r"\1" + MASK, _USERINFO.sub(r"\1" + MASK + "@", text))
