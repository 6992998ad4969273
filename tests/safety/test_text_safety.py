"""dissector.text_safety: the escape scheme, byte for byte."""
import pytest

from dissector.text_safety import escape


@pytest.mark.parametrize("raw, shown", [
    ("plain id-1.2_x", "plain id-1.2_x"),
    ("caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"),             # printable non-ASCII kept
    ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),                         # OSC title
    ("\x1b[2J", "\\x1b[2J"),
    ("a\\x1b", "a\\\\x1b"),                                             # a backslash is escaped
    ("\x00\t\n\r\x7f", "\\x00\\x09\\x0a\\x0d\\x7f"),
    ("\x85\x9b", "\\u0085\\u009b"),                                     # C1 code points
    ("\u202eevil\u200b\u2028", "\\u202eevil\\u200b\\u2028"),            # bidi, zero width, LS
    ("\U000e0001", "\\U000e0001"),
    ("bad\udcff", "bad\\xff"),                                          # surrogateescape'd byte
    (b"bad\xff\xc3(", "bad\\xff\\xc3("),                                # invalid UTF-8
    (b"\xc3\xa9\x1b", "\u00e9\\x1b"),
    (None, ""),
])
def test_escape(raw, shown):
    assert escape(raw) == shown


def test_output_is_printable_and_unambiguous():
    samples = ["\\", "\\\\", "\\x1b", "\x1b", "\\u0085", "\x85", b"\xff", "\\xff"]
    outs = [escape(s) for s in samples]
    assert len(set(outs)) == len(outs)
    assert all(o.isprintable() for o in outs)
