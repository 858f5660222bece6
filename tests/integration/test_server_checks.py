"""Start-up checks: a server whose streams would not protect data is refused, saying why."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kbus_runtime.declaring import declare_streams, open_bucket
from kbus_runtime.settings import BusSettings
from nats.aio.client import Client
from nats.js.api import DiscardPolicy, StorageType


async def test_a_stream_in_memory_with_discard_old_is_named_and_refused(
    nc: Client, bus: BusSettings
) -> None:
    topology = bus.topology
    js = nc.jetstream()
    wrong = replace(topology.documents_stream.config)
    wrong.storage = StorageType.MEMORY
    wrong.discard = DiscardPolicy.OLD
    await js.add_stream(wrong)

    locked_down = bus.model_copy(update={"declare_streams": False}).topology
    with pytest.raises(RuntimeError) as checked:
        await declare_streams(js, locked_down)
    message = str(checked.value)
    assert topology.documents_stream.name in message
    assert "storage is memory, kbus needs file" in message
    assert "discard is old, kbus needs new" in message

    # A service that may declare streams cannot change the storage either: it says so.
    with pytest.raises(RuntimeError, match="cannot be changed"):
        await declare_streams(js, topology)


async def test_a_well_configured_server_passes(nc: Client, bus: BusSettings) -> None:
    js = nc.jetstream()
    await declare_streams(js, bus.topology)
    await declare_streams(js, bus.model_copy(update={"declare_streams": False}).topology)


async def test_a_bucket_whose_limits_changed_takes_the_configured_ones_and_keeps_its_data(
    nc: Client, bus: BusSettings
) -> None:
    js = nc.jetstream()
    wanted = bus.topology.tombstones_kv
    old = await js.create_key_value(replace(wanted, max_bytes=-1, description="old"))
    await old.put("kept", b"1")

    kv = await open_bucket(js, wanted, create=True)

    config = (await js.stream_info(f"KV_{wanted.bucket}")).config
    assert (config.max_bytes, config.description) == (wanted.max_bytes, wanted.description)
    assert (await kv.get("kept")).value == b"1"
    # Opening it again, now that it matches, changes nothing.
    await open_bucket(js, wanted, create=True)
