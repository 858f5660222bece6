"""``python -m kbus_dev install | up | demo | down | asyncapi``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kbus_dev import demo, servers, stack


def main() -> None:
    if sys.argv[1:2] == ["asyncapi"]:
        from kbus_dev.asyncapi import main as asyncapi

        raise SystemExit(asyncapi(sys.argv[2:]))
    if sys.argv[1:2] == ["nats-auth"]:
        from kbus_dev.natsauth import main as nats_auth

        raise SystemExit(nats_auth(sys.argv[2:]))
    if sys.argv[1:2] == ["certs"]:
        from kbus_dev.certs import main as certs

        raise SystemExit(certs(sys.argv[2:]))
    if sys.argv[1:2] == ["k8s"]:
        from kbus_dev.k8s import main as k8s

        raise SystemExit(k8s(sys.argv[2:]))
    if sys.argv[1:2] == ["settings-doc"]:
        from kbus_dev.settings_doc import update

        raise SystemExit(update(check="--check" in sys.argv))
    parser = argparse.ArgumentParser(prog="python -m kbus_dev")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser(
        "install", help="install nats-server, weaviate-server and the test tools with Go"
    )
    install.add_argument(
        "--llm",
        action="store_true",
        help="also build the local LLM server (llama-cpp-python and SmolLM2; minutes)",
    )
    start = sub.add_parser(
        "up", help="start NATS, Weaviate and the four services in the background"
    )
    start.add_argument(
        "--cluster", action="store_true", help="three NATS servers and three Weaviate nodes"
    )
    start.add_argument(
        "--llm",
        action="store_true",
        help="also serve SmolLM2-135M-Instruct (OpenAI-compatible) and point KBUS_LLM_URL at it",
    )
    run_demo = sub.add_parser("demo", help="up, publish examples/, ask two questions")
    run_demo.add_argument("--examples", type=Path, default=Path("examples"))
    sub.add_parser("down", help="stop everything that up started")
    args = parser.parse_args()
    if args.command == "install":
        from kbus_dev.k8s import KUBECONFORM, KUSTOMIZE
        from kbus_dev.observability import ensure_jaeger, ensure_promtool

        for path in servers.ensure_installed():
            print(path)
        for tool in (KUBECONFORM, KUSTOMIZE):
            print(servers.ensure_binary(*tool))
        print(ensure_jaeger())
        print(ensure_promtool())
        if args.llm:
            from kbus_dev.llm import ensure_llm

            print(ensure_llm())
    elif args.command == "up":
        stack.up(cluster=args.cluster, llm=args.llm)
    elif args.command == "demo":
        running = stack.up()
        demo.main(running.nats_url, args.examples)
        print("\nkbus keeps running; `make stop` stops it.")
    elif args.command == "down":
        stack.down()


if __name__ == "__main__":
    main()
