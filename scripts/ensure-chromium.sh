#!/usr/bin/env bash
# The dashboard's browser test drives Debian's chromium with Playwright (Playwright's own
# browser download is never used). Installs it with apt-get when running as root.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium not found: installing Debian's chromium for the browser test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium fonts-liberation >/dev/null
  exit 0
fi
echo "error: /usr/bin/chromium not found; the browser test needs it (Debian: sudo apt-get install chromium fonts-liberation)." >&2
exit 1
