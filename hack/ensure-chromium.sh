#!/usr/bin/env bash
# The browser the HTML page tests drive (tests/integration/test_html_pages.py): Debian's
# chromium package. Nothing to do when it is there (or POLICYD_CHROMIUM names another
# binary); otherwise installed with apt-get, as root or through sudo. A machine where
# neither works fails here, naming what to install, instead of in the middle of the
# suite.
set -euo pipefail
chromium="${POLICYD_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then
  exit 0
fi
if [ -n "${POLICYD_CHROMIUM:-}" ]; then
  echo "POLICYD_CHROMIUM=$chromium: not an executable file" >&2
  exit 1
fi
echo "[policyd] installing Debian's chromium for the HTML page tests (apt-get)" >&2
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "chromium is needed by the HTML page tests: install Debian's chromium package" \
       "(apt-get install chromium), or set POLICYD_CHROMIUM to a Chromium binary" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null || {
  "${as_root[@]}" apt-get update -q >/dev/null
  "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null
}
test -x /usr/bin/chromium
