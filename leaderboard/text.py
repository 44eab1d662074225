"""Strings read from result files, made safe for where they are shown.

A ``results.json``, a run folder's name or a ``metrics.csv`` may come from anyone (a results folder made
elsewhere, ``bench leaderboard --check`` before a merge), so nothing they hold may act as markup or as a
terminal command where pebench shows it:

* :func:`terminal_safe`: for ``bench runs``, ``bench runs show`` and the problems ``bench leaderboard`` prints.
  Control characters (C0 and C1: ESC, ``\\r``, ``\\x9b`` (CSI), BEL, ...), format characters (bidirectional
  overrides, zero-width characters), line and paragraph separators and lone surrogates are written as their
  escape (``\\x1b``), so no file can move the cursor, clear the screen, set the window title or reorder
  what is shown; every other character is kept.
* :func:`html_escape`: text and attribute values of the HTML page and its inline SVG (``&``, ``<``, ``>``,
  ``"`` and ``'`` escaped: the same call is right in both places).
* :func:`relative_href` / :func:`fragment_href`: link targets built from folder names, always relative and
  percent-encoded, so a folder named ``javascript:alert(1)`` is a link to that folder, never a scheme.
* :func:`encodable`: the text of an output file with lone surrogates (``"\\ud800"`` in a JSON string, a
  non-UTF-8 file name) written as escapes, so writing it as UTF-8 cannot fail.
"""
from __future__ import annotations

import html
import unicodedata
from urllib.parse import quote

__all__ = ["terminal_safe", "html_escape", "relative_href", "fragment_href", "encodable"]

#: Unicode categories :func:`terminal_safe` escapes: controls, format characters (bidi overrides, zero-width),
#: surrogates (cannot be written as UTF-8), line and paragraph separators
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: characters a path segment keeps unencoded besides letters, digits and ``_.-~`` (``+`` in ``ape+rpt``,
#: ``=`` and ``,`` in option folders); ``:``, ``/``, ``\\``, ``%``, ``?``, ``#`` and everything else are encoded
_SEGMENT_SAFE = "+=,@"


def _escape_char(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def terminal_safe(s: object) -> str:
    """``s`` (``str()`` of it when not a string) with every character that could act on a terminal written as
    its Python escape (``"\\x1b[2J"`` -> ``"\\\\x1b[2J"``); see the module docstring. Idempotent: what it
    returns is left as it is."""
    text = s if isinstance(s, str) else str(s)
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to look at
    return "".join(_escape_char(c) if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in text)


def html_escape(s: object) -> str:
    """``s`` as HTML text or as a quoted attribute value (``html.escape`` with ``quote=True``)."""
    return html.escape(s if isinstance(s, str) else str(s), quote=True)


def relative_href(*parts: str) -> str:
    """A relative link to ``parts`` joined by ``/`` (each part may hold several ``/``-separated segments):
    every segment percent-encoded (``:`` included, so no segment can start a scheme such as ``javascript:``;
    ``\\``, ``?``, ``#`` and ``%`` too), empty and ``.`` segments dropped (no ``//`` that would make the link
    absolute or protocol-relative), and ``./`` in front when the first segment held a ``:``. Returns ``./``
    for no segment. The result still needs :func:`html_escape` (a no-op on it) where it is an attribute."""
    segments = [seg for part in parts for seg in str(part).split("/") if seg not in ("", ".")]
    if not segments:
        return "./"
    url = "/".join(quote(seg, safe=_SEGMENT_SAFE, errors="backslashreplace") for seg in segments)
    return f"./{url}" if ":" in segments[0] else url


def fragment_href(name: str) -> str:
    """``#<name>`` for an element whose ``id`` is ``name``, percent-encoded (a browser decodes the fragment
    before it looks for the id)."""
    return "#" + quote(name, safe=_SEGMENT_SAFE, errors="backslashreplace")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``), so ``text.encode("utf-8")``
    cannot fail; any other text is returned as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
