"""The ``sbroker`` command line: the group, and the one list of command modules.

Each module of ``sbroker.cli`` named in ``COMMAND_MODULES`` holds one command group and lists
its click commands in ``COMMANDS``; adding a module is one line here.  Errors print one line
and exit with a non-zero code.
"""

from __future__ import annotations

import importlib

import click

DB_HELP = ("Broker database: a file path, sqlite:///path or postgresql://user:pass@host/db"
           " (env SBROKER_DB).")

COMMAND_MODULES = (
    "messages",   # init, send, receive, peek
    "status",     # status, views
    "queues",     # queue list | create | enable | disable | drop
    "network",    # endpoint create | list | drop, route create | list | drop
    "run",        # run a pipeline file through the scheduler
    "runs",       # runs | runs show RUN_ID: durable pipeline runs
    "schedule",   # schedule add | list | remove: pipelines started by serve
    "serve",      # serve a started broker
    "activator",  # the external activator
    "poison",     # poison list | incidents | redrive
    "demo",       # a dialog, step by step
    "dashboard",  # the web dashboard
    "sql",        # T-SQL scripts, like sqlcmd
)


@click.group()
@click.version_option(package_name="sbroker", prog_name="sbroker")
@click.option("--db", default="sbroker.db", envvar="SBROKER_DB", show_default=True, help=DB_HELP)
@click.pass_context
def main(ctx: click.Context, db: str) -> None:
    """sbroker: SQL Server Service Broker rebuilt for Python."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


for _name in COMMAND_MODULES:
    for _command in importlib.import_module(f"sbroker.cli.{_name}").COMMANDS:
        main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
