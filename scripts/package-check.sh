#!/usr/bin/env bash
# The check a user of the Debian packages makes (issue 45; the `package` stage of
# scripts/test.sh --all, too slow for the plain suite: docs/packaging.md):
#   1. builds the .debs from debian/ with `dpkg-buildpackage -us -uc -b`, in a copy
#      of the working tree (git's tracked and untracked, not ignored, files) in a
#      temp dir, and runs lintian on them (no error allowed);
#   2. installs them with dpkg -i, then apt-get install -f for their dependencies;
#   3. compiles README.md's "Twenty lines of C" (the extraction of
#      tests/consumers/run.sh) with `pkg-config --cflags --libs simba` and with a
#      CMake find_package(simba CONFIG) project, and runs both;
#   4. runs `simba --version`, `man -w simba`, loads the Lua and Java bindings and
#      checks Debian's nginx accepts the module (nginx -t);
#   5. with the -dev packages purged again (a user's machine: runtime packages
#      only), takes a memory:// lock with Debian's /usr/bin/python3 (python3-simba)
#      and with `node -e "require('simba')"` (node-simba), from a folder outside
#      the tree, with no SIMBA_LIBRARY, PYTHONPATH, NODE_PATH or LD_LIBRARY_PATH;
#   6. purges the packages and checks that no file of theirs is left.
# Needs root (dpkg -i). Temp dirs are removed at exit; the packages are purged
# even when a step fails.
#
#   scripts/package-check.sh [--debs DIR] [--keep-debs DIR] [--jobs N]
#     --debs DIR       use the .debs in DIR instead of building them
#     --keep-debs DIR  copy the built .debs (and .changes, .buildinfo) to DIR
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEBS="" KEEP="" JOBS=${JOBS:-1}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --debs) DEBS=$(cd "$2" && pwd); shift ;;
    --keep-debs) KEEP=$2; shift ;;
    --jobs|-j) JOBS=$2; shift ;;
    *) echo "package-check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ $(id -u) -eq 0 ]] || { echo "package-check.sh: needs root (dpkg -i)" >&2; exit 2; }
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

