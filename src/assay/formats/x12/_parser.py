"""Assembling tokenized segments into the envelope model, with control-count validation.

Checks done here (X12.5 / 005010 TR3 appendix B), each a warning, never an exception:
SE01 = segments ST…SE inclusive, SE02 = ST02; GE01 = transaction sets in the group, GE02 = GS06;
IEA01 = functional groups in the interchange, IEA02 = ISA13; a missing SE, GE or IEA.
"""

from __future__ import annotations

from assay.formats.x12._errors import X12ParseError
from assay.formats.x12._model import (
    X12Document,
    X12FunctionalGroup,
    X12Interchange,
    X12Segment,
    X12TransactionSet,
)
from assay.formats.x12._tokenizer import tokenize

__all__ = ["decode_x12", "parse_x12"]


def decode_x12(data: bytes | str) -> str:
    """Text from bytes: UTF-8 (a BOM dropped), else Latin-1, which never fails."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse_x12(data: bytes | str, *, strict: bool = True) -> X12Document:
    """Parse one X12 text (one or more interchanges) into the envelope model.

    `strict=False` keeps segments with malformed ids (see `tokenize`) for the caller to report.

    Raises:
        X12ParseError: the text is not X12 (see `tokenize`). Envelope problems are warnings.
    """
    builder = _Assembler()
    handlers = _HANDLERS
    for segment in tokenize(decode_x12(data), strict=strict):
        # Fast path for the common case: a body segment inside an open transaction set.
        if builder.transaction is not None and segment.id not in handlers:
            builder.transaction.segments.append(segment)
        else:
            builder.feed(segment)
    return builder.finish()


class _Assembler:
    """A small state machine over envelope segments; everything else goes to the open set."""

    def __init__(self) -> None:
        self.document = X12Document([])
        self.interchange: X12Interchange | None = None
        self.group: X12FunctionalGroup | None = None
        self.transaction: X12TransactionSet | None = None

    def feed(self, segment: X12Segment) -> None:
        """An envelope segment, or one outside any transaction set (`parse_x12` appends the
        body segments of an open set itself)."""
        handler = _HANDLERS.get(segment.id)
        if handler is not None:
            handler(self, segment)
        else:
            self._interchange_for(segment).other.append(segment)

    def finish(self) -> X12Document:
        if self.interchange is not None:
            self._close_interchange(None)
        if not self.document.interchanges:
            raise X12ParseError("no ISA interchange found", segment=0, offset=0)
        return self.document

    # envelope handlers ----------------------------------------------------------------------

    def _on_isa(self, segment: X12Segment) -> None:
        if self.interchange is not None:
            self._close_interchange(None)
        self.interchange = X12Interchange(segment)
        self.document.interchanges.append(self.interchange)

    def _on_iea(self, segment: X12Segment) -> None:
        if self.interchange is None:
            self.document.warnings.append(f"IEA {segment.element(2)} without an open interchange")
            self._reopen_last().iea = segment
            return
        self._close_interchange(segment)

    def _on_gs(self, segment: X12Segment) -> None:
        interchange = self._interchange_for(segment)
        if self.group is not None:
            self._close_group(None)
        self.group = X12FunctionalGroup(segment, interchange=interchange)
        interchange.groups.append(self.group)

    def _on_ge(self, segment: X12Segment) -> None:
        if self.group is None:
            self._interchange_for(segment).warnings.append(
                f"GE {segment.element(2)} without an open functional group"
            )
            return
        self._close_group(segment)

    def _on_st(self, segment: X12Segment) -> None:
        if self.transaction is not None:
            self._close_transaction()
        if self.group is None:
            interchange = self._interchange_for(segment)
            self.group = X12FunctionalGroup(None, interchange=interchange)
            self.group.warnings.append(
                f"transaction set {segment.element(1)} {segment.element(2)} is outside any GS functional group"
            )
            interchange.groups.append(self.group)
        self.transaction = X12TransactionSet([segment], group=self.group)
        self.group.transactions.append(self.transaction)

    def _on_se(self, segment: X12Segment) -> None:
        if self.transaction is None:
            self._interchange_for(segment).warnings.append(
                f"SE {segment.element(2)} without an open transaction set"
            )
            return
        self.transaction.segments.append(segment)
        _check_se(self.transaction, segment)
        self.transaction = None

    # closing --------------------------------------------------------------------------------

    def _close_transaction(self) -> None:
        transaction = self.transaction
        if transaction is not None:
            transaction.warnings.append(
                f"transaction set {transaction.code} {transaction.control_number} has no SE trailer"
            )
        self.transaction = None

    def _close_group(self, ge: X12Segment | None) -> None:
        self._close_transaction()
        group = self.group
        self.group = None
        if group is None:
            return
        control = group.gs.element(6).strip() if group.gs is not None else ""
        if ge is None:
            if group.gs is not None:
                group.warnings.append(f"functional group {control} has no GE trailer")
            return
        group.ge = ge
        _check_count(group.warnings, "GE01", ge.element(1), len(group.transactions), "transaction sets")
        if group.gs is not None and ge.element(2).strip() != control:
            group.warnings.append(f"GE02 {ge.element(2).strip()!r} does not match GS06 {control!r}")

    def _close_interchange(self, iea: X12Segment | None) -> None:
        if self.group is not None:
            self._close_group(None)
        self._close_transaction()
        interchange = self.interchange
        self.interchange = None
        if interchange is None:
            return
        if iea is None:
            if interchange.iea is None:
                interchange.warnings.append(f"interchange {interchange.control_number} has no IEA trailer")
            return
        interchange.iea = iea
        _check_count(
            interchange.warnings, "IEA01", iea.element(1), len(interchange.groups), "functional groups"
        )
        if iea.element(2).strip() != interchange.control_number:
            interchange.warnings.append(
                f"IEA02 {iea.element(2).strip()!r} does not match ISA13 {interchange.control_number!r}"
            )

    def _interchange_for(self, segment: X12Segment) -> X12Interchange:
        if self.interchange is not None:
            return self.interchange
        interchange = self._reopen_last()
        self.document.warnings.append(f"{segment.id} segment after IEA, outside any interchange")
        return interchange

    def _reopen_last(self) -> X12Interchange:
        """Segments after an IEA are kept with the interchange before them, never dropped."""
        last = self.document.interchanges[-1]
        self.interchange = last
        return last


def _check_se(transaction: X12TransactionSet, se: X12Segment) -> None:
    _check_count(transaction.warnings, "SE01", se.element(1), len(transaction.segments), "segments")
    if se.element(2).strip() != transaction.control_number:
        transaction.warnings.append(
            f"SE02 {se.element(2).strip()!r} does not match ST02 {transaction.control_number!r}"
        )


def _check_count(warnings: list[str], name: str, declared: str, actual: int, noun: str) -> None:
    text = declared.strip()
    if not text.isdigit():
        warnings.append(f"{name} {text!r} is not a count (found {actual} {noun})")
    elif int(text) != actual:
        warnings.append(f"{name} says {int(text)} {noun}, found {actual}")


_HANDLERS = {
    "ISA": _Assembler._on_isa,
    "IEA": _Assembler._on_iea,
    "GS": _Assembler._on_gs,
    "GE": _Assembler._on_ge,
    "ST": _Assembler._on_st,
    "SE": _Assembler._on_se,
}
