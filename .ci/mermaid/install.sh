#!/usr/bin/env bash
# The real Mermaid renderer that tests/test_charts_render.py draws the reports' charts with:
# Debian's chromium (apt) and mermaid-cli with the exact versions of package-lock.json (npm ci),
# puppeteer's own browser download skipped (puppeteer.json points it at /usr/bin/chromium).
# Writes only .ci/mermaid/node_modules in the clone, beyond what apt and npm keep themselves.
#   bash .ci/mermaid/install.sh      # as root; about 2-3 minutes on a bare machine
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
echo "mermaid: $(/usr/bin/chromium --version), mermaid-cli $(./node_modules/.bin/mmdc --version)"
