"""Loop tables of the 005010 implementation guides the clearinghouse speaks (docs/assertions.md,
docs/sandboxes.md).

Written by hand from the TR3s' loop structure; each table cites its guide and lists, per loop,
its parent loop and its trigger (the first segment of the loop, with the entity or qualifier
codes that select it when several loops start with the same segment). HL loops are found from
HL03 (hierarchical level code), everything below them from these triggers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["GUIDES", "Guide", "LoopRule", "guide_for"]


@dataclass(frozen=True, slots=True)
class LoopRule:
    """`loop` starts, as a child of `parent`, at segment `trigger` (whose E01 is in `qualifiers`)."""

    loop: str
    parent: str
    trigger: str
    qualifiers: frozenset[str] | None = None
    """E01 codes that select this loop; None = any (listed after the qualified rules)."""
    closer: str | None = None
    """A segment that ends the loop and belongs to the parent (LE after a 2120 loop)."""


@dataclass(frozen=True)
class Guide:
    name: str
    hl_levels: Mapping[str, str]
    """HL03 hierarchical level code → HL loop id."""
    rules: tuple[LoopRule, ...]
    owners: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Segments that belong to a given open loop wherever they appear (LS closes a 2115C)."""
    _index: dict[tuple[str, str], tuple[dict[str, LoopRule], LoopRule | None]] = field(
        init=False, repr=False, compare=False
    )
    triggers: frozenset[str] = field(init=False, compare=False)
    """Every segment id that can open a loop (anything else stays in the open loop)."""

    def __post_init__(self) -> None:
        index: dict[tuple[str, str], tuple[dict[str, LoopRule], LoopRule | None]] = {}
        for rule in self.rules:
            by_code, default = index.get((rule.parent, rule.trigger), ({}, None))
            if rule.qualifiers is None:
                default = default or rule
            else:
                for code in rule.qualifiers:
                    by_code.setdefault(code, rule)
            index[(rule.parent, rule.trigger)] = (by_code, default)
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "triggers", frozenset(rule.trigger for rule in self.rules))

    def child_rule(self, parent: str, segment_id: str, qualifier: str) -> LoopRule | None:
        """The rule a segment triggers inside an open `parent` loop, if any."""
        entry = self._index.get((parent, segment_id))
        if entry is None:
            return None
        return entry[0].get(qualifier, entry[1])


def _names(parent_of: Mapping[str, str], trigger: str) -> tuple[LoopRule, ...]:
    return tuple(LoopRule(loop, parent, trigger) for loop, parent in parent_of.items())


# 005010X279A1 270 — Eligibility, Coverage or Benefit Inquiry.
#   2000A HL*20 information source   2100A NM1
#   2000B HL*21 information receiver 2100B NM1
#   2000C HL*22 subscriber           2100C NM1 (TRN sits in 2000C)   2110C EQ (AMT, III, REF, DTP)
#   2000D HL*23 dependent            2100D NM1                        2110D EQ
_X279_LEVELS = {"20": "2000A", "21": "2000B", "22": "2000C", "23": "2000D"}
_X279_NAMES = _names({"2100A": "2000A", "2100B": "2000B", "2100C": "2000C", "2100D": "2000D"}, "NM1")

X279_270 = Guide(
    "005010X279A1 270",
    _X279_LEVELS,
    (*_X279_NAMES, LoopRule("2110C", "2100C", "EQ"), LoopRule("2110D", "2100D", "EQ")),
)

# 005010X279A1 271 — Eligibility, Coverage or Benefit Information.
#   2100C NM1 subscriber name (REF N3 N4 PER PRV DMG INS HI DTP MPI AAA)
#   2110C EB eligibility or benefit information (HSD REF DTP AAA MSG)
#     2115C III eligibility or benefit additional information
#     LS*2120 (loop header, in 2110C)
#     2120C NM1 subscriber benefit related entity name (N3 N4 PER PRV), repeats
#     LE*2120 (loop trailer, in 2110C)
#   Dependent loops 2100D / 2110D / 2115D / 2120D mirror them under 2000D.
X279_271 = Guide(
    "005010X279A1 271",
    _X279_LEVELS,
    (
        *_X279_NAMES,
        LoopRule("2110C", "2100C", "EB"),
        LoopRule("2115C", "2110C", "III"),
        LoopRule("2120C", "2110C", "NM1", closer="LE"),
        LoopRule("2110D", "2100D", "EB"),
        LoopRule("2115D", "2110D", "III"),
        LoopRule("2120D", "2110D", "NM1", closer="LE"),
    ),
    owners={"LS": frozenset({"2110C", "2110D"})},
)

