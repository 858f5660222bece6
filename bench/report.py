"""The benchmark's Markdown summary and plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


#: The framework floor's variant that is wired as kbus's stages are.
KBUS_WIRING = "FastStream (kbus)"


def ceiling(e: float, w: float) -> float:
    """H = 1 / (1/E + 1/W): the pipeline's ceiling when embedding and import share the cores."""
    return 1 / (1 / e + 1 / w)


def _drift(drift: dict[str, Any] | None, e: float, w: float, pipeline: float) -> list[str]:
    """How far the machine moved between E and ingestion 1, and the ratio to H with E moved."""
    if not drift:
        return []
    rates = drift["chunks_per_s"]
    floor = rates.get("floor")
    if not floor or "before" not in rates or "after" not in rates:
        return []
    ratio = {m: pipeline / ceiling(e * rates[m] / floor, w) for m in ("before", "after")}
    return [
        f"The bare encoder on a sample ({drift['chunks']} chunks) right after E "
        f"{floor:.1f} chunks/s, right before ingestion 1 {rates['before']:.1f}, right after it "
        f"{rates['after']:.1f}; with E moved as the sample moved, pipeline / H = "
        f"**{ratio['before']:.2f}** (before) and **{ratio['after']:.2f}** (after).",
    ]


def framework_floor(floor: dict[str, Any], services_ms_per_chunk: float | None = None) -> list[str]:
    """The floor's table, and the share of the services' CPU it is."""
    lines = [
        f"The bus and framework floor ({floor['documents']} documents, {floor['chunks']} chunks: "
        "three stages that fetch, publish the next message awaiting the stream's "
        "acknowledgement, and ack, parsing nothing but where the contracts are named; the same "
        "messages; medians of the rounds):",
        "",
        "| variant | client ms per document | nats-server ms per document | client ms per chunk "
        "| share of the services' CPU per chunk |",
        "| --- | --- | --- | --- | --- |",
    ]

    def share(ms: float) -> str:
        return f"{100 * ms / services_ms_per_chunk:.1f}%" if services_ms_per_chunk else ""

    for variant, v in floor["variants"].items():
        lines.append(
            f"| {variant} | {v['client_ms_per_document']:.2f} | "
            f"{v['server_ms_per_document']:.2f} | {v['client_ms_per_chunk']:.2f} | "
            f"{share(v['client_ms_per_chunk'])} |"
        )
    for variant, what in (
        (KBUS_WIRING, "FastStream as kbus wires it"),
        (f"{KBUS_WIRING} + contracts", "With the contracts parsed and serialised too, it"),
    ):
        ours = floor["variants"].get(variant)
        if services_ms_per_chunk and ours:
            lines += [
                "",
                f"{what} takes {ours['client_ms_per_chunk']:.2f} ms per chunk before any other "
                f"work of kbus's: **{share(ours['client_ms_per_chunk'])}** of the services' CPU "
                f"per chunk in ingestion 1 ({services_ms_per_chunk:.1f} ms), against the 2% "
                f"target ({0.02 * services_ms_per_chunk:.2f} ms).",
            ]
    return lines


def markdown(r: dict[str, Any]) -> str:
    """A summary of every figure, with the ratios the targets are stated in."""
    lines = [
        f"# kbus benchmark ({r['documents']} documents, {r['chunks']} chunks, "
        f"{r['queries']} queries; {r['machine']}; embedder {r.get('model', 'all-MiniLM-L6-v2')})",
        "",
        *_ingestion_table(r),
        *_ingestion_cpu(r),
        *_ingestion_ratios(r),
        *_query_table(r),
        *_query_ratios(r),
        *_scaling(r),
        *_memory(r),
    ]
    return "\n".join(lines) + "\n"


def _floors(r: dict[str, Any]) -> tuple[float, float, float]:
    """The bare encoder's and the bare import's chunks/s, and the ceiling they make."""
    floors = r["floors"]
    return (
        floors["encode"]["chunks_per_s"],
        floors["import"]["chunks_per_s"],
        floors["ceiling_chunks_per_s"],
    )