version=$(sed -n 's/^project(simba VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/simba-package.XXXXXX")
installed=()
cleanup() {
  if [[ ${#installed[@]} -gt 0 ]]; then
    dpkg --purge "${installed[@]}" >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
step() { printf '\n---- [%4ss] %s\n' "$SECONDS" "$*"; }
fail() { echo "FAIL: $*"; exit 1; }

# --- 1. build and lintian ------------------------------------------------------------
if [[ -z "$DEBS" ]]; then
  step "dpkg-buildpackage -us -uc -b in $tmp/simba-$version (parallel=$JOBS)"
  mkdir -p "$tmp/simba-$version"
  (cd "$ROOT" && git ls-files -co --exclude-standard -z) |
    (cd "$ROOT" && tar --null -T - -cf -) | tar -xf - -C "$tmp/simba-$version"
  (cd "$tmp/simba-$version" &&
   DEB_BUILD_OPTIONS="parallel=$JOBS nocheck" dpkg-buildpackage -us -uc -b) \
    >"$tmp/build.log" 2>&1 || { tail -n 60 "$tmp/build.log"; fail "dpkg-buildpackage"; }
  grep -E '^dpkg-gensymbols: warning' "$tmp/build.log" && fail "dpkg-gensymbols is not clean"
  DEBS=$tmp
  if [[ -n "$KEEP" ]]; then
    mkdir -p "$KEEP"
    cp "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo "$KEEP"/
  fi
fi
mapfile -t debs < <(ls "$DEBS"/*_"$version"_*.deb | grep -v -- '-dbgsym_')
[[ ${#debs[@]} -gt 0 ]] || fail "no simba .deb of version $version in $DEBS"
for d in "${debs[@]}"; do echo "  $(basename "$d")"; done
changes=$(ls "$DEBS"/simba_"$version"_*.changes 2>/dev/null | head -n 1 || true)
step "lintian (errors fail)"
lint=("${debs[@]}")
[[ -n "$changes" ]] && lint=("$changes")
set +e
lintian --fail-on error "${lint[@]}" >"$tmp/lintian.log" 2>&1
rc=$?
set -e
cat "$tmp/lintian.log"
((rc == 0)) || fail "lintian reported errors (exit $rc)"
echo "lintian: $(grep -c '^E:' "$tmp/lintian.log" || true) errors, $(grep -c '^W:' "$tmp/lintian.log" || true) warnings"

# --- 2. install -------------------------------------------------------------------------
step "dpkg -i, apt-get install -f"
for d in "${debs[@]}"; do installed+=("$(dpkg-deb -f "$d" Package)"); done
dpkg -i "${debs[@]}" >"$tmp/dpkg.log" 2>&1 ||
  apt-get install -f -y --no-install-recommends >>"$tmp/dpkg.log" 2>&1 ||
  { cat "$tmp/dpkg.log"; fail "the packages did not install"; }
for p in "${installed[@]}"; do
  [[ "$(dpkg-query -W -f='${Status} ${Version}' "$p")" == "install ok installed $version" ]] ||
    fail "$p is not installed at $version"
done
echo "installed: ${installed[*]}"

# --- 3. README.md's example, with pkg-config and with CMake ---------------------------
step "README.md's twenty lines of C with pkg-config --cflags --libs simba"
awk '/^## Twenty lines of C/ { on = 1 } on && /^```c$/ { code = 1; next }
     code && /^```$/ { exit } code { print }' "$ROOT/README.md" >"$tmp/readme_example.c"
[[ -s "$tmp/readme_example.c" ]] || fail "no C block under README.md's 'Twenty lines of C'"
expect_lead() {  # program
  local out
  out=$( (sleep 1; echo) | "$1")
  echo "$out"
  grep -q '^leader of report with token [0-9]' <<<"$out" && grep -qx 'lost report (STOPPED)' <<<"$out" ||
    fail "$1 did not lead and then print 'lost report (STOPPED)'"
}
# shellcheck disable=SC2046  # pkg-config's flags are words
cc -std=c99 -Wall -Wextra -Wno-unused-parameter -Werror "$tmp/readme_example.c" \
  $(pkg-config --cflags --libs simba) -o "$tmp/readme_pkgconfig"
expect_lead "$tmp/readme_pkgconfig"

step "the same with a CMake project: find_package(simba CONFIG REQUIRED)"
mkdir -p "$tmp/cmake"
cp "$tmp/readme_example.c" "$tmp/cmake/main.c"
cat >"$tmp/cmake/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(readme_example C)
find_package(simba $version CONFIG REQUIRED)
add_executable(readme_example main.c)
target_link_libraries(readme_example PRIVATE simba::simba)
CMAKE
cmake -S "$tmp/cmake" -B "$tmp/cmake/build" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake"; }
cmake --build "$tmp/cmake/build" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake --build"; }
expect_lead "$tmp/cmake/build/readme_example"

# --- 4. the tool, its man pages, the bindings, the nginx module -------------------
step "simba --version, man -w"
[[ "$(simba --version)" == "simba $version" ]] || fail "simba --version says '$(simba --version)'"
echo "$(command -v simba): $(simba --version)"
for page in simba simba-run simba-lock simba-status simba-watch simba-schema; do
  man -w "$page" || fail "man -w $page"
done
if command -v lua5.4 >/dev/null; then
  step "lua-simba: require 'simba' in lua5.4"
  out=$(lua5.4 -e 'local s = require "simba"; print(s.VERSION)')
  [[ "$out" == "$version" ]] || fail "lua5.4: require 'simba' gave VERSION '$out'"
  echo "simba.VERSION = $out"
fi
if command -v javac >/dev/null && command -v java >/dev/null; then
  step "libsimba-java: simba.jar and libsimba_jni.so from java.library.path"
  mkdir -p "$tmp/java"
  cat >"$tmp/java/Version.java" <<'JAVA'
public class Version {
  public static void main(String[] args) { System.out.println(io.simba.Simba.version()); }
}
JAVA
  javac -cp /usr/share/java/simba.jar -d "$tmp/java" "$tmp/java/Version.java"
  out=$(java -cp "/usr/share/java/simba.jar:$tmp/java" Version)
  [[ "$out" == "$version" ]] || fail "java: io.simba.Simba.version() gave '$out'"
  echo "io.simba.Simba.version() = $out"
fi
if command -v nginx >/dev/null; then
  step "libnginx-mod-http-simba: Debian's nginx loads the module (nginx -t)"
  ls -l /etc/nginx/modules-enabled/ | grep simba || fail "the module is not enabled"
  nginx -t 2>&1 || fail "nginx -t with the module"
fi

# Go and Rust install from source: against the installed libsimba-dev, found by
# pkg-config alone (no SIMBA_* or CGO_* variables), offline.
GO=$(command -v go || ls /usr/lib/go*/bin/go 2>/dev/null | head -n 1 || true)
if [[ -n "$GO" ]]; then
  step "Go: a module using bindings/go through a replace, cgo flags from pkg-config"
  mkdir -p "$tmp/go"
  cat >"$tmp/go/go.mod" <<GOMOD
module example.com/simbauser

go 1.19

require github.com/simba-project/simba/bindings/go v$version

replace github.com/simba-project/simba/bindings/go => $ROOT/bindings/go
GOMOD
  cat >"$tmp/go/main.go" <<'GOMAIN'
package main

import (
	"fmt"

	simba "github.com/simba-project/simba/bindings/go"
)

func main() { fmt.Println(simba.Version()) }
GOMAIN
  out=$(cd "$tmp/go" && env -u CGO_CFLAGS -u CGO_LDFLAGS GOPROXY=off GOFLAGS=-mod=mod \
    GOTOOLCHAIN=local GOCACHE="$tmp/go-cache" GOPATH="$tmp/gopath" CGO_ENABLED=1 \
    sh -c "'$GO' vet ./... && '$GO' run .") || fail "the Go module did not vet, build or run"
  [[ "$out" == "$version" ]] || fail "Go: simba.Version() gave '$out'"
  echo "simba.Version() = $out"
fi
CARGO=$(command -v cargo || ls "$HOME"/.cargo/bin/cargo 2>/dev/null || true)
if [[ -n "$CARGO" ]]; then
  step "Rust: bindings/rust/tests-downstream links libsimba through pkg-config, no env"
  cp -r "$ROOT/bindings/rust" "$tmp/rust"
  rm -rf "$tmp/rust/target" "$tmp/rust/tests-downstream/target"
  (cd "$tmp/rust" && env -u SIMBA_LIB_DIR -u SIMBA_INCLUDE_DIR -u LD_LIBRARY_PATH \
    CARGO_HOME="$tmp/cargo-home" CARGO_TARGET_DIR="$tmp/rust-target" \
    "$CARGO" build --offline --quiet --manifest-path tests-downstream/Cargo.toml) ||
    fail "the downstream crate did not build"
  out=$(env -u LD_LIBRARY_PATH "$tmp/rust-target/debug/simba-downstream-check") ||
    fail "the downstream crate did not run"
  echo "$out"
  grep -q "^loaded /usr/lib/.*/libsimba.so.1" <<<"$out" || fail "Rust: not the installed libsimba"
fi

if command -v luarocks >/dev/null && command -v lua5.4 >/dev/null; then
  step "Lua: luarocks make of the rockspec against the installed libsimba-dev (no SIMBA_DIR)"
  cp -r "$ROOT/bindings/lua" "$tmp/lua"
  (cd "$tmp/lua" && rm -f ./*.so src/*.o &&
   luarocks --lua-version=5.4 --tree="$tmp/rocks" make "simba-$version-1.rockspec") \
    >"$tmp/luarocks.log" 2>&1 || { cat "$tmp/luarocks.log"; fail "luarocks make"; }
  out=$(lua5.4 -e "package.cpath = '$tmp/rocks/lib/lua/5.4/?.so'; print(require('simba').VERSION)")
  [[ "$out" == "$version" ]] || fail "Lua: the rock's simba.VERSION is '$out'"
  echo "rock simba $version-1: simba.VERSION = $out"
fi

# --- 5. Python and Node as a user has them: the runtime packages only ---------------
step "the runtime packages only: dpkg --purge libsimba-tck-dev libsimba-dev"
dev=(libsimba-tck-dev libsimba-dev)
dpkg --purge "${dev[@]}" >"$tmp/purge-dev.log" 2>&1 || { cat "$tmp/purge-dev.log"; fail "dpkg --purge ${dev[*]}"; }
mapfile -t installed < <(printf '%s\n' "${installed[@]}" | grep -vxF -e "${dev[0]}" -e "${dev[1]}")
[[ ! -e /usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libsimba.so ]] || fail "libsimba.so is still there"
mkdir -p "$tmp/user"
user_env=(env -u SIMBA_LIBRARY -u PYTHONPATH -u NODE_PATH -u LD_LIBRARY_PATH)
libdir_re="^/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libsimba\.so\.$version\$"
step "python3-simba: /usr/bin/python3 -c 'import simba', a memory:// client and a lock"
out=$(cd "$tmp/user" && "${user_env[@]}" /usr/bin/python3 -c '
import simba
with simba.Client("memory://package-check") as client:
    with client.lock("report", timeout=5.0) as term:
        print(simba.__file__, simba.version_string(), "token", term.token)
print(next(l.split()[-1] for l in open("/proc/self/maps") if "libsimba.so" in l))
') || fail "python3-simba: the memory:// lock failed"
echo "$out"
[[ "$(head -n 1 <<<"$out")" == "/usr/lib/python3/dist-packages/simba/__init__.py $version token 1" ]] ||
  fail "python3-simba: not the package's simba $version, or no lock"
grep -q "$libdir_re" <<<"$out" || fail "python3-simba: not the installed libsimba.so.1"
if command -v node >/dev/null; then
  step "node-simba: node -e \"require('simba')\", a memory:// client and a lock"
  out=$(cd "$tmp/user" && "${user_env[@]}" node -e "
const simba = require('simba');
(async () => {
  const client = await simba.open('memory://package-check');
  const term = await client.lock('report', { timeout: 5000 });
  console.log(require.resolve('simba'), simba.version, 'token', String(term.token));
  await term.release();
  await client.close();
  const maps = require('fs').readFileSync('/proc/self/maps', 'utf8').split('\\n');
  console.log(maps.find((l) => l.includes('libsimba.so')).split(/ +/).pop());
})().catch((e) => { console.error(e); process.exit(1); });
") || fail "node-simba: the memory:// lock failed"
  echo "$out"
  [[ "$(head -n 1 <<<"$out")" == "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/nodejs/simba/lib/index.js $version token 1" ]] ||
    fail "node-simba: not the package's simba $version, or no lock"
  grep -q "$libdir_re" <<<"$out" || fail "node-simba: not the installed libsimba.so.1"
fi

# --- 6. remove ----------------------------------------------------------------------
step "dpkg --purge"
for d in "${debs[@]}"; do dpkg-deb -c "$d"; done | awk '{ print $6 }' | sed 's|^\./|/|' |
  grep -v '/$' | sort -u >"$tmp/files"
dpkg --purge "${installed[@]}" >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "dpkg --purge"; }
installed=()
left=$(while read -r f; do if [[ -e "$f" || -L "$f" ]]; then echo "$f"; fi; done <"$tmp/files")
left+=$(ls /etc/nginx/modules-enabled/ 2>/dev/null | grep simba || true)
left+=$(dpkg -l | awk '$2 ~ /simba/ { print $2 " " $1 }')
# Folders of the modules (py3clean removes the __pycache__ py3compile made).
for d in /usr/lib/python3/dist-packages/simba /usr/lib/node/simba \
  "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/nodejs/simba"; do
  if [[ -e "$d" || -L "$d" ]]; then left+="$d"; fi
done
[[ -z "$left" ]] || { echo "$left"; fail "something of simba is left after dpkg --purge"; }
echo "purged: no file of the $(wc -l <"$tmp/files") the packages shipped is left"

step "OK: built, linted, installed, used and purged $(echo "${#debs[@]}") packages of simba $version"