# 005010X212 276/277 — Health Care Claim Status Request and Response (and the 005010X214 277CA,
# which shares the shape, adds 2200A/2200B trace loops and calls its claim level HL*PT, 2000D).
#   2000A HL*20 information source     2100A NM1 PR   2200A TRN (277CA)
#   2000B HL*21 information receiver   2100B NM1 41   2200B TRN/STC (receiver application trace)
#   2000C HL*19 service provider       2100C NM1 1P   2200C TRN/STC (provider of service trace)
#   2000D HL*22 subscriber             2100D NM1 IL   2200D TRN claim status tracking (STC REF AMT DTP)
#                                                       2210D (276) / 2220D (277) SVC service line
#   2000E HL*23 dependent              2100E NM1 QC   2200E TRN   2210E / 2220E SVC
_X212_LEVELS = {"20": "2000A", "21": "2000B", "19": "2000C", "22": "2000D", "23": "2000E"}
_X212_COMMON = (
    *_names(
        {"2100A": "2000A", "2100B": "2000B", "2100C": "2000C", "2100D": "2000D", "2100E": "2000E"}, "NM1"
    ),
    *_names(
        {"2200A": "2000A", "2200B": "2000B", "2200C": "2000C", "2200D": "2000D", "2200E": "2000E"}, "TRN"
    ),
)
X212_276 = Guide(
    "005010X212 276",
    _X212_LEVELS,
    (*_X212_COMMON, LoopRule("2210D", "2200D", "SVC"), LoopRule("2210E", "2200E", "SVC")),
)
X212_277 = Guide(
    "005010X212 277",
    {**_X212_LEVELS, "PT": "2000D"},
    (*_X212_COMMON, LoopRule("2220D", "2200D", "SVC"), LoopRule("2220E", "2200E", "SVC")),
)

# 005010X217 278 — Health Care Services Review, request and response.
#   2000A HL*20 UMO             2010A NM1 X3
#   2000B HL*21 requester       2010B NM1
#   2000C HL*22 subscriber      2010C NM1 IL
#   2000D HL*23 dependent       2010D NM1 QC
#   2000E HL*EV patient event   (TRN AAA UM HCR REF DTP HI HSD CRC CL1 CR1–CR8 PWK MSG)
#     2010EA NM1 patient event provider (71 72 AAJ DD DK DN FA G3 P3 QB QV SJ …)
#     2010EB NM1 patient event transport (45 FS ND PW R3)
#     2010EC NM1 patient event other UMO (X3)
#   2000F HL*SS service         (TRN AAA UM HCR REF DTP SV1 SV2 SV3 TOO HSD PWK MSG)
#     2010FA NM1 service provider; 2010FB NM1 other UMO (X3, response)
_TRANSPORT = frozenset({"45", "FS", "ND", "PW", "R3"})
_OTHER_UMO = frozenset({"X3"})
X217_278 = Guide(
    "005010X217 278",
    {"20": "2000A", "21": "2000B", "22": "2000C", "23": "2000D", "EV": "2000E", "SS": "2000F"},
    (
        *_names({"2010A": "2000A", "2010B": "2000B", "2010C": "2000C", "2010D": "2000D"}, "NM1"),
        LoopRule("2010EB", "2000E", "NM1", _TRANSPORT),
        LoopRule("2010EC", "2000E", "NM1", _OTHER_UMO),
        LoopRule("2010EA", "2000E", "NM1"),
        LoopRule("2010FB", "2000F", "NM1", _OTHER_UMO),
        LoopRule("2010FA", "2000F", "NM1"),
    ),
)

# 005010X221A1 835 — Health Care Claim Payment/Advice (no HL; loops from triggers alone).
#   header BPR TRN CUR REF DTM   1000A N1*PR payer (N3 N4 REF PER)   1000B N1*PE payee (N3 N4 REF RDM)
#   2000 LX header number (TS3 TS2)
#     2100 CLP claim payment (CAS NM1 MIA MOA REF DTM PER AMT QTY)
#       2110 SVC service payment (DTM CAS REF AMT QTY LQ)
#   PLB provider adjustment (summary, back at the transaction level)
X221_835 = Guide(
    "005010X221A1 835",
    {},
    (
        LoopRule("1000A", "", "N1", frozenset({"PR"})),
        LoopRule("1000B", "", "N1", frozenset({"PE"})),
        LoopRule("2000", "", "LX"),
        LoopRule("2100", "2000", "CLP"),
        LoopRule("2100", "", "CLP"),
        LoopRule("2110", "2100", "SVC"),
    ),
    owners={"PLB": frozenset({""})},
)