def _ingestion_table(r: dict[str, Any]) -> list[str]:
    ing, floors, peer = r["ingestion"], r["floors"], r.get("peer")
    e, w, h = _floors(r)
    lines = [
        "## Ingestion",
        "",
        "| run | chunks/s | documents/s | seconds |",
        "| --- | --- | --- | --- |",
        f"| bare encoder (E) | {e:.1f} | | {floors['encode']['seconds']:.1f} |",
        f"| bare Weaviate import (W) | {w:.1f} | | {floors['import']['seconds']:.1f} |",
        f"| ceiling H = 1/(1/E+1/W) | {h:.1f} | | |",
    ]
    for n, run in enumerate(ing["runs"], 1):
        what = " (a new version, same text: vectors from the cache)" if run.get("version") else ""
        dropped = f"; {run['duplicates']} dropped as duplicates" if run.get("duplicates") else ""
        lines.append(
            f"| kbus pipeline, ingestion {n}{what}{dropped} | {run['chunks_per_s']:.1f} | "
            f"{run['documents_per_s']:.2f} | {run['seconds']:.1f} |"
        )
    if peer:
        lines.append(
            f"| LlamaIndex IngestionPipeline ({peer['chunks']} chunks) | "
            f"{peer['chunks_per_s']:.1f} | {peer['documents_per_s']:.2f} | {peer['seconds']:.1f} |"
        )
    fed = r["stream_embedder"]["chunks_per_s"]
    lines.append(
        f"| embedder service fed from chunks.ready | {fed:.1f} | | "
        f"{r['stream_embedder']['seconds']:.1f} |"
    )
    return lines


def _ingestion_cpu(r: dict[str, Any]) -> list[str]:
    floors, first = r["floors"], r["ingestion"]["runs"][0]
    cpu = first["cpu_ms_per_chunk"]
    services_cpu = sum(cpu.values())
    model_cpu = floors["encode"]["cpu_ms_per_chunk"]
    # The same work in-process: chunking and keyword analysis, the encoder, the store client.
    chunking_cpu = floors.get("chunking_cpu_ms_per_chunk", 0.0)
    client_cpu = floors["import"].get("client_cpu_ms_per_chunk", 0.0)
    in_process = model_cpu + chunking_cpu + client_cpu
    overhead = services_cpu - in_process
    lines = [
        "",
        "CPU per chunk during ingestion 1 (ms): "
        + ", ".join(f"{name} {value:.1f}" for name, value in cpu.items())
        + f"; all services {services_cpu:.1f}. The same work in-process: encoder "
        f"{model_cpu:.1f}, chunking {chunking_cpu:.2f}, Weaviate client {client_cpu:.2f} = "
        f"{in_process:.1f}. Bus, serialisation and framework overhead {overhead:.2f} ms per "
        f"chunk = **{100 * overhead / services_cpu:.1f}%** of the services' CPU (target <= 2%); "
        f"everything but the encoder: {services_cpu - model_cpu:.2f} ms = "
        f"{100 * (services_cpu - model_cpu) / services_cpu:.1f}%.",
    ]
    if r.get("framework_floor"):
        lines += ["", *framework_floor(r["framework_floor"], services_cpu)]
    servers = first.get("server_cpu_ms_per_chunk")
    if servers:
        bus = servers.get("nats", 0.0)
        floor_store = floors["import"].get("server_cpu_ms_per_chunk")
        lines += [
            "",
            f"The servers during ingestion 1: nats-server {bus:.2f} ms per chunk, Weaviate "
            f"{servers.get('weaviate', 0.0):.2f}"
            + (f" ({floor_store:.2f} in the bare import)" if floor_store is not None else "")
            + f". Counting nats-server as bus overhead too: {overhead + bus:.2f} ms per chunk = "
            f"**{100 * (overhead + bus) / (services_cpu + bus):.1f}%** of the services' and "
            f"nats-server's CPU.",
        ]
    loops = first.get("main_thread_cpu_ms_per_chunk")
    if loops:
        # The embedder's main thread is its event loop; its model runs in other threads.
        added = cpu["ingestor"] - chunking_cpu + cpu["searcher"] - client_cpu + loops["embedder"]
        model_threads = cpu["embedder"] - loops["embedder"]
        lines += [
            "",
            f"By thread: the embedder's event loop {loops['embedder']:.2f} ms per chunk, its "
            f"encoder threads {model_threads:.1f} ms against {model_cpu:.1f} alone "
            f"({model_threads - model_cpu:+.1f} ms beside the other processes). What the "
            f"services add to the in-process work (ingestor beyond chunking, searcher beyond "
            f"the store client, the embedder's event loop): {added:.2f} ms per chunk = "
            f"**{100 * added / services_cpu:.1f}%** of the services' CPU.",
        ]
    return lines


