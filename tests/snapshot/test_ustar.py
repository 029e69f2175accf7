"""The fast snapshot archive reader (`snapshot/_ustar.py`) against `tarfile`, the authority.

For any archive, `_read_fast` either gives exactly what `_read_with_tarfile` gives (same keys in
the same order, data, mtimes; the same `SnapshotError`) or raises `Unusual`, and `open_tree` then
reads it with `tarfile`. Archives Assay writes (and any pax or GNU-format archive without long
names, links or extra pax records) take the fast path.
"""

from __future__ import annotations

import gzip
import io
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.core.errors import SnapshotError
from assay.snapshot import _tree, archive_snapshot, write_snapshot
from assay.snapshot._tree import _member_key, _read_fast, _read_with_tarfile, open_tree
from assay.snapshot._ustar import Unusual
from assay.snapshot.writer import SnapshotFile

Member = tuple[str, bytes | None, float]
"""(name, data or None for a directory, mtime)"""


def _tar(members: list[Member], *, fmt: int = tarfile.PAX_FORMAT, **options: Any) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=fmt, **options) as tar:
        for name, data, mtime in members:
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _outcome(read: Any, source: Any) -> Any:
    try:
        return ("read", list(read(source).items()))
    except SnapshotError as exc:
        return ("refused", str(exc))
    except (tarfile.TarError, OSError, EOFError) as exc:  # open_tree's "neither ... nor a tar.gz"
        return ("unreadable", type(exc).__name__)


def _both(archive: bytes) -> tuple[Any, Any]:
    """(the fast reader's outcome, or "unusual"; tarfile's outcome)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "a.tar.gz"
        path.write_bytes(archive)
        try:
            fast = _outcome(_read_fast, io.BytesIO(archive))
        except Unusual:
            fast = "unusual"
        return fast, _outcome(_read_with_tarfile, path)


def _same_or_unusual(archive: bytes) -> Any:
    fast, slow = _both(archive)
    assert fast in ("unusual", slow)
    return fast


_segment = st.text(alphabet="abXY09._-é", min_size=1, max_size=40)
_names = st.lists(_segment, min_size=1, max_size=4).map("/".join)
_mtimes = st.one_of(
    st.integers(min_value=0, max_value=8**11 - 1),
    st.floats(min_value=0, max_value=4e9, allow_nan=False).filter(lambda m: m != int(m)),
)
_members = st.lists(
    st.tuples(
        st.one_of(_names, _names.map(lambda n: "snapshot/" + n)),
        st.one_of(st.none(), st.binary(max_size=1500)),
        _mtimes,
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members=_members, level=st.integers(min_value=1, max_value=9))
def test_a_pax_archive_reads_as_tarfile_reads_it(members: list[Member], level: int) -> None:
    """tarfile's default format: long and non-ASCII names and fractional mtimes as pax records."""
    fast = _same_or_unusual(_tar(members, compresslevel=level))
    assert fast != "unusual"


@settings(max_examples=150, deadline=None)
@given(members=_members, fmt=st.sampled_from([tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT]))
def test_gnu_and_ustar_archives_read_as_tarfile_reads_them(members: list[Member], fmt: int) -> None:
    """GNU long names (`L` headers) and ustar `prefix` names go to tarfile; the rest is read fast."""
    try:
        archive = _tar(members, fmt=fmt)
    except ValueError:  # a name ustar cannot hold
        return
    fast = _same_or_unusual(archive)
    if all(len(name.encode()) <= 100 for name, _, _ in members) and fmt == tarfile.GNU_FORMAT:
        assert fast != "unusual"


def test_a_snapshot_archive_is_read_fast_files_mtimes_included(tmp_path: Path) -> None:
    root = write_snapshot(
        tmp_path / "s",
        manifest={"task_run_id": "tr_1"},
        fhir=[{"resourceType": "Patient", "id": f"p{i}"} for i in range(50)],
        files=[SnapshotFile("in/a.csv", b"x,y\n"), SnapshotFile("b.txt", b"")],
    )
    (root / "files" / "in" / "a.csv").touch()  # a fractional mtime: a pax record
    archive = archive_snapshot(root)
    fast, slow = _both(archive)
    assert fast == slow and fast[0] == "read" and len(fast[1]) == 54
    stamps = {key: stamp for key, (_, stamp) in fast[1]}
    assert stamps["snapshot/files/in/a.csv"].microsecond != 0


