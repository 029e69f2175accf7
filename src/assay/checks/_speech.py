"""Normalised speech text for `voice-transcript` (tier 1 in docs/assertions.md).

A text becomes a list of tokens: NFKC, casefold, punctuation replaced by spaces, whitespace
collapsed, number words converted to digits ("twenty five" → "25"). Each token remembers where
it came from in the NFKC text, so a match found on normalised tokens can show the words the
speaker actually said. Two spellings are folded on purpose, identically on both sides:

- `n't` becomes a separate `not` token ("isn't" → "is not", "can't" and "cannot" → "can not"),
  so the negation guard sees it and "do not" matches "don't";
- a decimal point or a thousands comma between digits stays part of the number ("$1,250.50" →
  "1250.5", "$25.00" → "25"), so the number guard compares amounts, not fragments.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

__all__ = ["SpanMatch", "Speech", "Token", "normalise"]


@dataclass(frozen=True, slots=True)
class Token:
    text: str
    """Normalised form: casefolded word, or digits for a number."""
    start: int
    """Offset of its first character in `Speech.source`."""
    end: int
    sentence: int = 0
    """Index of its sentence: `.`, `!`, `?` or `;` between two tokens starts a new one."""


@dataclass(frozen=True, slots=True)
class SpanMatch:
    """Where a tier found a phrase in one turn: tokens `first..last` of the turn, inclusive."""

    first: int
    last: int
    similarity: float
    """In [0, 1]: 1.0 for exact, partial_ratio / 100 for fuzzy, cosine for semantic."""


@dataclass(frozen=True, slots=True)
class Speech:
    """A normalised text: its tokens and the NFKC text they point into."""

    source: str
    tokens: tuple[Token, ...]
    all_words: tuple[str, ...] = field(init=False)
    """Every token's normalised text, computed once."""
    text: str = field(init=False)
    """The normalised words joined by single spaces."""

    def __post_init__(self) -> None:
        words = tuple(token.text for token in self.tokens)
        object.__setattr__(self, "all_words", words)
        object.__setattr__(self, "text", " ".join(words))

    def words(self, first: int, last: int) -> tuple[str, ...]:
        return self.all_words[first : last + 1]

    def span(self, first: int, last: int) -> str:
        """The source words of tokens `first..last` (inclusive), as spoken."""
        return self.source[self.tokens[first].start : self.tokens[last].end]

    def words_before(self, first: int, count: int) -> tuple[str, ...]:
        """Up to `count` words before token `first`, from its own sentence only."""
        if first >= len(self.tokens):
            return ()
        sentence = self.tokens[first].sentence
        start = max(first - count, 0)
        return tuple(t.text for t in self.tokens[start:first] if t.sentence == sentence)

    def token_offsets(self) -> list[int]:
        """Start offset of each token in `text` (tokens joined by single spaces)."""
        offsets, at = [], 0
        for token in self.tokens:
            offsets.append(at)
            at += len(token.text) + 1
        return offsets

    def numbers(self, first: int, last: int) -> tuple[Decimal, ...]:
        """Every number in tokens `first..last`, digits inside words too (`m12345`, `1st`)."""
        return tuple(Decimal(found) for word in self.words(first, last) for found in _DIGITS.findall(word))


# A word is a run of letters, digits and marks; digits may hold `.` or `,` between them.
_WORD = re.compile(r"(?:\d+(?:[.,]\d+)*|[^\W_])(?:[^\W_]|(?<=\d)[.,](?=\d))*")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_SENTENCE_END = re.compile(r"[.!?;]")
_APOSTROPHES = "'\u2019\u02bc"
_NT_STEMS = {"ca": "can", "wo": "will", "sha": "shall"}