def _ingestion_ratios(r: dict[str, Any]) -> list[str]:
    ing, peer = r["ingestion"], r.get("peer")
    first = ing["runs"][0]
    e, w, h = _floors(r)
    fed = r["stream_embedder"]["chunks_per_s"]
    tts = first["time_to_searchable_ms"]
    lines = [
        "",
        f"Pipeline / H = **{_ratio(first['chunks_per_s'], h)}** (target >= 0.90). "
        f"Pipeline / E = {_ratio(first['chunks_per_s'], e)}. "
        f"Embedder service from the stream / E = **{_ratio(fed, e)}** (target >= 0.95); "
        f"against the bare encoder run just before it "
        f"({r['stream_embedder'].get('adjacent_encode_chunks_per_s', 0):.1f} chunks/s): "
        f"**{_ratio(fed, r['stream_embedder'].get('adjacent_encode_chunks_per_s', 0))}**.",
        *_drift(ing.get("encode_drift"), e, w, first["chunks_per_s"]),
        f"Time to searchable (publish to receipt, {ing['in_flight']} documents in flight): "
        f"p50 {tts['p50']:.0f} ms, p99 {tts['p99']:.0f} ms.",
    ]
    lone = ing.get("lone_ms")
    if lone:
        lines.append(
            f"A lone document on the idle pipeline ({lone['n']:.0f}, one at a time, every chunk "
            f"embedded): publish to receipt p50 {lone['p50']:.0f} ms, p99 {lone['p99']:.0f} ms."
        )
    if peer:
        lines.append(
            f"kbus / LlamaIndex ingestion (documents/s): "
            f"**{_ratio(first['documents_per_s'], peer['documents_per_s'])}** (target >= 3)."
        )
    return lines


