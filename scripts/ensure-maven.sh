#!/usr/bin/env bash
# Make sure Maven is on PATH: set-up fetches the Kafka connector's and broker's jars from Maven
# Central with it (python -m logstream.kafka.maven). Installs Debian's maven with apt-get when
# running as root; otherwise says what to install.
set -euo pipefail
if command -v mvn >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "mvn not found: installing maven with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq maven >/dev/null
  exit 0
fi
echo "error: mvn not found. logstream fetches Spark's Kafka connector and Apache Kafka with Maven: install it (Debian: sudo apt-get install maven) and retry." >&2
exit 1
