"""The trade's vocabulary for `voice-transcript`: a phrase said in other words the trade uses.

A `Lexicon` is a list of entries, each a set of terms that name one thing in healthcare
administration ("DOB" / "date of birth", "prior auth" / "precertification", "POS 11" / "physician
office"). The built-in one is `healthcare_admin.yaml` beside this module, versioned and with a
public source per entry; a benchmark may add entries of its own (`vocabulary:` in its package),
which are frozen with each task run so a rescore reads the same list.

`Lexicon.variants(phrase)` finds the terms a phrase holds (whole normalised words, longest first,
left to right) and returns the phrase with each replaced by the entry's other terms: every
combination, fewest replacements first, at most `MAX_VARIANTS`. A term listed as `ambiguous`
("PA": physician assistant, Pennsylvania) is recognised in a phrase but never put into one, so
it is never searched for. A term of digits alone ("835") is ambiguous by rule: searched for,
it would turn a number in the call into a match.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from assay.checks._speech import Speech, normalise

__all__ = [
    "BUILTIN",
    "MAX_VARIANTS",
    "NEGATED_PREFIXES",
    "Entry",
    "Lexicon",
    "Variant",
    "VocabularyInvalid",
    "builtin",
    "lexicon_for",
    "parse_entries",
]

BUILTIN = Path(__file__).parent / "healthcare_admin.yaml"
MAX_VARIANTS = 64
"""Variants tried per phrase; a phrase with many terms keeps its fewest-replacement ones."""
MAX_ENTRIES = 2000
MAX_TERMS = 50
MAX_TERM_LENGTH = 200
NEGATED_PREFIXES = frozenset({"non"})
"""Words that negate the term after them ("non participating"): the vocabulary tier's guard
reads them as negations, so "participating" is never found in "non-participating"."""
_NEGATIONS = frozenset({"no", "not", "never", "without", "none", "neither", "nor"})


class VocabularyInvalid(ValueError):
    """A vocabulary that cannot be used; `problems` maps `vocabulary.<i>.<key>` to messages."""

    def __init__(self, problems: dict[str, list[str]]) -> None:
        self.problems = problems
        first = next(iter(problems.items()))
        super().__init__(f"{first[0]}: {first[1][0]}")


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    terms: tuple[str, ...]
    """Said interchangeably; each is searched for when a phrase holds another of the entry's."""
    ambiguous: tuple[str, ...] = ()
    """Recognised in a phrase, never searched for."""
    source: str = ""
    """The public source the terms are taken from."""
    origin: str = "builtin"
    """`builtin` or `benchmark`."""

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "terms": list(self.terms), "source": self.source}
        if self.ambiguous:
            body["ambiguous"] = list(self.ambiguous)
        return body


@dataclass(frozen=True, slots=True)
class Variant:
    """A phrase with some of its terms said another way."""

    speech: Speech
    entries: tuple[str, ...]
    """Ids of the entries whose terms were swapped, in phrase order."""
    replaced: tuple[tuple[str, str], ...]
    """(term in the phrase, term put in its place), per swap."""

    @property
    def text(self) -> str:
        return self.speech.text


@dataclass(frozen=True, slots=True)
class _Term:
    words: tuple[str, ...]
    entry: int
    searchable: bool


@dataclass(frozen=True, slots=True)
class _Occurrence:
    first: int
    size: int
    said: str
    options: tuple[tuple[tuple[str, ...], str], ...]
    """(replacement words, entry id), per other searchable term of each entry the term is in."""


@dataclass(frozen=True)
class Lexicon:
    name: str
    version: int
    entries: tuple[Entry, ...]
    _index: dict[str, list[_Term]] = field(init=False, repr=False, compare=False)
    _cache: dict[str, tuple[Variant, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[_Term]] = {}
        for position, entry in enumerate(self.entries):
            for term, searchable in [(t, True) for t in entry.terms] + [(t, False) for t in entry.ambiguous]:
                words = normalise(term).all_words
                if words:
                    index.setdefault(words[0], []).append(_Term(words, position, searchable))
        for terms in index.values():
            terms.sort(key=lambda t: -len(t.words))
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_cache", {})

    def extended(self, extra: Sequence[Entry]) -> Lexicon:
        """This lexicon plus a benchmark's own entries (named by the benchmark in evidence)."""
        if not extra:
            return self
        return Lexicon(self.name, self.version, self.entries + tuple(extra))

    def describe(self) -> dict[str, Any]:
        """What evidence records about the lexicon a criterion was judged with."""
        extra = sum(entry.origin == "benchmark" for entry in self.entries)
        return {"name": self.name, "version": self.version, "benchmarkEntries": extra}

    def variants(self, phrase: Speech) -> list[Variant]:
        """The phrase said with the trade's other terms (not the phrase itself), fewest swaps first."""
        return list(self._variants(phrase.text))

    def entry(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.id == entry_id), None)

    def _variants(self, text: str) -> tuple[Variant, ...]:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        found = self._expand(normalise(text).all_words)
        if len(self._cache) > 8192:
            self._cache.clear()
        self._cache[text] = found
        return found

    def _expand(self, words: tuple[str, ...]) -> tuple[Variant, ...]:
        occurrences = self._occurrences(words)
        if not occurrences:
            return ()
        choices = [[None, *range(len(o.options))] for o in occurrences]
        combos = sorted(
            (c for c in itertools.product(*choices) if any(x is not None for x in c)),
            key=lambda c: sum(x is not None for x in c),
        )
        found, seen = [], {" ".join(words)}
        for combo in combos:
            out: list[str] = []
            entries: list[str] = []
            replaced: list[tuple[str, str]] = []
            at = 0
            for occurrence, pick in zip(occurrences, combo, strict=True):
                out += words[at : occurrence.first]
                at = occurrence.first + occurrence.size
                if pick is None:
                    out += words[occurrence.first : at]
                    continue
                replacement, entry_id = occurrence.options[pick]
                out += replacement
                entries.append(entry_id)
                replaced.append((occurrence.said, " ".join(replacement)))
            out += words[at:]
            text = " ".join(out)
            if text in seen:
                continue
            seen.add(text)
            found.append(Variant(normalise(text), tuple(entries), tuple(replaced)))
            if len(found) >= MAX_VARIANTS:
                break
        return tuple(found)

    def _occurrences(self, words: tuple[str, ...]) -> list[_Occurrence]:
        found, at = [], 0
        while at < len(words):
            size, entries = 0, []
            for term in self._index.get(words[at], ()):
                n = len(term.words)
                if n < size:
                    break
                if words[at : at + n] == term.words:
                    size = n
                    entries.append(term.entry)
            if not size:
                at += 1
                continue
            said = words[at : at + size]
            options: list[tuple[tuple[str, ...], str]] = []
            for position in dict.fromkeys(entries):
                entry = self.entries[position]
                for term_text in entry.terms:
                    other = normalise(term_text).all_words
                    if other != said and (other, entry.id) not in options:
                        options.append((other, entry.id))
            if options:
                found.append(_Occurrence(at, size, " ".join(said), tuple(options)))
            at += size
        return found


