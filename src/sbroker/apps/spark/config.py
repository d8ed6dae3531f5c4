"""Where the tasks run: a Spark master URL (classic mode) or a Spark Connect URL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["DEFAULT_CONF", "DEFAULT_CONNECT_TIMEOUT", "SparkConfig"]

#: Seconds a Spark Connect server has to answer before the tasks that need it fail.
DEFAULT_CONNECT_TIMEOUT = 30.0

#: Settings the runner applies before the user's ``conf`` (which overrides them).
DEFAULT_CONF: Mapping[str, str] = MappingProxyType({
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "true",
    "spark.scheduler.mode": "FAIR",
    "spark.log.level": "ERROR",
    "spark.log.structuredLogging.enabled": "false",
})


@dataclass(frozen=True, init=False, eq=False)
class SparkConfig:
    """``SparkConfig(master="local[2]")`` or ``SparkConfig(remote="sc://host:15002")``.

    Exactly one of ``master`` and ``remote`` is set; giving ``remote`` alone clears the
    default master. ``conf`` entries override ``DEFAULT_CONF`` (UI off, 2 shuffle partitions,
    AQE on, FAIR scheduling, log level ERROR). ``connect_timeout``: seconds to wait for a
    Spark Connect server to answer before every task of the run fails (default 30).
    ``log_file``: where the driver JVM's output and Spark's full log go (classic mode; by
    default Spark logs only errors, to standard error).
    """

    master: str | None = "local[2]"
    remote: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    app_name: str = "sbroker"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    log_file: str | None = None

    def __init__(self, master: str | None = None, remote: str | None = None,
                 conf: Mapping[str, Any] | None = None, app_name: str = "sbroker",
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 log_file: str | None = None) -> None:
        if master is not None and remote is not None:
            raise ValueError("SparkConfig takes master= or remote=, not both")
        if master is None and remote is None:
            master = "local[2]"
        if remote is not None and not remote.startswith("sc://"):
            raise ValueError(f"a Spark Connect URL starts with sc://, got {remote!r}")
        if master is not None and not master.strip():
            raise ValueError("SparkConfig master must not be empty")
        if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float) or (
                connect_timeout <= 0):
            raise ValueError(f"connect_timeout is a number of seconds > 0, got {connect_timeout!r}")
        conf_dict = {str(k): _conf_value(v) for k, v in (conf or {}).items()}
        object.__setattr__(self, "master", master)
        object.__setattr__(self, "remote", remote)
        object.__setattr__(self, "conf", MappingProxyType(conf_dict))
        object.__setattr__(self, "app_name", app_name)
        object.__setattr__(self, "connect_timeout", float(connect_timeout))
        object.__setattr__(self, "log_file", None if log_file is None else str(log_file))

    def _key(self) -> tuple[Any, ...]:
        return (self.master, self.remote, tuple(sorted(self.conf.items())), self.app_name,
                self.connect_timeout, self.log_file)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SparkConfig):
            return NotImplemented
        return self._key() == other._key()

    @property
    def is_connect(self) -> bool:
        """True for a Spark Connect session (``remote=``)."""
        return self.remote is not None

    def effective_conf(self) -> dict[str, str]:
        """``DEFAULT_CONF`` overlaid with the user's ``conf``."""
        merged = dict(DEFAULT_CONF)
        merged.update(self.conf)
        return merged

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly form, for logs and the ExecutionLog of a broker."""
        return {"master": self.master, "remote": self.remote, "conf": dict(self.conf),
                "app_name": self.app_name, "connect_timeout": self.connect_timeout,
                "log_file": self.log_file}


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise TypeError(f"Spark conf values are strings, numbers or booleans, not {type(value)!r}")
