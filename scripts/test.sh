#!/usr/bin/env bash
# Simba's one test command: installs what is missing, builds, starts the test
# servers once, runs the test layers with ctest, and prints a summary.
#
#   bash scripts/test.sh                      plain build in build/, every layer
#   bash scripts/test.sh --label core         one layer (core|sim|backends|capi|abi|tck|cli|style|package,
#                                             a binding: go|rust|java|lua|node|python; embed: contrib/)
#   bash scripts/test.sh --sanitize address   ASan+UBSan build in build-address/
#   bash scripts/test.sh --sanitize thread    TSan build in build-thread/
#   bash scripts/test.sh --valgrind           the capi tests under valgrind (build/)
#   bash scripts/test.sh --package            the Debian packages: build, lintian, install,
#                                             use, purge (scripts/package-check.sh; root)
#   bash scripts/test.sh --all                plain, address, thread, valgrind, package (CI)
#
# Options: --jobs N (default 2), --build-dir DIR (default build; sanitizer builds
# use DIR-address and DIR-thread), --no-install (never call apt-get), -h.
# Stage flags add up: `--sanitize thread --valgrind` runs both.
# The last line is "N passed, N failed": ctest tests over all stages; a stage
# that cannot configure or build counts as one failure. Exit status 0 only if
# every stage passed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# Debian packages the build and the tests need, checked with dpkg-query and
# installed only when missing. Backends append their servers and client
# libraries here (redis-server libhiredis-dev, postgresql libpq-dev,
# zookeeper libzookeeper-st-dev, ...).
SIMBA_APT_PACKAGES=(
  build-essential cmake pkg-config
  libuv1-dev libcmocka-dev libgtest-dev
  libhowardhinnant-date-dev tzdata            # src/schedule: cron time zones (issue 43)
  valgrind
  redis-server redis-tools libhiredis-dev
  postgresql libpq-dev openssl postgresql-client
  procps iproute2
  abigail-tools binutils        # abidw/abidiff, nm/objdump/readelf (label abi)
  zookeeper libzookeeper-st-dev default-jre-headless
  golang-go                                   # bindings/go (label go)
  lua5.4 liblua5.4-dev lua-busted lua-luv     # bindings/lua (label lua)
  python3-pytest                              # bindings/python (label python)
  openjdk-17-jdk-headless junit5              # bindings/java (label java)
  clang-14 libclang-rt-14-dev libssl-dev      # scripts/fuzz.sh (libFuzzer); TLS tests (OpenSSL)
  nginx nginx-dev python3                     # contrib (label embed)
  curl libmicrohttpd-dev                      # simba run --listen (label cli)
  python3 redis-tools postgresql zookeeper   # tests/chaos (label chaos)
  gnuplot-nox                                 # tests/chaos: checker_test plot, scripts/chaos.sh terms.png
  clang-format-14                             # tests/style (label style)
  debhelper dpkg-dev fakeroot lintian man-db  # debian/, scripts/package-check.sh (stage package)
  help2man doxygen luarocks                   # man pages, the docs target, luarocks make
  dh-python python3-all python3-setuptools pybuild-plugin-pyproject  # debian/: python3-simba
  nodejs node-typescript                      # bindings/node (label node; + libnode-dev for Debian's nodejs: node_header_packages)
  etcd-server etcd-client                     # etcd (issue 38): scripts/lib/servers.sh start_etcd
  libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler  # etcd's gRPC transport (ADR 0044), bench/raw_etcd.c
  libcurl4-openssl-dev                        # bench/raw_etcd.c: the JSON gateway transport it is measured against
)
# bindings/rust (label rust) uses the machine's cargo: rustup's in ~/.cargo/bin
# when there is one (Debian's cargo otherwise).
[[ -d "$HOME/.cargo/bin" ]] && PATH="$HOME/.cargo/bin:$PATH"

# shellcheck source=scripts/lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"
# shellcheck source=scripts/lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

# The comment block at the top of this file.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

