"""`voice-transcript` matcher on the labelled phrase set, and its cost per criterion.

    uv run --extra semantic python bench/bench_voice_matcher.py [--rounds N]

Part 1 — precision, recall and F1 per kind and overall for each tier combination (exact;
exact+fuzzy; exact+fuzzy+vocabulary, the default install; the same with semantic), on every item of
tests/fixtures/voice/labelled/phrases.yaml (one agent turn, one `contains` phrase). Negation
false accepts are the "negation flips". Without the `semantic` extra the semantic rows are skipped.
Then tier 3's calibration: the thresholds the calibration split chooses (tests/checks/voice_set.py
`calibrate`), and the scores on each split — the held-out split is the honest figure.

Part 2 — time: loading the semantic model in a fresh process (the peer: nothing to load for the
default tiers) — the model's own cost (importing numpy, onnxruntime and tokenizers, building the
onnxruntime session) apart from importing assay itself, which every process pays anyway — and the
time per `voice-transcript` criterion (3 `contains` + 1 `not_contains`
phrases, some in the trade's words the vocabulary tier knows) on a 10-turn transcript through
`verify_criterion`, vocabulary off, default tiers (with the vocabulary) and semantic on: p50
over N rounds of 20 distinct criteria (turn windows are embedded once and cached, as criteria of
one task share their transcript; each criterion's phrases are new).

Targets: default precision ≥ 0.98 held out; semantic (with the vocabulary) precision ≥ 0.95,
recall ≥ 0.80, paraphrase recall ≥ 0.50 held out, 0 negation flips; model load < 2 s; < 5 ms per
criterion p50 for the default tiers, < 20 ms with semantic on.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.checks import voice_set

from assay.checks import _semantic, semantic_unavailable
from assay.checks.vocabulary import builtin
from assay.core.state import VoiceTurn
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_criterion

COMBOS = (
    ("exact",),
    ("exact", "fuzzy"),
    ("exact", "fuzzy", "vocabulary"),
    ("exact", "fuzzy", "semantic"),
    ("exact", "fuzzy", "vocabulary", "semantic"),
)
LOAD_PROBE = (
    "import time; t = time.perf_counter(); "
    "from assay.checks._semantic import embedder; m = time.perf_counter(); embedder().load(); "
    "print(m - t, time.perf_counter() - m)"
)


def fmt(value: float | None) -> str:
    return "   —" if value is None else f"{value:.3f}"


def quality(with_semantic: bool) -> None:
    items = voice_set.load_items()
    print(f"labelled set: {len(items)} items, {len({i.phrase for i in items})} phrases")
    for combo in COMBOS:
        if "semantic" in combo and not with_semantic:
            print(f"\n{'+'.join(combo)}: skipped ({semantic_unavailable()})")
            continue
        started = time.perf_counter()
        scores = voice_set.score(items, voice_set.matchers(combo), voice_set.lexicon(combo))
        took = time.perf_counter() - started
        print(f"\n{'+'.join(combo)}  ({took:.1f} s for the set)")
        print(f"  {'kind':11} {'n':>4} {'P':>6} {'R':>6} {'F1':>6} {'FP':>4} {'FN':>4}")
        for kind in (*voice_set.KINDS, "overall"):
            s = scores[kind]
            print(
                f"  {kind:11} {s.items:4} {fmt(s.precision):>6} {fmt(s.recall):>6} {fmt(s.f1):>6}"
                f" {s.fp:4} {s.fn:4}"
            )
        print(f"  negation flips accepted: {scores['negation'].fp}")
        for split in voice_set.SPLITS:
            part = voice_set.score(
                [i for i in items if i.split == split], voice_set.matchers(combo), voice_set.lexicon(combo)
            )
            o = part["overall"]
            print(
                f"  {split:11} {o.items:4} {fmt(o.precision):>6} {fmt(o.recall):>6} {fmt(o.f1):>6}"
                f" {o.fp:4} {o.fn:4}  paraphrase R {fmt(part['paraphrase'].recall)}"
            )
    if with_semantic:
        calibration(items)


def calibration(items: list) -> None:
    candidates = voice_set.semantic_candidates(items, builtin())
    chosen = voice_set.calibrate(items, candidates)
    print(
        f"\ntier 3 calibration (after the vocabulary): the calibration split chooses cosine >= {chosen.threshold}, "
        f"alignment >= {chosen.alignment} (shipped: {_semantic.THRESHOLD}, {_semantic.ALIGNMENT})"
    )
    print(f"  {'split':12} {'n':>4} {'P':>6} {'R':>6} {'para R':>7} {'neg flips':>9} {'number FA':>9}")
    for split in (*voice_set.SPLITS, "all"):
        part = [(i, c) for i, c in zip(items, candidates, strict=True) if split in ("all", i.split)]
        scores = voice_set.score_thresholds(
            [i for i, _ in part], [c for _, c in part], _semantic.THRESHOLD, _semantic.ALIGNMENT
        )
        o = scores["overall"]
        print(
            f"  {split:12} {o.items:4} {fmt(o.precision):>6} {fmt(o.recall):>6}"
            f" {fmt(scores['paraphrase'].recall):>7} {scores['negation'].fp:9} {scores['number'].fp:9}"
        )


def transcript() -> list[VoiceTurn]:
    lines = [
        ("ivr", "Thank you for calling. This call may be monitored or recorded."),
        ("agent", "Hi, this is Sam from Riverside Clinic. I'm calling to check eligibility and benefits."),
        ("caller", "Sure, who am I speaking with and what's the member ID?"),
        ("agent", "The member ID is M 4 4 1 9 0 2, and the patient's date of birth is March 3rd 1980."),
        ("caller", "Thank you. I show the patient's coverage is active for that date of service."),
        ("agent", "Great. Is physical therapy covered, and what's the visit limit?"),
        ("caller", "Physical therapy visits are a covered benefit, up to 20 visits per year."),
        ("agent", "And does the MRI need prior authorization?"),
        ("caller", "No prior authorization is required for that code. Your reference number is 77120."),
        ("agent", "Perfect, thank you for your help. Have a great day."),
    ]
    return [VoiceTurn(speaker, text) for speaker, text in lines]


def criteria(round_: int, vocabulary: bool = True) -> list[CriterionSpec]:
    phrases = [
        "physical therapy is covered",
        "the coverage is active",
        "what is the subscriber ID",
        "visit limit is 20 visits per year",
        "prior auth is not required",
        "reference number is 77120",
        "calling on behalf of Riverside Clinic",
        "the patient's DOB",
    ]
    return [
        CriterionSpec(
            {
                "assert": "voice-transcript",
                "contains": [
                    f"{phrases[i % 8]} {'please' if round_ % 2 else ''}".strip(),
                    phrases[(i + 1) % 8],
                    f"{phrases[(i + 2) % 8]} today {round_}-{i}",
                ],
                "not_contains": ["SSN"],
                "vocabulary": vocabulary,
            }
        )
        for i in range(20)
    ]


def cost(rounds: int, with_semantic: bool, root: Path) -> None:
    state = open_snapshot(write_snapshot(root / "snapshot", voice=transcript()))
    if with_semantic:
        imports, loads = [], []
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-c", LOAD_PROBE], capture_output=True, text=True, check=True
            )
            assay_import, model = (float(x) for x in out.stdout.split())
            imports.append(assay_import)
            loads.append(model)
        print(
            f"\nsemantic model load in a fresh process (target < 2 s): median {statistics.median(loads):.2f} s "
            f"(runs: {', '.join(f'{x:.2f}' for x in loads)}); default tiers load nothing; "
            f"importing assay itself before it: median {statistics.median(imports):.2f} s"
        )
    runs = (("vocabulary off", False, False), ("default tiers", False, True), ("semantic on", True, True))
    for label, semantic, vocabulary in runs:
        if semantic and not with_semantic:
            continue
        verify_criterion(criteria(-1)[0], state, semantic=semantic)  # load the model, warm caches
        times = []
        for round_ in range(rounds):
            for spec in criteria(round_, vocabulary):
                started = time.perf_counter()
                result = verify_criterion(spec, state, semantic=semantic)
                times.append((time.perf_counter() - started) * 1000)
                assert result.status == "ok", result.details
        times.sort()
        p50, p95 = statistics.median(times), times[int(len(times) * 0.95) - 1]
        target = " (target < 20 ms)" if semantic else " (target < 5 ms)" if vocabulary else ""
        print(
            f"{label:14} per criterion (10-turn transcript, 4 phrases): p50 {p50:.2f} ms{target}, "
            f"p95 {p95:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with_semantic = semantic_unavailable() is None
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    quality(with_semantic)
    print(f"\nload average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cost(args.rounds, with_semantic, Path(tmp))
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
