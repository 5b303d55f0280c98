#!/usr/bin/env bash
# The binary half of the ABI freeze (docs/api-stability.md), with libabigail.
#
#   abi-check.sh dump LIB [OUT]          write LIB's ABI (abidw) to OUT, by default
#                                        abi/<libname>.abi: the baseline, made from a
#                                        build with debug info (RelWithDebInfo/Debug)
#   abi-check.sh check LIB BASELINE      abidiff --no-added-syms BASELINE against LIB:
#                                        exit 0 when LIB keeps every function and type
#                                        of the baseline unchanged (added functions are
#                                        fine), else print the report and exit 1; 77
#                                        when LIB has no debug info (ctest SKIP)
#   abi-check.sh soname LIB NAME [LIB NAME]...
#                                        exit 1 unless each LIB's SONAME is NAME and
#                                        every symbol it exports carries a version node
#
# ctest runs 'check' (abi_baseline, abi_baseline_tck) and 'soname' (abi_soname) on
# the plain build (label abi). Both sides of a comparison go through the same abidw
# options: only the exported functions and the public-header (include/) types they
# reach, no paths, no line numbers, no DT_NEEDED (which backends are linked in is
# not part of the interface).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "abi-check.sh: '$1' not found (apt-get install $2)" >&2
    exit 2
  }
}

has_debug_info() { readelf -S "$1" 2>/dev/null | grep -q '\.debug_info'; }

# abi_dump LIB OUT
abi_dump() {
  need abidw abigail-tools
  abidw --headers-dir "$ROOT/include" --drop-private-types --exported-interfaces-only \
    --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
    --type-id-style hash --out-file "$2" "$1"
}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

case "${1:-}" in
  dump)
    lib=${2:?usage: abi-check.sh dump LIB [OUT]}
    name=$(basename "$lib")
    out=${3:-$ROOT/abi/${name%%.so*}.abi}
    if ! has_debug_info "$lib"; then
      echo "abi-check.sh: $lib has no debug info: build with -DCMAKE_BUILD_TYPE=RelWithDebInfo" >&2
      exit 2
    fi
    mkdir -p "$(dirname "$out")"
    abi_dump "$lib" "$out"
    echo "wrote $out from $lib"
    ;;
  check)
    lib=${2:?usage: abi-check.sh check LIB BASELINE}
    base=${3:?usage: abi-check.sh check LIB BASELINE}
    need abidiff abigail-tools
    if ! has_debug_info "$lib"; then
      echo "SKIP: $lib has no debug info (a Release build); the ABI baseline needs RelWithDebInfo or Debug"
      exit 77
    fi
    [[ -f "$base" ]] || { echo "FAIL: no baseline $base"; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    abi_dump "$lib" "$tmp/current.abi"
    set +e
    abidiff --no-added-syms "$base" "$tmp/current.abi" >"$tmp/report" 2>&1
    rc=$?
    set -e
    if [[ $rc -eq 0 ]]; then
      echo "OK: $lib keeps the ABI of $(basename "$base") (added functions are allowed)"
      exit 0
    fi
    cat "$tmp/report"
    # abidiff's exit status is a bit field: 1 error, 2 usage, 4 ABI change,
    # 8 incompatible ABI change.
    what="the ABI changed"
    soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
    ((rc & 8)) && what="the ABI BROKE (a removed symbol or an incompatible change)"
    ((rc & 3)) && what="abidiff could not compare (status $rc)"
    cat <<MSG

FAIL: $lib differs from the baseline $base: $what
(abidiff --no-added-syms exit status $rc).

Programs built against $soname would stop working. If that was not the
intent, restore the function, type or signature. If it is deliberate
(docs/api-stability.md):
  1. a break (a function removed, a signature, struct or enum value changed)
     needs a new major version: bump SIMBA_VERSION_MAJOR in include/simba.h and
     project(VERSION) in CMakeLists.txt together (the soname follows, e.g.
     libsimba.so.2), and start a new version node in the version script
     (src/capi/libsimba.map, src/tck/libsimba_tck.map);
  2. add a CHANGELOG.md entry tagged 'abi:' saying what changed and why;
  3. regenerate the baseline from a build with debug info and commit it:
       cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build
       bash scripts/abi-check.sh dump build/$(basename "$lib" | sed 's/\.so.*/.so/')
MSG
    exit 1
    ;;
  soname)
    shift
    [[ $# -ge 2 && $(($# % 2)) -eq 0 ]] || { echo "usage: abi-check.sh soname LIB NAME..." >&2; exit 2; }
    rc=0
    while [[ $# -gt 0 ]]; do
      lib=$1 want=$2
      shift 2
      got=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
      if [[ "$got" != "$want" ]]; then
        echo "FAIL: $lib has SONAME '${got:-none}', expected $want"
        rc=1
      else
        echo "OK: $lib has SONAME $got"
      fi
      # Every defined dynamic symbol, except the version nodes themselves (type
      # A), must be bound to a version node: name@@NODE.
      unversioned=$(nm -D --defined-only --with-symbol-versions "$lib" |
        awk '$2 != "A" && $3 !~ /@@?[A-Z_]+_[0-9]+\.[0-9]+$/ { print $3 }')
      if [[ -n "$unversioned" ]]; then
        echo "FAIL: $lib exports symbols outside a version node:"
        sed 's/^/  /' <<<"$unversioned"
        rc=1
      fi
      leaked=$(nm -D --defined-only "$lib" |
        awk '$2 != "A" { print $3 }' | grep -E '^(uv_|redis|PQ|pg_|zoo_|_Z|__cxa|__gxx)' || true)
      if [[ -n "$leaked" ]]; then
        echo "FAIL: $lib exports libuv, backend-client or C++ runtime symbols:"
        sed 's/^/  /' <<<"$leaked"
        rc=1
      fi
    done
    exit $rc
    ;;
  -h|--help) usage ;;
  *) echo "abi-check.sh: unknown command '${1:-}' (try --help)" >&2; exit 2 ;;
esac