def parse_entries(raw: Any, *, origin: str = "benchmark", where: str = "vocabulary") -> list[Entry]:
    """Entries from JSON/YAML (`[{id?, terms, ambiguous?, source}]`); `VocabularyInvalid` names
    each bad key. Terms must hold a word, no negation (a swap must never flip meaning) and not
    only digits (see the module's docstring); an entry needs two terms to swap between, or one
    term and an ambiguous one it stands for."""
    problems: dict[str, list[str]] = {}

    def problem(key: str, message: str) -> None:
        problems.setdefault(key, []).append(message)

    if not isinstance(raw, list):
        raise VocabularyInvalid({where: ["must be a list of entries {terms, source, id?, ambiguous?}"]})
    if len(raw) > MAX_ENTRIES:
        raise VocabularyInvalid({where: [f"at most {MAX_ENTRIES} entries"]})
    entries, ids = [], set()
    for i, item in enumerate(raw):
        at = f"{where}.{i}"
        if not isinstance(item, Mapping):
            problem(at, "must be an object {terms, source, id?, ambiguous?}")
            continue
        unknown = sorted(set(item) - {"id", "terms", "ambiguous", "source"})
        for key in unknown:
            problem(f"{at}.{key}", "unknown key (expected id, terms, ambiguous, source)")
        source = item.get("source")
        if not isinstance(source, str) or not source.strip():
            problem(f"{at}.source", "every entry names its source (a glossary, a code list, a URL)")
        lists: dict[str, list[str]] = {}
        for key in ("terms", "ambiguous"):
            value = item.get(key, [] if key == "ambiguous" else None)
            if not isinstance(value, list) or len(value) > MAX_TERMS:
                problem(f"{at}.{key}", f"must be a list of at most {MAX_TERMS} strings")
                continue
            good = []
            for j, term in enumerate(value):
                reason = _term_problem(term)
                if reason:
                    problem(f"{at}.{key}.{j}", reason)
                else:
                    good.append(term)
            lists[key] = good
        terms, ambiguous = lists.get("terms", []), lists.get("ambiguous", [])
        numeric = [t for t in terms if normalise(t).text.replace(" ", "").isdigit()]
        terms = [t for t in terms if t not in numeric]
        ambiguous += numeric
        if f"{at}.terms" not in problems and (not terms or len(terms) + len(ambiguous) < 2):
            problem(f"{at}.terms", "needs at least two terms, or a term and an ambiguous term it stands for")
        entry_id = item.get("id", f"{origin}-{i + 1}")
        if not isinstance(entry_id, str) or not entry_id.strip() or len(entry_id) > 100:
            problem(f"{at}.id", "must be a non-empty string of at most 100 characters")
        elif entry_id in ids:
            problem(f"{at}.id", f"duplicate id {entry_id!r}")
        else:
            ids.add(entry_id)
        if not any(k.startswith(at) for k in problems):
            entries.append(Entry(entry_id, tuple(terms), tuple(ambiguous), str(source), origin))
    if problems:
        raise VocabularyInvalid(problems)
    return entries


def _term_problem(term: Any) -> str | None:
    if not isinstance(term, str) or len(term) > MAX_TERM_LENGTH:
        return f"must be a string of at most {MAX_TERM_LENGTH} characters"
    words = normalise(term).all_words
    if not words:
        return f"term {term!r} has no words to match"
    if _NEGATIONS.intersection(words):
        return f"term {term!r} holds a negation; a swap must never change what is negated"
    return None


@cache
def builtin() -> Lexicon:
    """The shipped lexicon (read once per process)."""
    document = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    entries = parse_entries(document["entries"], origin="builtin", where=f"{BUILTIN.name}: entries")
    return Lexicon(str(document["name"]), int(document["version"]), tuple(entries))


_EXTENDED: dict[str, Lexicon] = {}


def lexicon_for(extra: Any) -> Lexicon:
    """The built-in lexicon plus a benchmark's `vocabulary` (None or a list of entries); raises
    `VocabularyInvalid`. Kept per distinct vocabulary, so a benchmark's runs share one."""
    if not extra:
        return builtin()
    key = json.dumps(extra, sort_keys=True, default=str)
    found = _EXTENDED.get(key)
    if found is None:
        found = builtin().extended(parse_entries(extra))
        if len(_EXTENDED) > 64:
            _EXTENDED.clear()
        _EXTENDED[key] = found
    return found