@lru_cache(maxsize=8192)
def normalise(text: str) -> Speech:
    """Tokenise and normalise one text (tier 1 in docs/assertions.md); cached, as criteria share turns."""
    source = unicodedata.normalize("NFKC", text)
    raw: list[Token] = []
    sentence, previous_end = 0, 0
    for found in _WORD.finditer(source):
        word = found.group().casefold()
        start, end = found.span()
        if raw and _SENTENCE_END.search(source, previous_end, start):
            sentence += 1
        previous_end = end
        if word.endswith("n") and source[end : end + 1] in _APOSTROPHES and _is_t(source, end + 1):
            stem = word[:-1]
            if stem:
                raw.append(Token(_NT_STEMS.get(stem, stem), start, end - 1, sentence))
            elif raw and raw[-1].text in _NT_STEMS:  # ASR spacing: "ca n't"
                raw[-1] = Token(_NT_STEMS[raw[-1].text], raw[-1].start, raw[-1].end, raw[-1].sentence)
            raw.append(Token("not", end - 1, end + 2, sentence))
            continue
        if word == "t" and raw and raw[-1].text == "not" and raw[-1].end == end:
            continue
        if word == "cannot":
            raw += [Token("can", start, start + 3, sentence), Token("not", start + 3, end, sentence)]
            continue
        unmarked = _UNMARKED_CONTRACTIONS.get(word)
        if unmarked is not None:  # ASR often drops the apostrophe: "dont", "im"
            cut = start + len(word) - unmarked[2]
            raw += [Token(unmarked[0], start, cut, sentence), Token(unmarked[1], cut, end, sentence)]
            continue
        if raw and raw[-1].end == start - 1 and source[start - 1] in _APOSTROPHES:
            expanded = _contraction(raw[-1].text, word)
            if expanded is not None:
                raw.append(Token(expanded, start - 1, end, sentence))
                continue
            if len(word) == 1:  # a possessive "s" is not a spelled-out letter
                raw.append(Token(word, start - 1, end, sentence))
                continue
        raw.append(Token(_plain_number(word), start, end, sentence))
        if word[:1].isdigit() and source[end : end + 1] == "%":
            raw.append(Token("percent", end, end + 1, sentence))
    return Speech(source, tuple(_spoken_amounts(_numbers_to_digits(_spelled_letters(source, raw)))))


_CONTRACTIONS = {"m": "am", "re": "are", "ve": "have", "ll": "will", "d": "would"}
_ABBREVIATION_GAP = re.compile(r"\.?[ \t-]*")
_UNMARKED_CONTRACTIONS = {
    **{
        f"{stem}nt": (_NT_STEMS.get(stem, stem), "not", 2)
        for stem in [
            "do",
            "does",
            "did",
            "is",
            "are",
            "was",
            "were",
            "have",
            "has",
            "had",
            "could",
            "would",
            "should",
            "ca",
            "wo",
        ]
    },
    "im": ("i", "am", 1),
    "youre": ("you", "are", 2),
    "theyre": ("they", "are", 2),
    "ive": ("i", "have", 2),
    "youve": ("you", "have", 2),
    "weve": ("we", "have", 2),
    "theyve": ("they", "have", 2),
    "youll": ("you", "will", 2),
    "theyll": ("they", "will", 2),
    "whats": ("what", "is", 1),
    "thats": ("that", "is", 1),
    "theres": ("there", "is", 1),
    "shes": ("she", "is", 1),
}
"""Contractions written without their apostrophe, read as with it; a spelling that is also a word
("its", "id", "ill", "were", "well", "wed", "hell") is left as it is."""
_PRONOUNS = frozenset({"i", "you", "he", "she", "it", "we", "they", "that", "there", "who", "what"})
_MODALS = frozenset({"could", "would", "should", "might", "must"})
_IS_AFTER = frozenset({"it", "that", "he", "she", "there", "here", "what", "who", "where", "how"})


def _contraction(before: str, word: str) -> str | None:
    """The word a contraction stands for ("I'm" → am), or None. Only after a pronoun: after a
    noun "'s" is the possessive ("the patient's ID"), and elsewhere an apostrophe is spelling,
    not a contraction ("deny'd" is not "deny would")."""
    if word == "s":
        return "is" if before in _IS_AFTER else None
    if before in _PRONOUNS or (word == "ve" and before in _MODALS):
        return _CONTRACTIONS.get(word)
    return None


def _spelled_letters(source: str, tokens: list[Token]) -> list[Token]:
    """Letters said one by one become one word ("member i d" → member id, "n p i" → npi): ASR
    writes a spelled-out abbreviation as single letters. Only letters that stand alone in the
    source are joined, so a possessive "s" never joins the letters after it; a dot between them
    is the abbreviation's ("I.D."), not a sentence's end."""
    out: list[Token] = []
    run: list[Token] = []

    def flush() -> None:
        if len(run) > 1:
            out.append(Token("".join(t.text for t in run), run[0].start, run[-1].end, run[0].sentence))
        else:
            out.extend(run)
        run.clear()

    for token in tokens:
        letter = len(token.text) == 1 and token.text.isalpha() and token.end - token.start == 1
        if letter and (not run or _ABBREVIATION_GAP.fullmatch(source, run[-1].end, token.start)):
            run.append(token)
            continue
        flush()
        if letter:
            run.append(token)
        else:
            out.append(token)
    flush()
    return out


def _is_t(source: str, at: int) -> bool:
    return source[at : at + 1].casefold() == "t" and not source[at + 1 : at + 2].isalnum()


def _plain_number(word: str) -> str:
    """`1,250.50` → `1250.5`, `25.00` → `25`: separators between digits and zero cents are
    formatting, not content (`voice-transcript` replaces punctuation, so `$25.00` holds the words of
    `$25`)."""
    if word[:1].isdigit() and "," in word:
        word = word.replace(",", "")
    if _DECIMAL.fullmatch(word):
        word = word.rstrip("0").removesuffix(".")
    return word