def _odd(build: Any) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        build(tar)
    return buffer.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"{}", **fields: Any) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data))


def _ok(tar: tarfile.TarFile) -> None:
    _add(tar, "snapshot/manifest.json")


@pytest.mark.parametrize(
    "pax",
    [{"comment": "hi"}, {"hdrcharset": "BINARY"}, {"size": "2"}, {"mtime": "soon"}, {"uid": str(8**8)}],
)
def test_pax_records_are_read_as_tarfile_reads_them(pax: dict[str, str]) -> None:
    _same_or_unusual(_odd(lambda tar: (_ok(tar), _add(tar, "snapshot/x.json", pax_headers=pax))))


@pytest.mark.parametrize("hard", [False, True])
def test_links_are_left_to_tarfile(hard: bool) -> None:
    link = _link("snapshot/files/l", "snapshot/manifest.json", hard=hard)
    assert _same_or_unusual(_odd(lambda tar: (_ok(tar), tar.addfile(link)))) == "unusual"


def _link(name: str, target: str, *, hard: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = (tarfile.LNKTYPE if hard else tarfile.SYMTYPE), target
    return info


def test_a_symlink_goes_to_tarfile_which_refuses_it(tmp_path: Path) -> None:
    archive = _odd(lambda tar: (_ok(tar), tar.addfile(_link("snapshot/files/l", "/etc/passwd"))))
    assert _both(archive)[0] == "unusual"
    (tmp_path / "a.tar.gz").write_bytes(archive)
    with pytest.raises(SnapshotError, match="not a regular file"):
        open_tree(tmp_path / "a.tar.gz")


def test_a_pax_member_falls_back_when_it_carries_a_record_the_reader_does_not_apply() -> None:
    archive = _odd(lambda tar: (_ok(tar), _add(tar, "snapshot/x.json", pax_headers={"comment": "hi"})))
    fast, slow = _both(archive)
    assert fast == "unusual" and slow[0] == "read" and [key for key, _ in slow[1]][-1] == "snapshot/x.json"


def test_a_global_pax_header_falls_back() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", pax_headers={"comment": "global"}) as tar:
        _ok(tar)
    assert _same_or_unusual(buffer.getvalue()) == "unusual"


def test_a_gnu_long_name_falls_back_and_keeps_its_name() -> None:
    name = "snapshot/fhir/Patient/" + "p" * 120 + ".json"
    fast, slow = _both(_tar([(name, b"{}", 1)], fmt=tarfile.GNU_FORMAT))
    assert fast == "unusual" and [key for key, _ in slow[1]] == [name]


def test_a_long_pax_name_is_read_fast() -> None:
    name = "snapshot/fhir/Patient/" + "p" * 120 + ".json"
    fast, slow = _both(_tar([(name, b"{}", 1.5)]))
    assert fast == slow and [key for key, _ in fast[1]] == [name]


def _raw_tar(members: list[Member]) -> bytearray:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, mtime in members:
            info = tarfile.TarInfo(name)
            info.mtime, info.size = mtime, len(data or b"")
            tar.addfile(info, io.BytesIO(data or b""))
    return bytearray(buffer.getvalue())


def test_a_bad_checksum_after_the_first_member_ends_the_archive_as_in_tarfile() -> None:
    raw = _raw_tar([("snapshot/a.json", b"{}", 1), ("snapshot/b.json", b"[]", 1)])
    raw[1024 + 148 : 1024 + 154] = b"000001"  # the second header
    fast, slow = _both(gzip.compress(bytes(raw)))
    assert fast == "unusual" and [key for key, _ in slow[1]] == ["snapshot/a.json"]


def test_a_signed_checksum_falls_back() -> None:
    raw = _raw_tar([("snapshot/e.json", b"{}", 1)])
    raw[20] = 0xE9  # the name's byte, then the checksum tarfile accepts as signed
    signed = 256 + sum(b - 256 if b > 127 else b for b in raw[:148] + raw[156:512])
    raw[148:156] = b"%06o\0 " % signed
    fast, slow = _both(gzip.compress(bytes(raw)))
    assert fast == "unusual" and slow[0] == "read"


def test_a_truncated_archive_falls_back_and_is_refused(tmp_path: Path) -> None:
    archive = _tar([("snapshot/a.json", b"x" * 5000, 1), ("snapshot/b.json", b"y" * 5000, 1)])
    cut = gzip.compress(gzip.decompress(archive)[:3000])
    assert _both(cut)[0] == "unusual"
    (tmp_path / "cut.tar.gz").write_bytes(cut)
    with pytest.raises(SnapshotError, match=r"neither a snapshot directory nor a readable tar\.gz"):
        open_tree(tmp_path / "cut.tar.gz")


def test_a_stream_cut_inside_the_gzip_framing_falls_back() -> None:
    archive = _tar([("snapshot/a.json", b"x" * 5000, 1)])
    assert _both(archive[:-30])[0] == "unusual"


def test_an_uncompressed_tar_goes_to_tarfile() -> None:
    raw = bytes(_raw_tar([("snapshot/a.json", b"{}", 1)]))
    fast, slow = _both(raw)
    assert fast == "unusual" and [key for key, _ in slow[1]] == ["snapshot/a.json"]


def test_bytes_after_the_archive_are_ignored_as_tarfile_ignores_them() -> None:
    archive = _tar([("snapshot/a.json", b"{}", 1)])
    fast, slow = _both(archive + b"trailing garbage")
    assert fast == slow


def test_unsafe_names_are_refused_by_the_fast_reader_too() -> None:
    for name in ("snapshot/../../evil.json", "/etc/evil.json", "a//../b"):
        fast, slow = _both(_tar([("snapshot/ok.json", b"{}", 1), (name, b"{}", 1)]))
        assert fast == slow and fast[0] == "refused" and "unsafe path" in fast[1]


def test_the_size_limit_holds_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tree, "MAX_ARCHIVE_BYTES", 100)
    fast, slow = _both(_tar([("snapshot/a.json", b"x" * 60, 1), ("snapshot/b.json", b"x" * 60, 1)]))
    assert fast == slow == ("refused", "snapshot archive is larger than 2 GiB unpacked")


