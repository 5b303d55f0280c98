#!/bin/sh
# Man pages of the simba tool, generated with help2man from `simba --help` and
# `simba COMMAND --help`: the help text is their one source (docs/cli.md is
# checked against it by tests/package/cli_docs_test.sh).
#   gen-man.sh SIMBA_BINARY OUTPUT_DIR VERSION
set -eu
simba=$1 out=$2 version=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
# page name | command | NAME line
while IFS='|' read -r page cmd name; do
  [ -n "$page" ] || continue
  help2man --no-info --no-discard-stderr --version-string="$version" --name="$name" \
    --include="$here/see-also.h2m" --output="$out/$page.1.tmp" "$simba${cmd:+ $cmd}"
  # The title and the NAME line are the page's name (SIMBA-RUN, simba-run), not
  # the program's ("simba run"): whatis and lintian look the page up by it.
  title=$(echo "$page" | tr '[:lower:]' '[:upper:]')
  sed -e "s/^\.TH SIMBA /.TH $title /" -e "/^\.SH NAME/{n;s/^simba${cmd:+ $cmd} \\\\-/$page \\\\-/;}" \
    "$out/$page.1.tmp" >"$out/$page.1"
  rm -f "$out/$page.1.tmp"
done <<'PAGES'
simba||distributed leases and leader election from the shell
simba-run|run|run a command whenever this process leads a name
simba-lock|lock|run a command once while holding a lock
simba-status|status|show the sessions and leases on a backend
simba-watch|watch|print each change of a name's holder
simba-schema|schema|print the DDL a postgresql:// backend installs
PAGES
