#!/usr/bin/env bash
# Make sure a Java 17+ runtime is on PATH (PySpark 4 needs it). Installs Debian's OpenJDK 17
# with apt-get when running as root; otherwise says what to install.
set -euo pipefail
if command -v java >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "java not found: installing openjdk-17-jre-headless with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi
echo "error: java not found. PySpark needs Java 17: install it (Debian: sudo apt-get install openjdk-17-jre-headless) and retry." >&2
exit 1
