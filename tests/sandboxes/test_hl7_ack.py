"""The HL7v2 ACK (SPEC §5.2) and MLLP deframing, as pure functions (`sandboxes/hl7/ack.py`, `mllp.py`)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine

from assay.formats.hl7 import parse_message
from assay.sandboxes.hl7 import mllp
from assay.sandboxes.hl7.ack import acknowledge, inspect, reject, too_large
from assay.sandboxes.hl7.mllp import END, START, MllpFramer, MllpListener, frame
from assay.sandboxes.surface import Deployment

ADT = (
    "MSH|^~\\&|REG|HOSP|EHR|ASSAY-X|20260301120000||ADT^A04^ADT_A01|CTRL-1|P|2.5.1\r"
    "EVN|A04|20260301120000\r"
    "PID|1||MRN123^^^HOSP^MR||SMITH^JOHN||19800101|M\r"
)


def test_an_accepted_message_gets_aa_with_sender_and_receiver_swapped() -> None:
    ack = acknowledge(inspect(ADT))
    parsed = parse_message(ack.text)
    assert ack.code == "AA" and ack.control_id == "CTRL-1"
    assert [parsed.read(p).value for p in ("MSH.3", "MSH.4", "MSH.5", "MSH.6")] == [
        "EHR",
        "ASSAY-X",
        "REG",
        "HOSP",
    ]
    assert parsed.read("MSH.9").value == "ACK^A04^ACK" and parsed.read("MSH.12").value == "2.5.1"
    assert parsed.read("MSH.10").value not in (None, "CTRL-1")
    assert parsed.read("MSA.1").value == "AA" and parsed.read("MSA.2").value == "CTRL-1"
    assert parsed.segments("ERR") == 0


def test_a_missing_control_id_is_ae_naming_the_field() -> None:
    ack = acknowledge(inspect(ADT.replace("|CTRL-1|", "||")))
    parsed = parse_message(ack.text)
    assert ack.code == "AE" and parsed.read("MSA.1").value == "AE"
    assert parsed.read("ERR.3.1").value == "101" and "MSH-10" in (parsed.read("ERR.8").value or "")


def test_garbage_is_ar_with_a_readable_reason() -> None:
    ack = acknowledge(inspect(b"\x00\xffnot hl7 at all"))
    parsed = parse_message(ack.text)
    assert ack.code == "AR" and parsed.read("MSA.1").value == "AR"
    assert "cannot be parsed" in (parsed.read("ERR.8").value or "")


def test_a_routing_refusal_keeps_the_senders_header() -> None:
    ack = acknowledge(reject(inspect(ADT), "task run tr_1 is completed/completed: it takes no messages"))
    parsed = parse_message(ack.text)
    assert ack.code == "AR" and parsed.read("MSA.2").value == "CTRL-1"
    assert parsed.read("MSH.5").value == "REG" and "takes no messages" in (parsed.read("ERR.8").value or "")


def test_the_framer_reads_split_frames_junk_and_restarts() -> None:
    framer = MllpFramer(max_bytes=100)
    stream = b"junk" + START + b"one" + END + b"\r\n" + START + b"lost" + START + b"two" + END
    frames = [f for byte in stream for f in framer.feed(bytes([byte]))]
    assert [f.payload for f in frames] == [b"one", b"two"]


def test_an_oversize_frame_is_reported_and_the_next_one_read() -> None:
    framer = MllpFramer(max_bytes=10)
    frames = framer.feed(START + b"x" * 50)
    frames += framer.feed(b"y" * 50 + END[:1])
    frames += framer.feed(END[1:] + START + b"ok" + END)
    assert [(f.payload, f.oversize) for f in frames] == [(b"x" * 10, 100), (b"ok", 0)]


def test_an_oversize_frame_in_one_read_keeps_its_start_too() -> None:
    framer = MllpFramer(max_bytes=10)
    frames = framer.feed(START + b"MSH|" + b"z" * 30 + END + START + b"ok" + END)
    assert [(f.payload, f.oversize) for f in frames] == [(b"MSH|zzzzzz", 34), (b"ok", 0)]


def test_an_oversize_message_is_refused_in_its_own_headers_terms() -> None:
    """Its MSH (the first segment of the kept start) routes the refusal and is echoed."""
    big = ADT.encode() + b"NTE|1||" + b"x" * (1024 * 1024) + b"\r"
    refused = inspect(big)
    ack = acknowledge(refused)
    parsed = parse_message(ack.text)
    assert refused.facility == "ASSAY-X" and ack.code == "AR" and ack.control_id == "CTRL-1"
    assert parsed.read("MSH.5").value == "REG" and "over the 1 MB limit" in (parsed.read("ERR.8").value or "")
    assert too_large(b"\x0b not a header at all", 2_000_000).message is None


@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(
        st.binary(max_size=40).map(lambda b: b.replace(b"\x0b", b"").replace(b"\x1c", b"")), max_size=6
    ),
    junk=st.binary(max_size=8).map(lambda b: b.replace(b"\x0b", b"")),
    cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=20),
)
def test_any_chunking_yields_the_same_frames(messages: list[bytes], junk: bytes, cuts: list[int]) -> None:
    stream = b"".join(junk + START + message + END for message in messages)
    framer, frames, at, i = MllpFramer(max_bytes=1000), [], 0, 0
    while at < len(stream):
        size = cuts[i % len(cuts)]
        frames += framer.feed(stream[at : at + size])
        at, i = at + size, i + 1
    assert [f.payload for f in frames] == messages


def test_an_idle_connection_is_closed_and_the_listener_keeps_serving() -> None:
    deployment = Deployment(create_engine("sqlite://"))
    listener = MllpListener(deployment, 0, idle_timeout=0.2)

    async def scenario() -> tuple[bytes, bytes]:
        port = await listener.start()
        try:
            idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
            closed = await asyncio.wait_for(idle_reader.read(), 10)  # EOF once the idle timeout passed
            idle_writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(frame(b"not hl7"))
            answer = await asyncio.wait_for(reader.readuntil(END), 10)
            writer.close()
            return closed, answer
        finally:
            await listener.stop()

    closed, answer = asyncio.run(scenario())
    assert closed == b""
    assert parse_message(answer.decode()).read("MSA.1").value == "AR"


def test_connections_past_the_cap_are_closed_and_the_listener_keeps_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mllp, "MAX_CONNECTIONS", 2)
    listener = MllpListener(Deployment(create_engine("sqlite://")), 0, idle_timeout=30)

    async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        writer.write(frame(b"not hl7"))
        return await asyncio.wait_for(reader.readuntil(END), 10)

    async def scenario() -> tuple[list[bytes], bytes, bytes]:
        port = await listener.start()
        try:
            first, second = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
            answers = [await ask(*first), await ask(*second)]  # both served: their threads exist
            third_reader, third_writer = await asyncio.open_connection("127.0.0.1", port)
            refused = await asyncio.wait_for(third_reader.read(), 10)  # closed at once: EOF
            third_writer.close()
            await third_writer.wait_closed()
            first[1].close()
            for _ in range(200):  # its thread ends once it reads the EOF
                if len(listener._connections) < 2:
                    break
                await asyncio.sleep(0.01)
            fourth = await asyncio.open_connection("127.0.0.1", port)
            later = await ask(*fourth)
            for _, writer in (first, second, fourth):
                writer.close()
                await writer.wait_closed()
            return answers, refused, later
        finally:
            await listener.stop()

    answers, refused, later = asyncio.run(scenario())
    assert [parse_message(a.decode()).read("MSA.1").value for a in answers] == ["AR", "AR"]
    assert refused == b""
    assert parse_message(later.decode()).read("MSA.1").value == "AR"


def test_stop_answers_the_message_in_hand_then_closes_every_connection() -> None:
    listener = MllpListener(Deployment(create_engine("sqlite://")), 0, idle_timeout=30)

    async def scenario() -> tuple[bytes, bytes, bool]:
        port = await listener.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(frame(b"not hl7"))
        answer = await asyncio.wait_for(reader.readuntil(END), 10)
        await asyncio.wait_for(listener.stop(), 10)
        closed = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        await writer.wait_closed()
        try:
            _, late = await asyncio.open_connection("127.0.0.1", port)
            late.close()
            refused = False
        except OSError:
            refused = True
        return answer, closed, refused

    answer, closed, refused = asyncio.run(scenario())
    assert parse_message(answer.decode()).read("MSA.1").value == "AR"
    assert closed == b"" and refused
    assert not listener._connections


def test_an_unknown_facility_is_refused_saying_what_to_send() -> None:
    from assay.sandboxes.hl7.store import unroutable

    ack = unroutable(inspect(ADT.encode()), "ASSAY-X")
    reason = parse_message(ack.text).read("ERR.8").value or ""
    assert ack.code == "AR"
    assert reason == (
        "receiving facility 'ASSAY-X' (MSH-6.1) belongs to no started task run; "
        "use the receiving_facility that start returned"
    )
