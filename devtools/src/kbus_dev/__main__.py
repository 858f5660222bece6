"""``python -m kbus_dev <command>``: one parser for every developer command.

``install`` builds what the demo runs (nats-server, weaviate-server); ``--test-tools`` adds what
only the tests run (kubeconform, kustomize, the nats CLI, Jaeger, promtool) and ``--llm`` the local
LLM server. The generators and checkers (``asyncapi``, ``nats-auth``, ``certs``, ``k8s``,
``permissions-doc``, ``settings-doc``) take their own options after the command's name.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

# command -> (module:function taking argv, help); each tool parses the arguments after its name.
TOOLS = {
    "asyncapi": ("kbus_dev.asyncapi:main", "write (or --check) docs/asyncapi.yaml"),
    "tables-doc": ("kbus_dev.tables_doc:main", "write (or --check) the budgets and formats tables"),
    "nats-auth": ("kbus_dev.natsauth:main", "write the NATS accounts and credentials"),
    "certs": ("kbus_dev.certs:main", "write a CA and TLS certificates for NATS"),
    "k8s": ("kbus_dev.k8s:main", "build and validate deploy/k8s"),
    "permissions-doc": ("kbus_dev.permissions_doc:main", "write (or --check) the permissions list"),
    "settings-doc": ("kbus_dev.settings_doc:main", "write (or --check) the settings table"),
    "screenshot": ("kbus_dev.screenshot:main", "the README's picture of the demo's web console"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="build nats-server and weaviate-server with Go")
    _switches(
        install,
        test_tools="also build what only the tests run: kubeconform, kustomize, nats, jaeger, "
        "promtool",
        llm="also build the local LLM server (llama-cpp-python and SmolLM2; minutes)",
    )
    start = sub.add_parser("up", help="start NATS, Weaviate and kbus's services in the background")
    _switches(
        start,
        cluster="three NATS servers and three Weaviate nodes",
        locked="as deployed: NATS in operator mode, the tenant 'demo' an account (make demo)",
        llm="also serve SmolLM2-135M-Instruct (OpenAI-compatible) and point KBUS_LLM_URL at it",
    )
    run_demo = sub.add_parser("demo", help="up, publish examples/, ask two questions")
    run_demo.add_argument("--examples", type=Path, default=Path("examples"))
    sub.add_parser("down", help="stop everything that up started")
    for name, (_, text) in TOOLS.items():
        sub.add_parser(name, help=text, add_help=False)  # the tool parses what follows
    return parser


def _switches(parser: argparse.ArgumentParser, **helps: str) -> None:
    """Flags that are off unless given (``test_tools`` is ``--test-tools``)."""
    for name, text in helps.items():
        parser.add_argument("--" + name.replace("_", "-"), action="store_true", help=text)


def _install(test_tools: bool, llm: bool) -> None:
    from kbus_dev import servers

    for path in servers.ensure_installed():
        print(path)
    if test_tools:
        from kbus_dev.browser import ensure_browser
        from kbus_dev.k8s import KUBECONFORM, KUSTOMIZE
        from kbus_dev.observability import ensure_jaeger, ensure_promtool

        for tool in (KUBECONFORM, KUSTOMIZE, servers.NATSCLI):
            print(servers.ensure_binary(*tool))
        print(ensure_jaeger())
        print(ensure_promtool())
        print(ensure_browser())
    if llm:
        from kbus_dev.llm import ensure_llm

        print(ensure_llm())


def _tool(name: str, argv: list[str]) -> int:
    module, function = TOOLS[name][0].split(":")
    run = getattr(importlib.import_module(module), function)
    return int(run(argv))


def main() -> None:
    parser = _parser()
    args, rest = parser.parse_known_args()
    if args.command in TOOLS:
        raise SystemExit(_tool(args.command, rest))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    # Imported by the commands that run the stack (a tool such as nats-auth starts without).
    from kbus_dev import demo, stack

    if args.command == "install":
        _install(args.test_tools, args.llm)
    elif args.command == "up":
        stack.up(cluster=args.cluster, llm=args.llm, locked=args.locked)
    elif args.command == "demo":
        running = stack.up(locked=True)
        credential = Path(running.credential) if running.credential else None
        demo.main(running.nats_url, args.examples, credential)
        print(demo.try_it(running.nats_url, credential, running.console_url))
    elif args.command == "down":
        stack.down()


if __name__ == "__main__":
    main()
