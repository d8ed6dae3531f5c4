"""pyproject.toml gives ranges, constraints.txt the one set installed by `make setup` and CI,
and `python -m tools.lowest` the lowest versions the ranges allow, which CI tests once."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.lowest import constraints

ROOT = Path(__file__).resolve().parents[2]


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"].values()
    return [Requirement(r) for r in [*project["dependencies"], *(r for e in extras for r in e)]]


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pairs = (line.split("==") for line in lines if line and not line.startswith("#"))
    return {canonicalize_name(name): version for name, version in pairs}


def test_every_user_facing_dependency_ranges_up_to_the_next_major_of_its_pin() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    user_facing = [*project["dependencies"], *(r for extra, reqs in
                   project["optional-dependencies"].items() if extra != "dev" for r in reqs)]
    pins = _pins()
    for req in map(Requirement, user_facing):
        bounds = {spec.operator: spec.version for spec in req.specifier}
        assert set(bounds) == {">=", "<"}, f"{req}: a range, lowest tested to next major"
        major = int(pins[canonicalize_name(req.name)].split(".")[0])
        assert bounds["<"] == str(max(major + 1, 1)), f"{req}: the next major of its pin"


def test_constraints_pin_one_version_inside_every_range() -> None:
    pins = _pins()
    for req in _requirements():
        version = pins.get(canonicalize_name(req.name))
        assert version is not None, f"{req.name} has no pin in constraints.txt"
        assert req.specifier.contains(version), f"constraints.txt: {req.name}=={version}: {req}"


def test_lowest_gives_each_lower_bound_and_keeps_exact_pins(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["click>=8.1,<9", "rich"]\n'
                         '[project.optional-dependencies]\n'
                         'otel = ["opentelemetry-api>=1.45,<2", "psycopg[binary]>=3.3,<4"]\n'
                         'dev = ["opentelemetry-api==1.45.2", "x[otel]"]\n')
    assert constraints(["otel", "dev"], pyproject) == [
        "click==8.1", "opentelemetry-api==1.45.2", "psycopg==3.3"]
    with pytest.raises(SystemExit, match="no such extra in pyproject.toml: nope"):
        constraints(["nope"], pyproject)