def _claim_guide(
    name: str, claim_names: dict[str, frozenset[str]], line_names: dict[str, frozenset[str]]
) -> Guide:
    """837 professional and institutional share everything but their 2310x/2420x provider loops."""
    other_payer = {
        "2330B": frozenset({"PR"}), "2330C": frozenset({"DN", "P3", "71", "72", "ZZ"}),
        "2330D": frozenset({"82"}), "2330E": frozenset({"77"}), "2330F": frozenset({"DQ"}),
        "2330G": frozenset({"85"}), "2330A": frozenset({"IL"}),
    }  # fmt: skip
    return Guide(
        name,
        {"20": "2000A", "22": "2000B", "23": "2000C"},
        (
            LoopRule("1000A", "", "NM1", frozenset({"41"})),
            LoopRule("1000B", "", "NM1", frozenset({"40"})),
            LoopRule("2010AA", "2000A", "NM1", frozenset({"85"})),
            LoopRule("2010AB", "2000A", "NM1", frozenset({"87"})),
            LoopRule("2010AC", "2000A", "NM1", frozenset({"PE"})),
            LoopRule("2010BA", "2000B", "NM1", frozenset({"IL"})),
            LoopRule("2010BB", "2000B", "NM1", frozenset({"PR"})),
            LoopRule("2010CA", "2000C", "NM1", frozenset({"QC"})),
            LoopRule("2300", "2000B", "CLM"),
            LoopRule("2300", "2000C", "CLM"),
            *(LoopRule(loop, "2300", "NM1", codes) for loop, codes in claim_names.items()),
            LoopRule("2320", "2300", "SBR"),
            *(LoopRule(loop, "2320", "NM1", codes) for loop, codes in other_payer.items()),
            LoopRule("2400", "2300", "LX"),
            LoopRule("2410", "2400", "LIN"),
            *(LoopRule(loop, "2400", "NM1", codes) for loop, codes in line_names.items()),
            LoopRule("2430", "2400", "SVD"),
            LoopRule("2440", "2400", "LQ"),
        ),
    )


# 005010X222A1 837P — Health Care Claim: Professional.
#   1000A NM1*41 submitter, 1000B NM1*40 receiver
#   2000A HL*20 billing provider: 2010AA NM1*85, 2010AB NM1*87, 2010AC NM1*PE
#   2000B HL*22 subscriber (SBR PAT): 2010BA NM1*IL, 2010BB NM1*PR
#   2000C HL*23 patient (PAT): 2010CA NM1*QC
#   2300 CLM claim: 2310A NM1*DN/P3 referring, 2310B *82 rendering, 2310C *77 facility,
#     2310D *DQ supervising, 2310E *PW pick-up, 2310F *45 drop-off;
#     2320 SBR other subscriber: 2330A *IL, 2330B *PR, 2330C–G other payer providers;
#     2400 LX service line: 2410 LIN drug, 2420A *82, 2420B *QB, 2420C *77, 2420D *DQ,
#       2420E *DK ordering, 2420F *DN/P3 referring, 2420G *PW, 2420H *45, 2430 SVD, 2440 LQ
X222_837P = _claim_guide(
    "005010X222A1 837P",
    {
        "2310A": frozenset({"DN", "P3"}), "2310B": frozenset({"82"}), "2310C": frozenset({"77"}),
        "2310D": frozenset({"DQ"}), "2310E": frozenset({"PW"}), "2310F": frozenset({"45"}),
    },
    {
        "2420A": frozenset({"82"}), "2420B": frozenset({"QB"}), "2420C": frozenset({"77"}),
        "2420D": frozenset({"DQ"}), "2420E": frozenset({"DK"}), "2420F": frozenset({"DN", "P3"}),
        "2420G": frozenset({"PW"}), "2420H": frozenset({"45"}),
    },
)  # fmt: skip

# 005010X223A2 837I — Health Care Claim: Institutional. Same shape; providers differ:
#   2310A NM1*71 attending, 2310B *72 operating, 2310C *ZZ other operating, 2310D *82 rendering,
#   2310E *77 service facility, 2310F *DN referring; 2420A *72, 2420B *ZZ, 2420C *82, 2420D *DN.
X223_837I = _claim_guide(
    "005010X223A2 837I",
    {
        "2310A": frozenset({"71"}), "2310B": frozenset({"72"}), "2310C": frozenset({"ZZ"}),
        "2310D": frozenset({"82"}), "2310E": frozenset({"77"}), "2310F": frozenset({"DN"}),
    },
    {
        "2420A": frozenset({"72"}), "2420B": frozenset({"ZZ"}), "2420C": frozenset({"82"}),
        "2420D": frozenset({"DN"}),
    },
)  # fmt: skip

GUIDES: dict[str, Guide] = {
    "270": X279_270,
    "271": X279_271,
    "276": X212_276,
    "277": X212_277,
    "278": X217_278,
    "835": X221_835,
    "837": X222_837P,
}
_INSTITUTIONAL = ("X223", "X096")
"""Guide ids of institutional 837s (005010X223A1/A2/A3, 004010X096A1)."""


def guide_for(transaction_code: str, guide: str = "") -> Guide | None:
    """The loop table for an ST01 (and, for 837, the professional/institutional guide in ST03/GS08);
    None for transactions read segment by segment."""
    if transaction_code == "837":
        if any(code in guide for code in _INSTITUTIONAL):
            return X223_837I
        return None if "X224" in guide else X222_837P
    return GUIDES.get(transaction_code)