_DECIMAL = re.compile(r"\d+\.\d+")


# -- number words ---------------------------------------------------------------------------

_UNITS = {
    w: i
    for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
}
_TEENS = {
    w: 10 + i
    for i, w in enumerate(
        [
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {
    w: 20 + 10 * i
    for i, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"])
}
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}


@dataclass(slots=True)
class _Number:
    """A number being read word by word ("two thousand five hundred and six")."""

    first: Token
    last: Token
    total: int = 0
    chunk: int = 0
    previous: str = ""
    """Kind of the last word taken: unit, teen, ten, hundred, scale."""
    smallest_scale: int = 0

    def take(self, token: Token) -> bool:
        """Add one word if the grammar allows it here; False ends the number before it."""
        word = token.text
        kind = _kind(word)
        if kind == "unit" and word != "zero" and self._unit_fits():
            self.chunk += _UNITS[word]
        elif kind in ("teen", "ten") and self.previous in ("hundred", "scale"):
            self.chunk += _TEENS.get(word) or _TENS[word]
        elif kind == "hundred" and self.previous in ("unit", "teen", "ten") and 0 < self.chunk < 100:
            self.chunk *= 100
        elif (
            kind == "scale" and self.previous in ("unit", "teen", "ten", "hundred") and self._scale_fits(word)
        ):
            self.total += self.chunk * _SCALES[word]
            self.chunk = 0
            self.smallest_scale = _SCALES[word]
        else:
            return False
        self.previous = kind
        self.last = token
        return True

    def _unit_fits(self) -> bool:
        if self.previous == "ten":
            return self.chunk % 10 == 0
        return self.previous in ("hundred", "scale")

    def _scale_fits(self, word: str) -> bool:
        return self.chunk > 0 and (not self.smallest_scale or _SCALES[word] < self.smallest_scale)

    def token(self) -> Token:
        return Token(str(self.total + self.chunk), self.first.start, self.last.end, self.first.sentence)


def _kind(word: str) -> str:
    if word in _UNITS:
        return "unit"
    if word in _TEENS:
        return "teen"
    if word in _TENS:
        return "ten"
    if word == "hundred":
        return word
    return "scale" if word in _SCALES else ""


def _start(token: Token) -> _Number | None:
    kind = _kind(token.text)
    if kind == "unit":
        return _Number(
            token, token, chunk=_UNITS[token.text], previous="unit" if token.text != "zero" else "zero"
        )
    if kind in ("teen", "ten"):
        return _Number(token, token, chunk=_TEENS.get(token.text) or _TENS[token.text], previous=kind)
    return None


def _numbers_to_digits(tokens: list[Token]) -> list[Token]:
    """Replace each maximal grammatical run of number words by one digits token.

    "twenty five" → 25, "one hundred and five" → 105, "nineteen hundred" → 1900; words that
    cannot continue a number start a new one, so "one two three" stays three numbers (1 2 3),
    the way member ids are read out.
    """
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        number = _start(tokens[i])
        if number is None:
            out.append(tokens[i])
            i += 1
            continue
        i += 1
        while i < len(tokens) and number.previous != "zero":
            if number.take(tokens[i]) or _is_joining_and(tokens, i, number):
                i += 1
            else:
                break
        out.append(number.token())
    return out


def _is_joining_and(tokens: list[Token], i: int, number: _Number) -> bool:
    """ "and" inside a number ("one hundred and five"), only right after hundred or a scale."""
    return (
        tokens[i].text == "and"
        and number.previous in ("hundred", "scale")
        and i + 1 < len(tokens)
        and _kind(tokens[i + 1].text) in ("unit", "teen", "ten")
        and tokens[i + 1].text != "zero"
    )


_DOLLARS = frozenset({"dollar", "dollars"})
_CENTS = frozenset({"cent", "cents"})


def _spoken_amounts(tokens: list[Token]) -> list[Token]:
    """An amount said in words becomes the amount written: "142 dollars and 60 cents" → 142.6,
    "1500 dollars" → 1500, as "$142.60" and "$1,500" read (the "$" is punctuation)."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.text.isdigit() or i + 1 >= len(tokens) or tokens[i + 1].text not in _DOLLARS:
            out.append(token)
            i += 1
            continue
        last, amount = tokens[i + 1], token.text
        after = i + 2 + (i + 2 < len(tokens) and tokens[i + 2].text == "and")
        if (
            after + 1 < len(tokens)
            and tokens[after].text.isdigit()
            and int(tokens[after].text) < 100
            and tokens[after + 1].text in _CENTS
        ):
            amount, last = f"{amount}.{int(tokens[after].text):02d}", tokens[after + 1]
            i = after + 2
        else:
            i += 2
        out.append(Token(_plain_number(amount), token.start, last.end, token.sentence))
    return out
