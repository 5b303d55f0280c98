#!/usr/bin/env bash
# The exported functions of libsimba, from the one place they are declared:
# every declaration marked SIMBA_API in include/simba.h.
#
#   gen-exports.sh                print a version script (node SIMBA_1.0) for the header
#   gen-exports.sh --list         print the exported function names, one a line
#   gen-exports.sh --write        (re)write src/capi/libsimba.map as one SIMBA_1.0 node;
#                                 refused once the map has more than one node
#   gen-exports.sh --check [MAP]  exit 1 unless MAP's global names == the header's
#                                 (ctest 'exports_match_header', label abi)
#   gen-exports.sh --check-lib SO exit 1 unless the functions SO defines and exports
#                                 == the header's (ctest 'library_exports', label abi)
#
# Adding a function after 1.0: declare it with SIMBA_API in the header, then add
# its name to a NEW node of the map, by hand, e.g.
#     SIMBA_1.1 { global: simba_new_thing; } SIMBA_1.0;
# --check compares names only, whatever node they are in.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HEADER="${SIMBA_HEADER:-$ROOT/include/simba.h}"
MAP="$ROOT/src/capi/libsimba.map"

# Names of the functions declared with SIMBA_API, in header order. Comments and
# preprocessor lines (the #define of SIMBA_API itself) are removed first; a
# declaration may span lines.
header_names() {
  perl -e '
    local $/; my $s = <STDIN>;
    $s =~ s{/\*.*?\*/}{ }gs;
    $s =~ s{//[^\n]*}{}g;
    $s =~ s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}mg;
    my %seen;
    while ($s =~ /\bSIMBA_API\b[^;{}()]*?\b([A-Za-z_]\w*)\s*\(/g) {
      print "$1\n" unless $seen{$1}++;
    }
  ' <"$HEADER"
}

# Global names of a version script, whatever the node; wildcards are reported
# as they are (and then fail the comparison: every export is listed by name).
map_names() {
  perl -e '
    local $/; my $s = <STDIN>;
    $s =~ s{/\*.*?\*/}{ }gs;
    $s =~ s{#[^\n]*}{}g;
    while ($s =~ /\bglobal\s*:(.*?)(?=\blocal\s*:|\})/gs) {
      my $sec = $1;
      while ($sec =~ /([^\s;]+)\s*;/g) { print "$1\n"; }
    }
  ' <"$1"
}

generate_map() {
  local names
  names=$(header_names)
  cat <<EOF
/* libsimba version script, generated from include/simba.h by scripts/gen-exports.sh.
 *
 * Every exported function is listed by name (a simba_* wildcard would also export
 * internals). Functions added after 1.0 go into a new node, by hand:
 *     SIMBA_1.1 { global: simba_new_thing; } SIMBA_1.0;
 * The ctest exports_match_header (label abi) checks this file against the header. */
SIMBA_1.0 {
  global:
EOF
  while IFS= read -r n; do printf '    %s;\n' "$n"; done <<<"$names"
  cat <<'EOF'
  local:
    *;
};
EOF
}

# compare <what-a> <file-a> <what-b> <file-b>: both sorted name lists.
compare() {
  local rc=0 only_a only_b
  only_a=$(comm -23 "$2" "$4")
  only_b=$(comm -13 "$2" "$4")
  if [[ -n "$only_a" ]]; then
    echo "In $1 but not in $3:"; sed 's/^/  /' <<<"$only_a"; rc=1
  fi
  if [[ -n "$only_b" ]]; then
    echo "In $3 but not in $1:"; sed 's/^/  /' <<<"$only_b"; rc=1
  fi
  return $rc
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

header_names >"$tmp/header.list"
if [[ ! -s "$tmp/header.list" ]]; then
  echo "gen-exports.sh: no SIMBA_API function found in $HEADER" >&2
  exit 2
fi

case "${1:-}" in
  "")
    generate_map
    ;;
  --list)
    cat "$tmp/header.list"
    ;;
  --write)
    if [[ -f "$MAP" ]] && [[ $(grep -c '{' < <(perl -0pe 's{/\*.*?\*/}{}gs' "$MAP")) -gt 1 ]]; then
      echo "gen-exports.sh: $MAP has several version nodes; add new names to a new node by hand" >&2
      exit 2
    fi
    generate_map >"$MAP"
    echo "wrote $MAP ($(wc -l <"$tmp/header.list") functions)"
    ;;
  --check)
    map="${2:-$MAP}"
    sort "$tmp/header.list" >"$tmp/h"
    map_names "$map" >"$tmp/m.raw"
    sort "$tmp/m.raw" >"$tmp/m"
    rc=0
    dups=$(sort "$tmp/m.raw" | uniq -d)
    if [[ -n "$dups" ]]; then echo "Listed twice in $map:"; sed 's/^/  /' <<<"$dups"; rc=1; fi
    sort -u -o "$tmp/m" "$tmp/m"
    compare "the header ($HEADER)" "$tmp/h" "the version script ($map)" "$tmp/m" || rc=1
    if [[ $rc -ne 0 ]]; then
      echo "FAIL: $map and $HEADER disagree (see scripts/gen-exports.sh for how to fix)"
      exit 1
    fi
    echo "OK: $map exports exactly the $(wc -l <"$tmp/h") SIMBA_API functions of $HEADER"
    ;;
  --check-lib)
    lib="${2:?usage: gen-exports.sh --check-lib path/to/libsimba.so}"
    nm_tool="${NM:-nm}"
    sort "$tmp/header.list" >"$tmp/h"
    # Defined dynamic symbols, without version suffixes; 'A' lines are the version
    # nodes themselves (SIMBA_1.0), not symbols.
    "$nm_tool" -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' |
      sed 's/@.*//' | sort -u >"$tmp/l"
    if compare "the header ($HEADER)" "$tmp/h" "the library ($lib)" "$tmp/l"; then
      echo "OK: $lib exports exactly the $(wc -l <"$tmp/h") SIMBA_API functions of $HEADER"
    else
      echo "FAIL: $lib does not export exactly the header's functions"
      echo "(missing: not implemented yet or not extern \"C\"; extra: a leak past the version script)"
      exit 1
    fi
    ;;
  -h|--help)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    ;;
  *)
    echo "gen-exports.sh: unknown option '$1' (try --help)" >&2
    exit 2
    ;;
esac
