# Sourced by the shell tests here: `fail MESSAGE` records a failed check (printed at once) and
# `finish` ends the script, non-zero when any check failed. The caller sets CHECKS_NAME.
failures=0

fail() {
  echo "$CHECKS_NAME: FAILED: $*" >&2
  failures=$((failures + 1))
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$CHECKS_NAME: $failures check(s) failed" >&2
    exit 1
  fi
  echo "$CHECKS_NAME: all checks passed"
}
