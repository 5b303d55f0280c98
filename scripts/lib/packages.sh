# ensure_packages PKG...: installs the Debian packages that are missing, with
# apt-get (as root, or through sudo), updating the package lists only then.
# Sourced by scripts/test.sh and scripts/demo.sh. SIMBA_NO_INSTALL=1 only reports.
ensure_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "not Debian (no dpkg-query): make sure these are installed: $*" >&2
    return 0
  fi
  local missing=() p
  for p in "$@"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != "installed" ]]; then
      missing+=("$p")
    fi
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ "${SIMBA_NO_INSTALL:-0}" == 1 ]]; then
    echo "missing packages (not installing): ${missing[*]}" >&2
    return 0
  fi
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo -n)
    else
      echo "missing packages and not root: apt-get install ${missing[*]}" >&2
      return 1
    fi
  fi
  echo "==== installing missing packages: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
}

# node_header_packages: prints libnode-dev when the machine's nodejs (the
# installed one, else apt's candidate) is Debian's: its Node is split into
# libnodeNNN, and node_api.h is in libnode-dev. Nothing for nodesource's
# nodejs, which ships its headers and conflicts with libnode-dev.
node_header_packages() {
  command -v dpkg-query >/dev/null 2>&1 || return 0
  local deps cand
  if [[ "$(dpkg-query -W -f='${db:Status-Status}' nodejs 2>/dev/null || true)" == installed ]]; then
    deps=$(dpkg-query -W -f='${Depends}' nodejs 2>/dev/null || true)
  else
    cand=$(apt-cache policy nodejs 2>/dev/null | awk '/Candidate:/ { print $2 }')
    [[ -n "$cand" && "$cand" != "(none)" ]] || return 0
    deps=$(apt-cache show "nodejs=$cand" 2>/dev/null | awk '/^Depends:/ { sub(/^Depends: /, ""); print; exit }')
  fi
  if [[ "$deps" =~ (^|[ ,])libnode[0-9]+ ]]; then echo libnode-dev; fi
  return 0
}

# What the benchmarks need (scripts/bench.sh, scripts/scale.sh): the build, and
# the three servers with their client libraries.
SIMBA_BENCH_PACKAGES=(
  build-essential cmake pkg-config
  libuv1-dev libhiredis-dev libpq-dev
  redis-server redis-tools
  postgresql openssl
  zookeeper libzookeeper-st-dev default-jre-headless
  etcd-server etcd-client libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
)
