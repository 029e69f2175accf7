"""X12 005010 for the clearinghouse and the `x12-response` check (docs/assertions.md, docs/sandboxes.md).

Tokenizer (`_tokenizer`), envelope model (`_model`, assembled by `_parser`), loop tables
(`_guides`) and resolver (`_loops`), loop-aware paths (`_path`) and the writer with its builder
(`_writer`), acknowledgements (`_acks`: TA1, 999). Nothing here imports anything else from `assay`.
"""

from assay.formats.x12._acks import (
    ElementError,
    EnvelopeProblem,
    GroupAck,
    SegmentError,
    TransactionAck,
    build_999,
    build_ta1,
    envelope_problem,
)
from assay.formats.x12._errors import X12ParseError, X12PathError
from assay.formats.x12._guides import GUIDES, Guide, LoopRule, guide_for
from assay.formats.x12._loops import X12Loop, resolve_loops
from assay.formats.x12._model import (
    ACKNOWLEDGEMENTS,
    DEFAULT_DELIMITERS,
    Delimiters,
    X12Document,
    X12FunctionalGroup,
    X12Interchange,
    X12Segment,
    X12TransactionSet,
)
from assay.formats.x12._parser import decode_x12, parse_x12
from assay.formats.x12._path import X12Filter, X12Path, segments_in
from assay.formats.x12._tokenizer import tokenize
from assay.formats.x12._writer import (
    FUNCTIONAL_IDS,
    build_interchange,
    build_segment,
    build_transaction,
    write_x12,
)

__all__ = [
    "ACKNOWLEDGEMENTS",
    "DEFAULT_DELIMITERS",
    "FUNCTIONAL_IDS",
    "GUIDES",
    "Delimiters",
    "ElementError",
    "EnvelopeProblem",
    "GroupAck",
    "Guide",
    "LoopRule",
    "SegmentError",
    "TransactionAck",
    "X12Document",
    "X12Filter",
    "X12FunctionalGroup",
    "X12Interchange",
    "X12Loop",
    "X12ParseError",
    "X12Path",
    "X12PathError",
    "X12Segment",
    "X12TransactionSet",
    "build_999",
    "build_interchange",
    "build_segment",
    "build_ta1",
    "build_transaction",
    "decode_x12",
    "envelope_problem",
    "guide_for",
    "parse_x12",
    "resolve_loops",
    "segments_in",
    "tokenize",
    "write_x12",
]
