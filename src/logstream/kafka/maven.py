"""Java artifacts from Maven Central, fetched once into a cache: the Kafka connector and broker.

Spark's Kafka connector is not in the PySpark wheel, and Apache Kafka is a Java program. Each
is an :class:`ArtifactSet`: a few Maven coordinates whose runtime dependencies Maven resolves.
:func:`fetch` writes a small generated ``pom.xml`` and runs Maven's dependency plugin on it
(``mvn dependency:copy-dependencies -DincludeScope=runtime``), which copies every jar of the
set into its own directory of the cache, then lists them in ``jars.txt`` (written last: a
directory without it is incomplete and fetched again). :func:`jars` returns the cached jars,
fetching them the first time.

=================  =========================================  ===========================
set                coordinates                                used by
=================  =========================================  ===========================
:func:`connector`  :data:`KAFKA_PACKAGE`                      ``spark.jars`` of a session
                   (PySpark's exact version); the jars PySpark  that reads or writes Kafka
                   already ships are excluded, which leaves     (:func:`logstream.session.
                   ``spark-sql-kafka-0-10``, ``spark-token-     get_spark`` with ``kafka=True``)
                   provider-kafka-0-10``, ``kafka-clients``,
                   ``commons-pool2`` (about 10 MB)
:func:`broker`     ``org.apache.kafka:kafka_2.13`` at           :mod:`logstream.kafka.broker`
                   :data:`BROKER_VERSION` and a logging binding
                   (about 45 MB)
=================  =========================================  ===========================

``make setup`` runs ``python -m logstream.kafka.maven``, which fetches both (Maven itself is
installed with ``apt-get`` by ``scripts/ensure-maven.sh`` when missing). Maven keeps its own
copy in its local repository (``~/.m2/repository``), so a second cache directory (another
Spark version) downloads nothing it already has.

Settings
--------
``XDG_CACHE_HOME``
    The cache is ``$XDG_CACHE_HOME/logstream/maven`` (default ``~/.cache/logstream/maven``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from logstream.errors import ConfigError

#: Spark's Kafka connector (the Kafka source and sink), at PySpark's exact version: a session
#: logstream starts with ``SparkSettings(kafka=True)`` gets its jars from the cache
#: (:func:`logstream.session.kafka_jars`); under ``spark-submit``, ``--packages`` adds it.
#: Maven Central serves it up to Spark 4.2.0, hence ``pyspark==4.2.0`` (docs/kafka.md).
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"

__all__ = [
    "BROKER_VERSION",
    "DEPENDENCY_PLUGIN",
    "KAFKA_PACKAGE",
    "ArtifactSet",
    "broker",
    "cache_root",
    "connector",
    "fetch",
    "jars",
    "main",
]

#: Apache Kafka's version, the broker of ``make kafka`` and the tests (KRaft, Java 17).
BROKER_VERSION = "4.1.1"
#: The binding that routes the broker's SLF4J logging to Log4j 2, at Kafka 4.1's Log4j version.
LOG4J_BINDING = "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
#: Maven's dependency plugin, pinned (Maven would otherwise pick a version itself).
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
#: The list of a complete set's jars, one file name a line, written after every jar.
MANIFEST = "jars.txt"
#: Seconds one Maven run may take (a first run downloads the plugin and the jars).
MAVEN_TIMEOUT_S = 900.0

# a jar's artifact id: its name up to the last ``-`` that starts a dotted version
# (``spark-sql-kafka-0-10_2.13-4.2.0.jar``, ``zstd-jni-1.5.7-7.jar``)
_ARTIFACT_ID = re.compile(r"^(.+)-\d+(?:\.\d+)+[^/]*\.jar$")


@dataclass(frozen=True)
class ArtifactSet:
    """Maven coordinates whose runtime dependencies are fetched into one cache directory.

    Parameters
    ----------
    name : str
        The cache directory's name (it carries the versions, so a new version is fetched
        anew).
    coordinates : tuple of str
        ``GROUP:ARTIFACT:VERSION`` of each dependency.
    excluded : tuple of str
        Artifact ids left out of the resolution, of any group (jars already on the
        classpath the set joins).
    """

    name: str
    coordinates: tuple[str, ...]
    excluded: tuple[str, ...] = ()

    def pom(self) -> str:
        """The generated ``pom.xml``: one dependency per coordinate, each with the
        exclusions (a ``*`` group id, Maven 3.2.1+)."""
        exclusions = "".join(
            f"<exclusion><groupId>*</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
            for a in self.excluded
        )
        dependencies = []
        for coordinate in self.coordinates:
            group, artifact, version = _split(coordinate)
            dependencies.append(
                "    <dependency>"
                f"<groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
                f"<version>{escape(version)}</version>"
                + (f"<exclusions>{exclusions}</exclusions>" if exclusions else "")
                + "</dependency>"
            )
        return "\n".join(
            [
                '<project xmlns="http://maven.apache.org/POM/4.0.0">',
                "  <modelVersion>4.0.0</modelVersion>",
                "  <groupId>local.logstream</groupId>",
                f"  <artifactId>{escape(self.name)}</artifactId>",
                "  <version>0</version>",
                "  <packaging>pom</packaging>",
                "  <dependencies>",
                *dependencies,
                "  </dependencies>",
                "</project>",
                "",
            ]
        )


def _split(coordinate: str) -> tuple[str, str, str]:
    parts = coordinate.split(":")
    if len(parts) != 3 or not all(parts):
        raise ConfigError(f"Maven coordinate {coordinate!r} is not GROUP:ARTIFACT:VERSION")
    return parts[0], parts[1], parts[2]


def artifact_id(jar_name: str) -> str | None:
    """The artifact id of a jar named ``ARTIFACT-VERSION.jar``, or None.

    Examples
    --------
    >>> artifact_id("spark-tags_2.13-4.2.0.jar")
    'spark-tags_2.13'
    >>> artifact_id("zstd-jni-1.5.7-7.jar")
    'zstd-jni'
    >>> artifact_id("spark-sql-kafka-0-10_2.13-4.2.0.jar")
    'spark-sql-kafka-0-10_2.13'
    """
    match = _ARTIFACT_ID.match(jar_name)
    return match.group(1) if match else None


def pyspark_jars() -> Path:
    """The directory of the jars PySpark ships (its JVM's classpath)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def connector() -> ArtifactSet:
    """Spark's Kafka connector at PySpark's exact version, less the jars PySpark ships.

    Raises
    ------
    ConfigError
        When :data:`KAFKA_PACKAGE` is not for the installed PySpark (the
        connector must match Spark's version exactly).
    """
    import pyspark

    version = KAFKA_PACKAGE.rsplit(":", 1)[1]
    if version != pyspark.__version__:
        raise ConfigError(
            f"Spark's Kafka connector {KAFKA_PACKAGE} is for Spark {version}, but PySpark "
            f"{pyspark.__version__} is installed: install pyspark=={version} (pyproject.toml)"
        )
    present = sorted(
        {a for jar in pyspark_jars().glob("*.jar") if (a := artifact_id(jar.name)) is not None}
    )
    artifact = KAFKA_PACKAGE.split(":")[1]
    return ArtifactSet(f"{artifact}-{version}", (KAFKA_PACKAGE,), tuple(present))


def broker() -> ArtifactSet:
    """Apache Kafka :data:`BROKER_VERSION` (``kafka.Kafka``, its storage tool) with a logging
    binding."""
    return ArtifactSet(
        f"kafka_2.13-{BROKER_VERSION}",
        (f"org.apache.kafka:kafka_2.13:{BROKER_VERSION}", LOG4J_BINDING),
    )


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/logstream/maven``, default ``~/.cache/logstream/maven``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "logstream" / "maven"


def cached(artifacts: ArtifactSet) -> list[Path] | None:
    """The jars of a complete cache directory of ``artifacts``, or None."""
    directory = cache_root() / artifacts.name
    manifest = directory / MANIFEST
    if not manifest.is_file():
        return None
    paths = [directory / name for name in manifest.read_text().split()]
    return paths if paths and all(p.is_file() for p in paths) else None


def jars(artifacts: ArtifactSet, fetch_missing: bool = True) -> list[Path]:
    """The jars of ``artifacts``, from the cache, fetched the first time.

    Parameters
    ----------
    artifacts : ArtifactSet
    fetch_missing : bool
        Run Maven when the cache does not have them (else raise).

    Returns
    -------
    list of Path
        Absolute paths of the jars, in name order.

    Raises
    ------
    ConfigError
        When they are not cached and ``fetch_missing`` is false, or :func:`fetch` fails.
    """
    found = cached(artifacts)
    if found is not None:
        return found
    if not fetch_missing:
        raise ConfigError(
            f"{artifacts.name} is not in {cache_root()}: run `make setup` (or "
            "`python -m logstream.kafka.maven`), which fetches it from Maven Central"
        )
    return fetch(artifacts)


def fetch(artifacts: ArtifactSet, quiet: bool = False) -> list[Path]:
    """Resolve ``artifacts`` with Maven into the cache (a temporary directory, then renamed).

    Parameters
    ----------
    artifacts : ArtifactSet
    quiet : bool
        Say nothing on standard error.

    Returns
    -------
    list of Path
        The cached jars.

    Raises
    ------
    ConfigError
        When Maven (``mvn``) is not installed, or fails (no network, a coordinate Maven
        Central does not serve); the message has Maven's error lines.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigError(
            f"{artifacts.name} must be fetched from Maven Central, and Maven is not installed: "
            "run `make setup` (it installs Maven with apt-get), or `apt-get install maven`"
        )
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{artifacts.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    pom = staging / "pom.xml"
    pom.write_text(artifacts.pom())
    jar_dir = staging / "jars"
    command = [
        mvn,
        "--batch-mode",
        "--no-transfer-progress",
        "--file",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={jar_dir}",
    ]
    if not quiet:
        print(f"fetching {artifacts.name} with Maven into {root}", file=sys.stderr)
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ConfigError(
            f"Maven did not fetch {artifacts.name} within {MAVEN_TIMEOUT_S:.0f} s: check the "
            "network to Maven Central and retry `make setup`"
        ) from exc
    names = sorted(p.name for p in jar_dir.glob("*.jar")) if jar_dir.is_dir() else []
    if done.returncode != 0 or not names:
        shutil.rmtree(staging, ignore_errors=True)
        errors = [line for line in done.stdout.splitlines() if "[ERROR]" in line][:8]
        raise ConfigError(
            f"Maven could not fetch {artifacts.name} ({' '.join(artifacts.coordinates)}): "
            + (" / ".join(errors) or done.stderr.strip()[-500:] or f"exit {done.returncode}")
        )
    final = root / artifacts.name
    for name in names:
        os.replace(jar_dir / name, staging / name)
    jar_dir.rmdir()
    (staging / MANIFEST).write_text("".join(f"{name}\n" for name in names))
    if cached(artifacts) is None:  # another process may have finished first
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
    else:
        shutil.rmtree(staging, ignore_errors=True)
    found = cached(artifacts)
    assert found is not None
    return found


def size_bytes(paths: list[Path]) -> int:
    """Bytes of the files ``paths``."""
    return sum(p.stat().st_size for p in paths)


def main(argv: list[str] | None = None) -> int:
    """``python -m logstream.kafka.maven [--force]``: fetch the connector and the broker.

    Prints, per set, the jars, their size and the seconds it took; ``--force`` fetches
    again. Exit status 2 with the reason when Maven fails.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m logstream.kafka.maven", description="Fetch the Kafka jars (Maven)."
    )
    parser.add_argument("--force", action="store_true", help="fetch again")
    args = parser.parse_args(argv)
    try:
        for artifacts in (connector(), broker()):
            if args.force:
                shutil.rmtree(cache_root() / artifacts.name, ignore_errors=True)
            start = time.monotonic()
            was_cached = cached(artifacts) is not None
            paths = jars(artifacts)
            took = "cached" if was_cached else f"fetched in {time.monotonic() - start:.1f} s"
            print(
                f"{artifacts.name}: {len(paths)} jars, {size_bytes(paths) / 2**20:.1f} MiB, "
                f"{took} ({paths[0].parent})",
                file=sys.stderr,
            )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
