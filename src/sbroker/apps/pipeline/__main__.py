"""``python -m sbroker.apps.pipeline FILE [-p name=value ...]``: run a pipeline with no broker."""

from __future__ import annotations

import argparse
import sys

from sbroker.apps.pipeline.command import run_command


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the file in this process (LocalScheduler + SparkRunner)."""
    parser = argparse.ArgumentParser(prog="python -m sbroker.apps.pipeline", description=__doc__)
    parser.add_argument("file", help="the pipeline file (TOML)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                        help="override a [params] value (repeatable)")
    args = parser.parse_args(argv)
    code, _ = run_command(args.file, args.param)
    return code


if __name__ == "__main__":
    sys.exit(main())