def test_a_directory_header_with_a_size_is_read_as_tarfile_reads_it() -> None:
    raw = _raw_tar([("snapshot/a.json", b"{}", 1)])
    directory = tarfile.TarInfo("snapshot/d")
    directory.type, directory.size = tarfile.DIRTYPE, 512
    header = directory.tobuf(tarfile.USTAR_FORMAT)
    fast, slow = _both(gzip.compress(header + bytes(raw)))  # tarfile reads the next block as a header
    assert fast in ("unusual", slow)


def _old_key(name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise SnapshotError(f"unsafe path in snapshot archive: {name!r}")
    return path.as_posix().removeprefix("./")


@given(st.text(alphabet="/.a\\ ", max_size=10))
def test_member_keys_are_what_purepath_made_of_them(name: str) -> None:
    try:
        expected: Any = _old_key(name)
    except SnapshotError as exc:
        expected = str(exc)
    try:
        got: Any = _member_key(name)
    except SnapshotError as exc:
        got = str(exc)
    assert got == expected


def test_a_pax_path_loses_its_trailing_slash_as_in_tarfile() -> None:
    archive = _odd(lambda tar: _add(tar, "snapshot/x", pax_headers={"path": "snapshot/x.json//"}))
    fast, slow = _both(archive)
    assert fast == slow and [key for key, _ in fast[1]] == ["snapshot/x.json"]
