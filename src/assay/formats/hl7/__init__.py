"""HL7v2: reading raw messages, the path grammar and escapes (docs/assertions.md).

Parsing is python-hl7's (`hl7.parse`); this package puts our own layer on top: input
normalisation and batch splitting (`_reader`), the message model and access (`_message`), the
path grammar (`_path`) and escape sequences (`_escapes`). Imports nothing else from `assay`.
"""

from assay.formats.hl7._errors import Hl7ParseError, Hl7PathError
from assay.formats.hl7._escapes import DEFAULT_DELIMITERS, Delimiters, escape, unescape
from assay.formats.hl7._message import ABSENT, Hl7Message, Hl7Value
from assay.formats.hl7._path import Hl7Path
from assay.formats.hl7._reader import Hl7Header, parse_header, parse_message, parse_messages

__all__ = [
    "ABSENT",
    "DEFAULT_DELIMITERS",
    "Delimiters",
    "Hl7Header",
    "Hl7Message",
    "Hl7ParseError",
    "Hl7Path",
    "Hl7PathError",
    "Hl7Value",
    "escape",
    "parse_header",
    "parse_message",
    "parse_messages",
    "unescape",
]
