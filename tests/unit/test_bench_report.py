"""The benchmark's summary states every ratio its targets are written in."""

from __future__ import annotations

from typing import Any

from bench.framework import summarise
from bench.report import markdown
from bench.stats import percentiles


def _lat(p50: float) -> dict[str, float]:
    return {"p50": p50, "p95": p50 * 1.5, "p99": p50 * 2, "mean": p50, "n": 10}


def _result() -> dict[str, Any]:
    load = {
        "concurrency": 1,
        "rerank": None,
        "queries": 10,
        "queries_per_s": 30.0,
        "latency_ms": _lat(30.0),
        "stages_ms": {k: _lat(10.0) for k in ("embed", "search", "rerank", "server")},
    }
    run = {
        "documents": 100,
        "chunks": 400,
        "seconds": 20.0,
        "documents_per_s": 5.0,
        "chunks_per_s": 20.0,
        "time_to_searchable_ms": _lat(1000.0),
        "cpu_ms_per_chunk": {"ingestor": 1.0, "embedder": 50.0, "searcher": 3.0, "reranker": 0.0},
        "main_thread_cpu_ms_per_chunk": {
            "ingestor": 1.0,
            "embedder": 0.8,
            "searcher": 3.0,
            "reranker": 0.0,
        },
        "server_cpu_ms_per_chunk": {"nats": 2.0, "weaviate": 4.0},
    }
    return {
        "machine": "2 cores",
        "documents": 100,
        "chunks": 400,
        "queries": 10,
        "floors": {
            "encode": {"chunks_per_s": 25.0, "seconds": 16.0, "cpu_ms_per_chunk": 48.0},
            "import": {
                "chunks_per_s": 400.0,
                "seconds": 1.0,
                "client_cpu_ms_per_chunk": 1.5,
                "server_cpu_ms_per_chunk": 3.0,
            },
            "ceiling_chunks_per_s": 1 / (1 / 25 + 1 / 400),
            "chunking_cpu_ms_per_chunk": 0.5,
        },
        "ingestion": {
            "runs": [run, {**run, "version": "again", "duplicates": 3}],
            "in_flight": 64,
            "lone_ms": _lat(200.0),
        },
        "stream_embedder": {
            "chunks_per_s": 24.0,
            "seconds": 16.7,
            "adjacent_encode_chunks_per_s": 30.0,
        },
        "query": {
            "bus": [{**load, "latency_ms": _lat(750.0)}, {**load, "rerank": False}],
            "floor": {
                "embed": _lat(10.0),
                "search": _lat(15.0),
                "rerank": _lat(700.0),
                "total": _lat(25.0),
                "total_with_rerank": _lat(725.0),
                "reranker_process": {"mean": 705.0, "n": 10},
            },
        },
        "scaling": [{"processes": n, "chunks_per_s": 10.0 * n} for n in (1, 2, 3)],
        "peer": {
            "chunks": 410,
            "chunks_per_s": 30.0,
            "documents_per_s": 2.5,
            "seconds": 40.0,
            "query_latency_ms": _lat(28.0),
        },
        "memory": {"embedder": [{"rss_kb": 1024, "peak_kb": 2048}] * 2},
    }


