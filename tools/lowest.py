"""The lowest versions pyproject.toml allows, as pip constraints (``name==version``).

``python -m tools.lowest [EXTRA ...]`` prints a constraint for every dependency of
``[project]`` and of the extras named that has a lower bound (``>=``); CI installs them with
``pip install -c`` and runs tests on them, so that each lower bound is one that was tested.
An exact pin (``==``, the dev tools) is printed as it is.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(.*)$")


def lowest(requirement: str) -> str | None:
    """``name==version`` for a requirement's lower bound or exact pin; None without one."""
    match = REQUIREMENT.match(requirement.split(";", 1)[0])
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    name, spec = match.groups()
    bound = re.search(r"(>=|==)\s*([^,\s]+)", spec)
    return f"{name.lower()}=={bound.group(2)}" if bound else None


def constraints(extras: list[str], pyproject: Path = PYPROJECT) -> list[str]:
    """The constraints for ``[project]``'s dependencies and ``extras``, one per package."""
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = sorted(set(extras) - set(optional))
    if unknown:
        raise SystemExit(f"no such extra in {pyproject.name}: {', '.join(unknown)}")
    out: dict[str, str] = {}
    for req in [*project["dependencies"], *(r for e in extras for r in optional[e])]:
        pin = lowest(req)
        if pin is None:
            continue
        name = pin.split("==")[0]
        if name != project["name"] and (name not in out or "==" in req):
            out[name] = pin  # an exact pin (the dev tools) wins over a lower bound
    return sorted(out.values())


if __name__ == "__main__":
    print("\n".join(constraints(sys.argv[1:])))
