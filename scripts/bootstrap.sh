#!/usr/bin/env bash
# Creates (or reuses) the project venv with planshift and PostgreSQL 17/18 wheels installed.
# Installs Debian's PostgreSQL 15 when it is missing and we are root (CI, fresh machines).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

if [ ! -x /usr/lib/postgresql/15/bin/postgres ] && command -v apt-get >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "bootstrap: installing Debian's postgresql-15 (server and contrib)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 postgresql-contrib-15 >/dev/null
  else
    echo "bootstrap: PostgreSQL 15 not found; the 17/18 wheels will be used (sudo apt-get install postgresql-15 adds 15)" >&2
  fi
fi

# headless Chromium for the HTML report test (tests/test_reports_html.py skips without it):
# only for `make test` (bootstrap.sh --test), the demo does not need a browser
if [ "${1:-}" = "--test" ] && [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || echo "bootstrap: chromium not installed" >&2; fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "bootstrap: planshift needs Python >= 3.11 ($PYTHON is $("$PYTHON" --version 2>&1))" >&2
  exit 2
fi

stamp="$VENV/.planshift-installed"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "${PIP[@]}" --upgrade pip 'setuptools>=77'
  "${PIP[@]}" '.[pg17,pg18,dev]'
  touch "$stamp"
fi
# planshift itself from this checkout, every time and not editable: the demo and the tests run
# what a user installs (tests/test_installed.py checks it is this code)
"${PIP[@]}" --no-deps --no-build-isolation --force-reinstall .
rm -rf build