def _query_table(r: dict[str, Any]) -> list[str]:
    peer = r.get("peer")
    lines = ["", "## Query (hybrid search, k=5; the default path reranks the first 5)", ""]
    lines += [
        "| run | concurrency | p50 ms | p95 ms | p99 ms | queries/s | embed p50 | search p50 | "
        "rerank p50 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    floor = r["query"]["floor"]
    ft, fr = floor["total"], floor["total_with_rerank"]
    lines.append(
        f"| in-process floor (embed + search) | 1 | {ft['p50']:.1f} | {ft['p95']:.1f} | "
        f"{ft['p99']:.1f} | | {floor['embed']['p50']:.1f} | {floor['search']['p50']:.1f} | |"
    )
    lines.append(
        f"| in-process floor + MaxSim rerank of 5 | 1 | {fr['p50']:.0f} | {fr['p95']:.0f} | "
        f"{fr['p99']:.0f} | | | | {floor['rerank']['p50']:.0f} |"
    )
    for load in r["query"]["bus"]:
        lat, st = load["latency_ms"], load["stages_ms"]
        name = "kbus over NATS" + (", first stage only" if load["rerank"] is False else "")
        lines.append(
            f"| {name} | {load['concurrency']} | {lat['p50']:.0f} | {lat['p95']:.0f} | "
            f"{lat['p99']:.0f} | {load['queries_per_s']:.2f} | {st['embed']['p50']:.1f} | "
            f"{st['search']['p50']:.1f} | {st['rerank']['p50']:.1f} |"
        )
    if peer:
        pl = peer["query_latency_ms"]
        lines.append(
            f"| LlamaIndex hybrid retriever (no rerank) | 1 | {pl['p50']:.0f} | {pl['p95']:.0f} | "
            f"{pl['p99']:.0f} | | | | |"
        )
    return lines


def _query_ratios(r: dict[str, Any]) -> list[str]:
    peer, floor = r.get("peer"), r["query"]["floor"]
    lines = [""]
    for rerank, name, key in (
        (None, "default path", "total_with_rerank"),
        (False, "first stage", "total"),
    ):
        one = next(
            (x for x in r["query"]["bus"] if x["concurrency"] == 1 and x["rerank"] is rerank), None
        )
        if one is None:
            continue
        lat, fl = one["latency_ms"], floor[key]
        lines.append(
            f"kbus / floor at concurrency 1, {name}: "
            f"p50 **{_ratio(lat['p50'], fl['p50'])}** (target <= 1.10), "
            f"p99 **{_ratio(lat['p99'], fl['p99'])}** (target <= 1.25); orchestration overhead "
            f"at p50: {lat['p50'] - fl['p50']:.1f} ms (target <= 5 ms).  "
        )
    own = floor.get("reranker_process")
    default_one = next(
        (x for x in r["query"]["bus"] if x["concurrency"] == 1 and x["rerank"] is None), None
    )
    if own and own["n"] and default_one:
        hop = default_one["stages_ms"]["rerank"]["mean"]
        lines.append(
            f"The rerank stage at concurrency 1 (means): {hop:.1f}"
            f" ms as the searcher times it (request to the reranker and back), "
            f"{own['mean']:.1f} ms scoring inside the reranker process, "
            f"{floor['rerank']['mean']:.1f} ms for the same scorer in the bench's process.  "
        )
    first_stage = next(
        (x for x in r["query"]["bus"] if x["concurrency"] == 1 and x["rerank"] is False), None
    )
    if peer and first_stage:
        pl, kl = peer["query_latency_ms"], first_stage["latency_ms"]
        lines.append(
            f"kbus first stage / LlamaIndex's retriever at concurrency 1 (alternating): "
            f"p50 **{_ratio(kl['p50'], pl['p50'])}**, p99 **{_ratio(kl['p99'], pl['p99'])}** "
            f"(target: below 1)."
        )
    return lines


def _scaling(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    scaling = r.get("scaling")
    if scaling:
        base = scaling[0]["chunks_per_s"]
        lines += ["", "## Scaling (embedder processes, one thread each)", ""]
        lines += ["| processes | chunks/s | ratio to one |", "| --- | --- | --- |"]
        for s in scaling:
            rate = s["chunks_per_s"]
            lines.append(f"| {s['processes']} | {rate:.1f} | {_ratio(rate, base)} |")
    return lines


def _memory(r: dict[str, Any]) -> list[str]:
    lines = ["", "## Memory (MB, per service)", ""]
    lines += [
        "| service | peak after ingestion 1 | peak after ingestion 2 | resident after 1 | "
        "resident after 2 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, m in r["memory"].items():
        lines.append(
            f"| {name} | {m[0]['peak_kb'] / 1024:.0f} | {m[1]['peak_kb'] / 1024:.0f} | "
            f"{m[0]['rss_kb'] / 1024:.0f} | {m[1]['rss_kb'] / 1024:.0f} |"
        )
    return lines


def plot(r: dict[str, Any], path: Path) -> None:
    """Ingestion rates beside their floors, and query latency beside the in-process floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    floors = r["floors"]
    names = ["encoder E", "import W", "ceiling H", "kbus"]
    rates = [
        floors["encode"]["chunks_per_s"],
        floors["import"]["chunks_per_s"],
        floors["ceiling_chunks_per_s"],
        r["ingestion"]["runs"][0]["chunks_per_s"],
    ]
    if r.get("peer"):
        names.append("LlamaIndex")
        rates.append(r["peer"]["chunks_per_s"])
    left.bar(names, rates, color=["#999", "#999", "#555", "#1f77b4", "#ff7f0e"][: len(names)])
    left.set_yscale("log")
    left.set_ylabel("chunks per second (log)")
    left.set_title("Ingestion")
    floor = r["query"]["floor"]
    labels, p50, p99 = (
        ["floor first stage", "floor reranked"],
        [floor["total"]["p50"], floor["total_with_rerank"]["p50"]],
        [floor["total"]["p99"], floor["total_with_rerank"]["p99"]],
    )
    for load in r["query"]["bus"]:
        # rerank None: the searcher's default (reranked); False: the first stage alone.
        stage = " first stage" if load["rerank"] is False else ""
        labels.append(f"kbus c{load['concurrency']}{stage}")
        p50.append(load["latency_ms"]["p50"])
        p99.append(load["latency_ms"]["p99"])
    xs = range(len(labels))
    right.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50")
    right.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
    right.set_xticks(list(xs), labels, rotation=30, ha="right")
    right.set_ylabel("ms")
    right.set_title("Query latency")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def save(out: Path, result: Any) -> None:
    """A bench's result as JSON at ``out`` (its folder made if missing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
