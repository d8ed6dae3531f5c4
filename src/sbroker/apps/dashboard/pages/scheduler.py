"""The scheduler's tasks (with cancel) and the durable pipeline runs (with cancel)."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from sbroker.apps.dashboard import actions, pipeline_runs, timeline
from sbroker.apps.dashboard.reader import page_number
from sbroker.apps.dashboard.site import Site


def routes(site: Site) -> list[BaseRoute]:
    def scheduler(request: Request) -> dict[str, Any]:
        q = request.query_params
        data = timeline.scheduler_page(site.reader, q, page_number(q.get("page")),
                                       site.options.spark_ui)
        return {**data, "filters": q}

    def runs(request: Request) -> dict[str, Any]:
        return pipeline_runs.runs_page(site.broker)

    def cancel(request: Request, form: FormData) -> str:
        return actions.cancel(site.broker, request.path_params["log_id"])

    def cancel_run(request: Request, form: FormData) -> str:
        return actions.cancel_run(site.broker, request.path_params["run_id"])

    return [
        Route("/scheduler", site.page("scheduler.html", scheduler)),
        Route("/scheduler/runs", site.page("pipeline_runs.html", runs)),
        Route("/scheduler/tasks/{log_id:int}/cancel", site.action(cancel, "/scheduler"),
              methods=["POST"]),
        Route("/scheduler/runs/{run_id:int}/cancel", site.action(cancel_run, "/scheduler/runs"),
              methods=["POST"]),
    ]
