#!/usr/bin/env bash
# planshift CI gate for a pull request that changes postgresql.conf (any CI; GitHub Actions in
# github-actions.yml, GitLab CI in gitlab-ci.yml). It takes the configuration file from the base
# branch and from the pull request, runs the workload with both on an embedded PostgreSQL that
# planshift starts and stops (two variants measured interleaved, or two servers for settings
# that need a restart), calibrates the noise of one side against itself (an A/A run), and
# writes the reports. Exit status: 0 no finding at or above $PLANSHIFT_FAIL_ON, 1 regressions,
# 2 usage or setup error.
#
#   BASE_REF=origin/main examples/ci/gate.sh            # every step
#   examples/ci/gate.sh measure|noise|compare           # one step (a CI job shows each)
#
# Environment (all optional):
#   BASE_REF            git revision with the current configuration (default origin/main)
#   PLANSHIFT_CONF      the configuration file in the repository (default db/postgresql.conf)
#   PLANSHIFT_WORKLOAD  setup and queries, no [variants] (default planshift/workload.toml)
#   PLANSHIFT_OUT       directory for the store and the reports (default planshift-out)
#   PLANSHIFT_FAIL_ON   info, warning, error (default) or never
#   PLANSHIFT_POSTGRES  major version started when a server-start setting changed (default 17)
#   PLANSHIFT_NOISE     1 (default): the noise step runs an A/A calibration; 0 skips it
#   PLANSHIFT           the planshift command (default: planshift on PATH)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
base_ref=${BASE_REF:-origin/main}
conf=${PLANSHIFT_CONF:-db/postgresql.conf}
workload=${PLANSHIFT_WORKLOAD:-planshift/workload.toml}
out=${PLANSHIFT_OUT:-planshift-out}
fail_on=${PLANSHIFT_FAIL_ON:-error}
planshift=${PLANSHIFT:-planshift}
python=${PYTHON:-python3}
step=${1:-all}

measure() {
  mkdir -p "$out"
  rm -f "$out/unchanged" "$out/gate.duckdb"
  if ! git show "$base_ref:$conf" >"$out/current.conf"; then
    echo "gate: $conf not found at $base_ref (set BASE_REF / PLANSHIFT_CONF)" >&2
    exit 2
  fi
  status=0
  "$python" "$here/conf_gate.py" "$out/current.conf" "$conf" "$workload" "$out/gate.toml" \
    --postgres "${PLANSHIFT_POSTGRES:-17}" || status=$?
  if [ "$status" = 3 ]; then
    printf '<!-- planshift-report -->\nplanshift: `%s` changes no setting; nothing to measure.\n' "$conf" >"$out/comment.md"
    touch "$out/unchanged"
    return 0
  elif [ "$status" != 0 ]; then
    exit 2
  fi
  "$planshift" run "$out/gate.toml" --store "$out/gate.duckdb" --label "gate $base_ref"
}

# A/A: the current settings measured against themselves, interleaved; compare then calls an
# effect inside a query's noise floor inconclusive instead of a regression.
noise() {
  if [ -e "$out/unchanged" ] || [ "${PLANSHIFT_NOISE:-1}" = 0 ]; then
    return 0
  fi
  side=(--variant current)
  if ! grep -q '^\[variants\.' "$out/gate.toml"; then
    side=(--target current)   # a server-start setting changed: one server per side
  fi
  "$planshift" noise "$out/gate.toml" --store "$out/gate.duckdb" "${side[@]}"
}

compare() {
  if [ -e "$out/unchanged" ]; then
    return 0
  fi
  outputs=(-o "$out/comment.md" -o "$out/junit.xml" -o "$out/report.html" -o "$out/report.json" -o -)
  if [ "${GITHUB_ACTIONS:-}" = true ]; then
    outputs+=(-o github:-)   # annotations on the workflow run and the pull request
  fi
  status=0
  "$planshift" compare --store "$out/gate.duckdb" -b current -c proposed --fail-on "$fail_on" \
    "${outputs[@]}" || status=$?
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$out/comment.md" >>"$GITHUB_STEP_SUMMARY"
  fi
  return "$status"
}

case "$step" in
  measure) measure ;;
  noise) noise ;;
  compare) compare ;;
  all) measure && noise && compare ;;
  *) echo "gate: unknown step $step (measure, noise, compare or all)" >&2; exit 2 ;;
esac
