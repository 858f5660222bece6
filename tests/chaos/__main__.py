"""``python -m tests.chaos``: one chaos run; prints the report and exits 1 on any damage."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
from dataclasses import fields
from pathlib import Path

from tests.chaos.harness import ChaosConfig, run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    defaults = ChaosConfig()
    for f in fields(ChaosConfig):
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool) and f.default:
            parser.add_argument("--no-" + flag[2:], dest=f.name, action="store_false")
        elif isinstance(f.default, bool):
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(getattr(defaults, f.name)), default=f.default)
    parser.add_argument("--out", type=Path, default=Path("chaos-results.json"))
    parser.add_argument("--keep", type=Path, help="keep server data and service logs here")
    args = parser.parse_args()
    config = ChaosConfig(**{f.name: getattr(args, f.name) for f in fields(ChaosConfig)})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if args.keep:
        report = asyncio.run(run_chaos(config, args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="kbus-chaos-") as root:
            report = asyncio.run(run_chaos(config, Path(root)))
    args.out.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    print(json.dumps(report.as_dict(), indent=2))
    return 0 if report.as_expected() else 1


if __name__ == "__main__":
    sys.exit(main())