def test_the_summary_gives_each_target_as_a_ratio() -> None:
    text = markdown(_result())
    h = 1 / (1 / 25 + 1 / 400)
    assert f"Pipeline / H = **{20 / h:.2f}**" in text
    assert "Embedder service from the stream / E = **0.96**" in text
    assert "(30.0 chunks/s): **0.80**" in text
    assert "kbus / LlamaIndex ingestion (documents/s): **2.00**" in text
    assert "first stage: p50 **1.20** (target <= 1.10)" in text
    assert "default path: p50 **1.03** (target <= 1.10)" in text
    assert "at p50: 5.0 ms" in text
    assert "at p50: 25.0 ms" in text
    assert "| 3 | 30.0 | 3.00 |" in text
    assert "publish to receipt p50 200 ms, p99 400 ms" in text
    assert "LlamaIndex's retriever at concurrency 1 (alternating): p50 **1.07**" in text
    # 54 ms of services' CPU per chunk; in-process 48 + 0.5 + 1.5 = 50: 4 ms, 7.4%.
    assert "overhead 4.00 ms per chunk = **7.4%**" in text
    # Against the bare encoder alone: 6 ms, 11.1%.
    assert "everything but the encoder: 6.00 ms = 11.1%" in text
    # (1 - 0.5) + (3 - 1.5) + 0.8 = 2.8 ms of 54: 5.2%; encoder threads 49.2 against 48.
    assert "encoder threads 49.2 ms against 48.0 alone (+1.2 ms" in text
    assert "2.80 ms per chunk = **5.2%**" in text
    assert "10.0 ms as the searcher times it" in text
    assert "| kbus pipeline, ingestion 1 | 20.0 |" in text
    assert "ingestion 2 (a new version, same text: vectors from the cache); 3 dropped" in text
    assert "705.0 ms scoring inside the reranker process, 700.0 ms" in text
    # nats-server's 2 ms counted as bus overhead too: (4 + 2) / (54 + 2) = 10.7%.
    assert "nats-server 2.00 ms per chunk, Weaviate 4.00 (3.00 in the bare import)" in text
    assert "6.00 ms per chunk = **10.7%** of the services' and nats-server's CPU" in text


def test_percentiles() -> None:
    stats = percentiles([float(v) for v in range(1, 101)])
    assert stats["p50"] == 50.5
    assert round(stats["p99"], 2) == 99.01
    assert percentiles([])["n"] == 0


def test_the_summary_moves_e_as_the_machine_moved() -> None:
    result = _result()
    assert "right after E" not in markdown(result)
    result["ingestion"]["encode_drift"] = {
        "chunks": 100,
        "chunks_per_s": {"floor": 20.0, "before": 19.0, "after": 18.0},
    }
    text = markdown(result)
    # E 25 moved by 19/20 and 18/20: 20 x (1/23.75 + 1/400) = 0.89, 20 x (1/22.5 + 1/400) = 0.94.
    assert "sample (100 chunks) right after E 20.0 chunks/s" in text
    assert "before ingestion 1 19.0, right after it 18.0" in text
    assert "pipeline / H = **0.89** (before) and **0.94** (after)" in text


def test_the_summary_gives_the_framework_floor_as_a_share_of_the_services_cpu() -> None:
    result = _result()
    assert "framework floor" not in markdown(result)
    rounds = {
        "nats-py, fetch 16": [(1.0, 0.5), (1.2, 0.4), (0.8, 0.6)],
        "FastStream (kbus)": [(6.0, 2.0), (4.0, 3.0), (5.0, 2.5)],
        "FastStream (kbus) + contracts": [(8.0, 2.0), (8.0, 3.0), (9.0, 2.5)],
    }
    result["framework_floor"] = summarise(
        {v: [{"client_ms": c, "server_ms": s} for c, s in rows] for v, rows in rounds.items()},
        documents=100,
        chunks=400,
    )
    text = markdown(result)
    # Medians: 1.0 and 5.0 ms per document; 4 chunks a document: 0.25 and 1.25 ms per chunk,
    # of the services' 54 ms per chunk: 0.5% and 2.3%; the 2% target is 1.08 ms.
    assert "(100 documents, 400 chunks: three stages" in text
    assert "| nats-py, fetch 16 | 1.00 | 0.50 | 0.25 | 0.5% |" in text
    assert "| FastStream (kbus) | 5.00 | 2.50 | 1.25 | 2.3% |" in text
    assert "it takes 1.25 ms per chunk before any other work of kbus's: **2.3%**" in text
    assert "(54.0 ms), against the 2% target (1.08 ms)" in text
    # With the contracts: 8 ms per document, 2 ms per chunk, 3.7%.
    assert (
        "serialised too, it takes 2.00 ms per chunk before any other work of kbus's: **3.7%**"
        in text
    )
