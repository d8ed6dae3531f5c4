"""Spark's own output kept off the terminal: a log4j2 configuration, and the driver JVM's
standard error sent to a log file.

With ``SparkConfig(log_file=...)`` (``sbroker run`` sets ``out/spark-logs/...``) everything the
JVM prints — its start-up warnings, Spark's log at INFO, the stack traces of a Ctrl-C or of a
``local-cluster`` closing — goes to that file, and the terminal keeps sbroker's display. The
JVM inherits the file as its standard error at launch: the process's own standard error is
pointed at the file only while the JVM starts.  Without it Spark logs only errors, to
standard error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["jvm_output_to", "quiet_spark_logs"]

_LOG4J2 = """\
# written by sbroker: {what}
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
# a pyspark driver is a shell to Spark, which then takes this logger's level for the root
logger.repl.name = org.apache.spark.api.python.PythonGatewayServer
logger.repl.level = {level}
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""
_CONSOLE = "appender.out.type = Console\nappender.out.target = SYSTEM_ERR\n"
# a File appender: Spark filters only console appenders down to the shell's level
_FILE = "appender.out.type = File\nappender.out.fileName = {path}\nappender.out.append = true\n"


def quiet_spark_logs(conf: dict[str, str], master: str, user_conf: set[str],
                     log_file: str | None) -> None:
    """Send Spark's log4j output to ``log_file`` at INFO (the full log), or to standard error
    at ERROR without one. Only defaults are touched: a log4j2 configuration of the user's own
    (``-Dlog4j2.configurationFile`` in ``spark.driver.extraJavaOptions``; other JVM options
    there are kept beside this one), ``spark.log.level``, a configured ``SPARK_LOCAL_IP`` or
    a configured level on pyspark's error loggers win."""
    options = conf.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" not in options:
        if log_file:
            text = _LOG4J2.format(what="Spark's full log, in the run's log file",
                                  level="info") + _FILE.format(path=Path(log_file).resolve())
        else:
            text = _LOG4J2.format(what="Spark's errors only, so that they do not drown the"
                                  " output", level="error") + _CONSOLE
        fd, path = tempfile.mkstemp(prefix="sbroker-log4j2-", suffix=".properties")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        conf["spark.driver.extraJavaOptions"] = " ".join(
            filter(None, [f"-Dlog4j2.configurationFile=file:{path}", options]))
    if log_file and "spark.log.level" not in user_conf:
        conf.pop("spark.log.level", None)  # the file keeps the full log
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logger = logging.getLogger(name)
        if logger.level in (logging.NOTSET, logging.WARNING):
            from pyspark.logger import PySparkLogger

            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


@contextlib.contextmanager
def jvm_output_to(log_file: str | None) -> Iterator[None]:
    """While inside, the process's standard error (fd 2) is ``log_file`` (appended to): a
    JVM launched meanwhile keeps it as its own. Nothing changes when ``log_file`` is None."""
    if log_file is None:
        yield
        return
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(2)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