JOBS=2
BUILD_DIR="build"
LABEL=""
INSTALL=1
STAGES=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --all) STAGES+=(plain address thread valgrind package) ;;
    --package) STAGES+=(package) ;;
    --sanitize)
      [[ $# -ge 2 ]] || { echo "test.sh: --sanitize needs address|thread" >&2; exit 2; }
      case "$2" in
        address|thread) STAGES+=("$2") ;;
        *) echo "test.sh: --sanitize takes address or thread, not '$2'" >&2; exit 2 ;;
      esac
      shift ;;
    --sanitize=*)
      case "${1#*=}" in
        address|thread) STAGES+=("${1#*=}") ;;
        *) echo "test.sh: --sanitize takes address or thread, not '${1#*=}'" >&2; exit 2 ;;
      esac ;;
    --valgrind) STAGES+=(valgrind) ;;
    --label) [[ $# -ge 2 ]] || { echo "test.sh: --label needs a label" >&2; exit 2; }
             LABEL=$2; shift ;;
    --label=*) LABEL=${1#*=} ;;
    --jobs|-j) [[ $# -ge 2 ]] || { echo "test.sh: --jobs needs a number" >&2; exit 2; }
               JOBS=$2; shift ;;
    --build-dir) [[ $# -ge 2 ]] || { echo "test.sh: --build-dir needs a path" >&2; exit 2; }
                 BUILD_DIR=$2; shift ;;
    --no-install) INSTALL=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[[ ${#STAGES[@]} -gt 0 ]] || STAGES=(plain)
# Each stage once, in the canonical order.
ordered=()
for s in plain address thread valgrind package; do
  for t in "${STAGES[@]}"; do
    if [[ "$s" == "$t" ]]; then ordered+=("$s"); break; fi
  done
done
STAGES=("${ordered[@]}")

log() { printf '\n==== %s\n' "$*"; }

# --- stages --------------------------------------------------------------------------

R_NAME=() R_RESULT=() R_PASSED=() R_FAILED=() R_NOTE=() R_TIME=()
declare -A BUILD_FAILED=()  # build dir -> stage whose configure/build failed
declare -A CONFIGURED=()    # build dir -> 1 once configured and built in this run

record() {  # name result passed failed note seconds
  R_NAME+=("$1") R_RESULT+=("$2") R_PASSED+=("$3") R_FAILED+=("$4") R_NOTE+=("$5") R_TIME+=("$6")
}

stage_dir() {
  case "$1" in
    plain|valgrind) echo "$BUILD_DIR" ;;
    *) echo "$BUILD_DIR-$1" ;;
  esac
}

want_valgrind=OFF
for s in "${STAGES[@]}"; do [[ "$s" == valgrind ]] && want_valgrind=ON; done

# configure_and_build STAGE DIR: 0 when the tree in DIR is built.
configure_and_build() {
  local stage=$1 dir=$2 sanitize="" valgrind=OFF
  [[ -n "${CONFIGURED[$dir]:-}" ]] && return 0
  case "$stage" in
    address|thread) sanitize=$stage ;;
    *) valgrind=$want_valgrind ;;
  esac
  log "[$stage] configure $dir"
  cmake -S "$ROOT" -B "$dir" \
    -DCMAKE_BUILD_TYPE="${SIMBA_BUILD_TYPE:-RelWithDebInfo}" \
    -DSIMBA_BUILD_TESTS=ON \
    -DSIMBA_SANITIZE="$sanitize" \
    -DSIMBA_VALGRIND="$valgrind" || return 1
  log "[$stage] build $dir (-j$JOBS)"
  cmake --build "$dir" -j "$JOBS" || return 1
  CONFIGURED[$dir]=1
}

# The package stage: scripts/package-check.sh builds the .debs in a temp dir (no
# build tree of ours), installs, uses and purges them. Needs root for dpkg -i.
run_package_stage() {
  local start=$SECONDS out="$BUILD_DIR/package-check.log"
  if [[ $(id -u) -ne 0 ]]; then
    record package SKIP 0 0 "needs root (dpkg -i)" 0
    return
  fi
  # SIMBA_PACKAGE_DEBS=DIR: check the .debs in DIR instead of building them.
  local args=(--jobs "$JOBS")
  [[ -n "${SIMBA_PACKAGE_DEBS:-}" ]] && args=(--debs "$SIMBA_PACKAGE_DEBS")
  log "[package] scripts/package-check.sh ${args[*]}"
  mkdir -p "$(dirname "$out")"
  if bash "$ROOT/scripts/package-check.sh" "${args[@]}" 2>&1 | tee "$out"; then
    record package PASS 1 0 "built, linted, installed, used, purged (log: $out)" $((SECONDS - start))
  else
    record package FAIL 0 1 "scripts/package-check.sh failed (log: $out)" $((SECONDS - start))
  fi
}

run_stage() {
  local stage=$1 dir start=$SECONDS out rc=0 args=()
  if [[ "$stage" == package ]]; then run_package_stage; return; fi
  dir=$(stage_dir "$stage")

  if [[ "$stage" == valgrind && -n "$LABEL" && "$LABEL" != capi && "$LABEL" != valgrind ]]; then
    record "$stage" SKIP 0 0 "--label $LABEL has no valgrind tests" 0
    return
  fi
  if [[ -n "${BUILD_FAILED[$dir]:-}" ]]; then
    record "$stage" SKIP 0 0 "$dir did not build (stage ${BUILD_FAILED[$dir]})" 0
    return
  fi
  if ! configure_and_build "$stage" "$dir"; then
    BUILD_FAILED[$dir]=$stage
    record "$stage" FAIL 0 1 "configure or build failed in $dir" $((SECONDS - start))
    return
  fi

  args=(--test-dir "$dir" --output-on-failure -j "$JOBS" --no-tests=error)
  if [[ "$stage" == valgrind ]]; then
    args+=(-L '^valgrind$')
  else
    [[ -n "$LABEL" ]] && args+=(-L "^${LABEL}\$")
    args+=(-LE '^valgrind$')
  fi

  # TSan (GCC 12) cannot map its shadow memory when the kernel randomizes mmap
  # with more than 28 bits; without ASLR it always can.
  local wrap=()
  if [[ "$stage" == thread && -r /proc/sys/vm/mmap_rnd_bits ]] &&
     (($(cat /proc/sys/vm/mmap_rnd_bits) > 28)) &&
     setarch "$(uname -m)" -R true 2>/dev/null; then
    wrap=(setarch "$(uname -m)" -R)
  fi

  log "[$stage] ctest ${args[*]}"
  out="$dir/ctest-$stage.log"
  set +e
  "${wrap[@]}" ctest "${args[@]}" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  set -e

  local line failed total passed failed_names note=""
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1 || true)
  if [[ -n "$line" ]]; then
    failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    total=$(sed -E 's/.* tests? failed out of ([0-9]+).*/\1/' <<<"$line")
    passed=$((total - failed))
  elif grep -q 'No tests were found' "$out"; then
    if [[ "$stage" == valgrind ]]; then
      record "$stage" SKIP 0 0 "no capi test yet" $((SECONDS - start))
      return
    fi
    passed=0 failed=1 note="no test matched"
  else
    passed=0 failed=1 note="ctest printed no result (exit $rc)"
  fi
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then
    failed=1 note="ctest exited $rc"
  fi
  failed_names=$(sed -n '/The following tests FAILED:/,$p' "$out" |
    sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+) .*/\1/p' | paste -sd ' ' - || true)
  [[ -n "$failed_names" ]] && note="${note:+$note; }failed: $failed_names"
  if [[ $failed -eq 0 ]]; then
    record "$stage" PASS "$passed" 0 "in $dir/" $((SECONDS - start))
  else
    record "$stage" FAIL "$passed" "$failed" "$note" $((SECONDS - start))
  fi
}

summary() {
  local i total_p=0 total_f=0 overall=PASS
  printf '\n================================ Simba test summary ================================\n'
  printf '  %-9s %-6s %7s %7s %6s  %s\n' stage result passed failed time note
  for i in "${!R_NAME[@]}"; do
    printf '  %-9s %-6s %7d %7d %5ss  %s\n' "${R_NAME[$i]}" "${R_RESULT[$i]}" \
      "${R_PASSED[$i]}" "${R_FAILED[$i]}" "${R_TIME[$i]}" "${R_NOTE[$i]}"
    total_p=$((total_p + R_PASSED[i]))
    total_f=$((total_f + R_FAILED[i]))
    [[ "${R_RESULT[$i]}" == FAIL ]] && overall=FAIL
  done
  [[ $total_f -gt 0 ]] && overall=FAIL
  printf '  %-9s %-6s %7d %7d %5ss\n' total "$overall" "$total_p" "$total_f" "$SECONDS"
  printf '%d passed, %d failed\n' "$total_p" "$total_f"
  [[ "$overall" == PASS ]]
}

# --- main ------------------------------------------------------------------------------

[[ $INSTALL -eq 1 ]] || export SIMBA_NO_INSTALL=1
ensure_packages "${SIMBA_APT_PACKAGES[@]}"
# Node's headers: libnode-dev for Debian's nodejs only, known once nodejs is installed.
mapfile -t SIMBA_NODE_HEADER_PACKAGES < <(node_header_packages)
[[ ${#SIMBA_NODE_HEADER_PACKAGES[@]} -eq 0 ]] || ensure_packages "${SIMBA_NODE_HEADER_PACKAGES[@]}"

trap 'stop_servers' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "starting test servers"
start_servers

for stage in "${STAGES[@]}"; do
  run_stage "$stage"
done

summary
