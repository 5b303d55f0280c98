#!/usr/bin/env bash
# `simba --help`, the man pages and docs/cli.md agree (ctest cli_docs, label
# package). The help text is the one source: the man pages are generated from it
# (tools/simba/man/gen-man.sh), docs/cli.md is written by hand and checked here:
#   - the commands of `simba --help` are the commands docs/cli.md has sections for;
#   - every option of `simba CMD --help` is in CMD's section of docs/cli.md or in
#     its "Options of every command", and in the man page simba-CMD.1;
#   - every --option docs/cli.md names is one the tool's help knows.
#
#   cli_docs_test.sh SIMBA_CLI DOCS_CLI_MD [MAN_DIR]
set -euo pipefail
cli=$1 doc=$2 man=${3:-}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
opts() { grep -o -- '--[a-z][a-z-]*' | grep -vx -- '--' | sort -u; }
# The text of docs/cli.md from the heading matching $1 to the next "## ".
section() { awk -v h="$1" 'index($0, h) == 1 { on = 1; print; next } on && /^## / { exit } on' "$doc"; }

commands=$("$cli" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]\+\) .*/\1/p' | sort)
documented=$(sed -n 's/^## `simba \([a-z]\+\).*/\1/p' "$doc" | sort)
[[ "$commands" == "$documented" ]] ||
  fail "commands in simba --help ($(echo $commands)) != sections of docs/cli.md ($(echo $documented))"

common=$(section "## Options of every command")
[[ -n "$common" ]] || fail "docs/cli.md has no '## Options of every command'"
for o in $("$cli" --help | sed -n '/^Options/,/^$/p' | opts); do
  grep -qF -- "$o" <<<"$common" || fail "simba --help: $o not in docs/cli.md's Options of every command"
done

all_help=$("$cli" --help)
for c in $commands; do
  help=$("$cli" "$c" --help)
  all_help+=$'\n'"$help"
  text=$(section "## \`simba $c")
  for o in $(opts <<<"$help"); do
    grep -qF -- "$o" <<<"$text$common" || fail "simba $c --help: $o not in docs/cli.md's section on simba $c"
  done
done

# The man pages: every option of each help text (groff writes - as \-).
if [[ -n "$man" ]]; then
  for c in "" $commands; do
    page="$man/simba${c:+-$c}.1"
    [[ -f "$page" ]] || { fail "no man page $page"; continue; }
    text=$(sed 's/\\-/-/g' "$page")
    # shellcheck disable=SC2086
    for o in $(if [[ -n "$c" ]]; then "$cli" "$c" --help; else "$cli" --help; fi | opts); do
      grep -qF -- "$o" <<<"$text" || fail "$(basename "$page"): $o of the help text is missing"
    done
  done
fi

# docs/cli.md names no option the tool does not have (the retired Kubernetes
# sidecar's flags, quoted in its migration notes, excepted).
known=$(opts <<<"$all_help")
for o in $(grep -v 'leader-elector' "$doc" | opts); do
  grep -qx -- "$o" <<<"$known" || fail "docs/cli.md names $o, which no simba --help lists"
done

((fails == 0)) || { echo "cli_docs_test: $fails disagreement(s)"; exit 1; }
echo "OK: simba --help, docs/cli.md${man:+ and the man pages in $man} agree ($(echo $commands))"
