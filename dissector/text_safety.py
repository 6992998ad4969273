"""Strings from a capture made safe for a terminal.

A client id, topic or header key is whatever the capture's sender wrote: an escape sequence in it
would retitle, clear or reprogram the terminal of whoever reads the capture, and `[/]` in it
would be rich markup. Everything a command prints from a capture goes through `escape`, never
through an f-string straight to the terminal; rich tables and the browser show the escaped text
as a rich Text, which rich never reads as markup.

The scheme (unambiguous: the original bytes can be read back from the output):

- `\\`     a backslash (escaped first, so that every other backslash starts an escape);
- `\\xNN`  one byte: an ASCII control character (C0 `\\x00`-`\\x1f`, DEL `\\x7f`), or a byte
           that is not part of valid UTF-8 (`\\x80`-`\\xff`: from bytes, from an `InvalidUtf8`,
           or from a str decoded with errors="surrogateescape");
- `\\uNNNN` / `\\UNNNNNNNN` any other code point Python does not call printable
           (`str.isprintable`): C1 controls (`\\u009b`), bidirectional overrides (`\\u202e`),
           zero-width and line/paragraph separators, unassigned code points.

Printable text, spaces included, is left as it is.
"""
from __future__ import annotations


class InvalidUtf8(str):
    """A capture string that is not valid UTF-8: the text with U+FFFD for each bad sequence
    (what exports, tables and filters see, as in Wireshark), remembering its bytes in `raw` so
    that a terminal shows them (`\\xff`) and the resync can tell a false header."""

    def __new__(cls, raw: bytes):
        self = super().__new__(cls, raw.decode("utf-8", "replace"))
        self.raw = raw
        return self

    def __reduce__(self):   # pickled (--jobs workers) as what makes it
        return InvalidUtf8, (self.raw,)


def decode_text(raw: bytes) -> str:
    """A capture's UTF-8 string: a str, or an InvalidUtf8 when the bytes are not valid."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return InvalidUtf8(raw)


def _escape_char(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    if ch.isprintable():
        return ch
    cp = ord(ch)
    if cp < 0x80:
        return f"\\x{cp:02x}"
    if 0xDC80 <= cp <= 0xDCFF:   # surrogateescape's stand-in for an invalid byte
        return f"\\x{cp - 0xDC00:02x}"
    return _code_point(cp)


def _code_point(cp: int) -> str:
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def escape(value: str | bytes | bytearray | memoryview | None) -> str:
    """`value` as terminal-safe text (the scheme above); None as "". Bytes are read as UTF-8,
    their invalid bytes shown as `\\xNN`."""
    if value is None:
        return ""
    if isinstance(value, InvalidUtf8):
        value = value.raw
    if not isinstance(value, str):
        value = bytes(value).decode("utf-8", "surrogateescape")
    if value.isprintable() and "\\" not in value:   # the usual case, at C speed
        return value
    return "".join(map(_escape_char, value))


# What a terminal whose encoding lacks a character shows instead (fit_stdout): our own symbols
# as their ASCII look-alikes, any other character as its escape above (\uNNNN), so that a
# latin-1 or ASCII locale gets every line, not a UnicodeEncodeError.
_LOOK_ALIKES = {"\u2192": "->"}
_ERRORS = "kafka-dissect-terminal"


def _unencodable(exc):
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    shown = (_LOOK_ALIKES.get(ch) or _code_point(ord(ch)) for ch in exc.object[exc.start:exc.end])
    return "".join(shown), exc.end


def fit_stdout() -> None:
    """Standard output in an encoding without the characters the commands print (a latin-1 or
    ASCII locale): those characters written as _unencodable says. Nothing to do for UTF-8."""
    import codecs
    import sys
    out = sys.stdout
    encoding = getattr(out, "encoding", None)
    if not encoding or not hasattr(out, "reconfigure"):
        return
    try:
        "\u2192".encode(encoding)
        return
    except (UnicodeEncodeError, LookupError):
        pass
    codecs.register_error(_ERRORS, _unencodable)
    out.reconfigure(errors=_ERRORS)
