#!/usr/bin/env bash
# Build the pinned third-party binaries that the cluster, cni and e2e test tiers and the lab run:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes), etcd (via etcdmain),
# Multus (multus, multus-shim, multus-daemon; install_multus, thin_entrypoint, passthru for its images), the containernetworking reference plugins, whereabouts, and
# the real-node parts: the kubelet (same module and ldflags as the apiserver), containerd (containerd,
# containerd-shim-runc-v2, ctr) and crictl, and for the realvf tier sriov-cni (sriov) and upstream
# dra-driver-sriov (dra-driver-sriov). runc comes from Debian (tools/install-debian-deps.sh).
#
# Everything is built with the local Go toolchain from modules served by the Go module proxy, into
#   ${SRIOV_DRA_CACHE:-~/.cache/sriov-dra}/<component>/<version>/bin
# sriov-cni and dra-driver-sriov are built from a source tree when SRIOV_CNI_SRC / DRA_DRIVER_SRIOV_SRC
# names one (a checkout at the pinned version; read-only is fine: the build writes only into the cache),
# otherwise from the Go module proxy, as a user elsewhere would.
# Nothing is written into the repository. A component whose stamp matches is skipped, so a second run
# does no work. A failure names the module and version that could not be built.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${SRIOV_DRA_CACHE:-$HOME/.cache/sriov-dra}
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
recipe_rev=4   # bump when the recipe below changes in a way that must rebuild

log() { printf '[tools] %s\n' "$*" >&2; }
die() { printf '[tools] ERROR: %s\n' "$*" >&2; exit 1; }

# Go is needed only when something must be built: with every component cached, no toolchain is asked for.
go_checked=""
need_go() {
  [ -n "$go_checked" ] && return 0
  command -v go >/dev/null || die "Go toolchain not found on PATH (need Go >= 1.26 to build the pinned binaries; nothing is cached yet under $cache)"
  local gover; gover=$(command go env GOVERSION)
  case "$gover" in
    go1.2[6-9]*|go1.[3-9][0-9]*) ;;
    *) die "Go $gover is too old: k8s.io/kubernetes $KUBERNETES_VERSION requires go 1.26" ;;
  esac
  go_checked=1
}

# component_dir NAME VERSION -> prints the bin dir
component_dir() { printf '%s/%s/%s/bin' "$cache" "$1" "$2"; }

# fresh NAME VERSION BINARY... -> true if every binary exists and the stamp matches
fresh() {
  local name=$1 version=$2; shift 2
  local bin; bin=$(component_dir "$name" "$version")
  [ "$(cat "$bin/.stamp" 2>/dev/null)" = "$name $version recipe=$recipe_rev" ] || return 1
  for b in "$@"; do [ -x "$bin/$b" ] || return 1; done
}
stamp() { printf '%s %s recipe=%s\n' "$1" "$2" "$recipe_rev" > "$(component_dir "$1" "$2")/.stamp"; }

# wrapper_module DIR MODULE_NAME: create an empty Go module used only to pin and build dependencies.
# Every build starts here, so this is where a missing or old Go toolchain is reported.
wrapper_module() {
  need_go
  rm -rf "$1"; mkdir -p "$1"
  (cd "$1" && go mod init "$2" >/dev/null 2>&1 && go mod edit -go=1.26.0)
}

# kubernetes_module DIR VERSION CMD...: the wrapper module requiring k8s.io/kubernetes@VERSION with every
# staging module replaced by its v0.<minor> release, importing k8s.io/kubernetes/cmd/CMD for each CMD.
# Prints the ldflags that stamp the version into component-base and client-go.
kubernetes_module() {
  local src=$1 v=$2; shift 2
  local staging="v0.${v#v1.}" minor=${v#v1.}; minor=${minor%%.*}
  log "kubernetes $v: resolving k8s.io/kubernetes and its staging modules at $staging for $*"
  wrapper_module "$src" sriov-dra.local/kbuild
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$v" | python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])') \
    || die "cannot download module k8s.io/kubernetes@$v"
  # Exactly the staging modules: required at the placeholder v0.0.0 (not pseudo-versions v0.0.0-<date>-<sha>).
  local mods; mods=$(grep -oE '^[[:space:]]*k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk '{print $1}' | sort -u)
  [ -n "$mods" ] || die "no v0.0.0 staging requirements found in the go.mod of k8s.io/kubernetes@$v"
  local m args=()
  for m in $mods; do args+=("-replace=$m=$m@$staging"); done
  (cd "$src" && go mod edit "${args[@]}")
  {
    printf '//go:build tools\n\n// Package tools pins the Kubernetes commands that tools/build-binaries.sh builds.\npackage tools\n\nimport (\n'
    local c; for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } > "$src/tools.go"
  (cd "$src" && go get "k8s.io/kubernetes@$v" && go mod tidy) >&2 \
    || die "cannot resolve k8s.io/kubernetes@$v with staging modules at $staging"
  local ld="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  printf '%s' "$ld"
}

# kubernetes_build COMPONENT CMD...: build k8s.io/kubernetes/cmd/CMD at $KUBERNETES_VERSION into COMPONENT's dir.
kubernetes_build() {
  local name=$1 v=$KUBERNETES_VERSION; shift
  if fresh "$name" "$v" "$@"; then log "$name $v: cached"; return; fi
  local bin src ld b
  bin=$(component_dir "$name" "$v"); src="$cache/src/$name-$v"
  ld=$(kubernetes_module "$src" "$v" "$@") || exit 1
  mkdir -p "$bin"
  for b in "$@"; do
    log "$name $v: building $b (several minutes on a cold cache)"
    (cd "$src" && go build -trimpath -ldflags "-s -w$ld" -o "$bin/$b" "k8s.io/kubernetes/cmd/$b") \
      || die "building k8s.io/kubernetes/cmd/$b@$v failed"
  done
  stamp "$name" "$v"
}

build_kubernetes() { kubernetes_build kubernetes kube-apiserver kube-controller-manager kube-scheduler kubectl; }

# The kubelet is its own component (own stamp and wrapper), so adding it does not rebuild the control plane.
build_kubelet() { kubernetes_build kubelet kubelet; }

build_etcd() {
  local v=$ETCD_VERSION
  if fresh etcd "$v" etcd; then log "etcd $v: cached"; return; fi
  local bin src; bin=$(component_dir etcd "$v"); src="$cache/src/etcd-$v"
  log "etcd $v: building a main around go.etcd.io/etcd/server/v3/etcdmain"
  wrapper_module "$src" sriov-dra.local/etcdbuild
  cat > "$src/main.go" <<GO
// Command etcd runs etcdmain.Main, as the etcd server binary does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$src" && go get "go.etcd.io/etcd/server/v3@$v" && go mod tidy >/dev/null) \
    || die "cannot resolve go.etcd.io/etcd/server/v3@$v"
  mkdir -p "$bin"
  (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .) || die "building go.etcd.io/etcd/server/v3@$v failed"
  stamp etcd "$v"
}

# wrapper_build COMPONENT VERSION MODULE LDFLAGS PKG:BIN... : build main packages of one module at one
# version through a wrapper module that requires it. A wrapper (rather than `go install pkg@version`)
# also works for modules whose version list the proxy does not serve, and can carry replace
# directives that `go install` refuses (set WRAPPER_REPLACES to "old=new@ver ..."; WRAPPER_TAGS to build tags;
# WRAPPER_REF to require a commit or other version query instead of VERSION, which still names the cache dir).
wrapper_build() {
  local name=$1 v=$2 mod=$3 ld=$4; shift 4
  local bin src; bin=$(component_dir "$name" "$v"); src="$cache/src/$name-$v"
  wrapper_module "$src" "sriov-dra.local/${name}build"
  {
    printf '//go:build tools\n\n// Package tools pins the %s commands that tools/build-binaries.sh builds.\npackage tools\n\nimport (\n' "$name"
    local spec; for spec in "$@"; do printf '\t_ "%s/%s"\n' "$mod" "${spec%%:*}"; done
    printf ')\n'
  } > "$src/tools.go"
  local r; for r in ${WRAPPER_REPLACES:-}; do (cd "$src" && go mod edit "-replace=$r"); done
  log "$name $v: resolving $mod@${WRAPPER_REF:-$v}"
  (cd "$src" && go mod edit "-require=$mod@${WRAPPER_REF:-$v}" && go mod tidy && go mod download "$mod") \
    || die "cannot resolve module $mod@${WRAPPER_REF:-$v}"
  mkdir -p "$bin"
  for spec in "$@"; do
    log "$name $v: building ${spec##*:}"
    (cd "$src" && go build -trimpath ${WRAPPER_TAGS:+-tags "$WRAPPER_TAGS"} -ldflags "-s -w $ld" \
      -o "$bin/${spec##*:}" "$mod/${spec%%:*}") \
      || die "building $mod/${spec%%:*}@$v failed"
  done
  stamp "$name" "$v"
}

build_multus() {
  local v=$MULTUS_VERSION mod=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
  if fresh multus "$v" multus multus-shim multus-daemon; then log "multus $v: cached"; return; fi
  wrapper_build multus "$v" "$mod" "-X $mod/pkg/multus.version=$v -X $mod/pkg/multus.releaseStatus=released" \
    cmd/multus:multus cmd/multus-shim:multus-shim cmd/multus-daemon:multus-daemon
}

# Multus's image helpers (what the upstream images hold beside the binaries above, under the names its
# hack/build-go.sh gives them): install_multus (the thick init container copies multus-shim and passthru
# to the host), thin_entrypoint (the thin container) and passthru (cmd/passthru-cni). Own component and
# stamp, so adding them does not rebuild multus.
build_multus_tools() {
  local v=$MULTUS_VERSION mod=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
  if fresh multus-tools "$v" install_multus thin_entrypoint passthru; then log "multus-tools $v: cached"; return; fi
  wrapper_build multus-tools "$v" "$mod" "-X $mod/pkg/multus.version=$v -X $mod/pkg/multus.releaseStatus=released" \
    cmd/install_multus:install_multus cmd/thin_entrypoint:thin_entrypoint cmd/passthru-cni:passthru
}

build_cni_plugins() {
  local v=$CNI_PLUGINS_VERSION mod=github.com/containernetworking/plugins
  if fresh cni-plugins "$v" host-local static tuning bridge loopback macvlan host-device ptp; then log "cni-plugins $v: cached"; return; fi
  wrapper_build cni-plugins "$v" "$mod" "" plugins/ipam/host-local:host-local plugins/ipam/static:static \
    plugins/meta/tuning:tuning plugins/main/bridge:bridge plugins/main/loopback:loopback plugins/main/macvlan:macvlan \
    plugins/main/host-device:host-device plugins/main/ptp:ptp
}

build_whereabouts() {
  local v=$WHEREABOUTS_VERSION mod=github.com/k8snetworkplumbingwg/whereabouts
  if fresh whereabouts "$v" whereabouts; then log "whereabouts $v: cached"; return; fi
  # whereabouts' own go.mod replaces gogo/protobuf; a wrapper must carry the same replace.
  WRAPPER_REPLACES="github.com/gogo/protobuf=github.com/gogo/protobuf@v1.3.2" \
    wrapper_build whereabouts "$v" "$mod" "" cmd:whereabouts
}

build_containerd() {
  local v=$CONTAINERD_VERSION mod=github.com/containerd/containerd/v2
  if fresh containerd "$v" containerd containerd-shim-runc-v2 ctr; then log "containerd $v: cached"; return; fi
  # Version without the leading v, as containerd's release Makefile stamps it: the CRI RuntimeVersion,
  # so the Node status reads containerd://${v#v}. No cgo: the snapshotters that need it are left out.
  WRAPPER_TAGS=no_btrfs,no_devmapper,no_zfs wrapper_build containerd "$v" "$mod" \
    "-X $mod/version.Version=${v#v} -X $mod/version.Revision=$v" \
    cmd/containerd:containerd cmd/containerd-shim-runc-v2:containerd-shim-runc-v2 cmd/ctr:ctr
}

build_crictl() {
  local v=$CRICTL_VERSION mod=sigs.k8s.io/cri-tools
  if fresh crictl "$v" crictl; then log "crictl $v: cached"; return; fi
  wrapper_build crictl "$v" "$mod" "-X $mod/pkg/version.Version=$v" cmd/crictl:crictl
}

# The lab's pause binary (the sandbox image's /pause), static, from tools/pause.c; PAUSE_VERSION names
# the source revision (bump it with the file).
build_pause() {
  local v=$PAUSE_VERSION
  if fresh pause "$v" pause; then log "pause $v: cached"; return; fi
  command -v gcc >/dev/null || die "gcc not found (needed for the static pause binary; tools/install-debian-deps.sh installs it)"
  local bin; bin=$(component_dir pause "$v"); mkdir -p "$bin"
  log "pause $v: compiling tools/pause.c (static)"
  gcc -static -Os -s -Wall -Werror -o "$bin/pause" "$here/pause.c" || die "compiling $here/pause.c failed (libc6-dev provides the static libc)"
  stamp pause "$v"
}

# tree_build COMPONENT VERSION MODULE SRC_VAR PKG:BIN...: main packages of MODULE built in the source tree the
# environment variable SRC_VAR names (a checkout of MODULE at VERSION; read-only is fine: `go build -o` writes
# only into the cache). <bin>/.source says where the binaries came from.
tree_build() {
  local name=$1 v=$2 mod=$3 var=$4; shift 4
  local src bin spec found; bin=$(component_dir "$name" "$v")
  need_go
  src=$(cd "${!var}" 2>/dev/null && pwd) || die "$var=${!var} is not a directory; point $var at a checkout of $mod at $v"
  [ -f "$src/go.mod" ] || die "$var=$src has no go.mod; point $var at a checkout of $mod at $v"
  found=$(awk '$1=="module"{print $2; exit}' "$src/go.mod")
  [ "$found" = "$mod" ] || die "$var=$src holds module '$found', not $mod"
  rm -rf "$bin"; mkdir -p "$bin"
  for spec in "$@"; do
    log "$name $v: building ${spec##*:} from the source tree $src ($var)"
    (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$bin/${spec##*:}" "./${spec%%:*}") \
      || die "building $mod/${spec%%:*} from $src ($var) failed"
  done
  printf 'source tree %s (%s)\n' "$src" "$var" > "$bin/.source"
  stamp "$name" "$v"
}

# cached_note COMPONENT VERSION: the "cached" log line with where the binaries came from.
cached_note() { log "$1 $2: cached ($(cat "$(component_dir "$1" "$2")/.source" 2>/dev/null || echo 'the Go module proxy'))"; }

# sriov-cni: from SRIOV_CNI_SRC when set, else from the Go module proxy. Its go.mod at v2.10.0 names the module
# without a /v2 suffix (so v2.10.0 is no valid version of it) and carries a replace directive (which
# `go install pkg@version` refuses): the wrapper module requires the tag's commit and carries the same replace.
build_sriov_cni() {
  local v=$SRIOV_CNI_VERSION mod=github.com/k8snetworkplumbingwg/sriov-cni
  if fresh sriov-cni "$v" sriov; then cached_note sriov-cni "$v"; return; fi
  if [ -n "${SRIOV_CNI_SRC:-}" ]; then tree_build sriov-cni "$v" "$mod" SRIOV_CNI_SRC cmd/sriov:sriov; return; fi
  log "sriov-cni $v: SRIOV_CNI_SRC is not set; building $mod at $SRIOV_CNI_COMMIT (the $v tag) from the Go module proxy"
  WRAPPER_REF=$SRIOV_CNI_COMMIT \
    WRAPPER_REPLACES="github.com/vishvananda/netlink=github.com/vishvananda/netlink@v1.2.1-beta.2.0.20240806173335-3b7e16c5f836" \
    wrapper_build sriov-cni "$v" "$mod" "" cmd/sriov:sriov
  printf 'the Go module proxy (%s@%s)\n' "$mod" "$SRIOV_CNI_COMMIT" > "$(component_dir sriov-cni "$v")/.source"
}

# Upstream dra-driver-sriov (no release tag: a commit): from DRA_DRIVER_SRIOV_SRC when set, else go install.
build_dra_driver_sriov() {
  local v=$DRA_DRIVER_SRIOV_VERSION mod=github.com/k8snetworkplumbingwg/dra-driver-sriov bin
  if fresh dra-driver-sriov "$v" dra-driver-sriov; then cached_note dra-driver-sriov "$v"; return; fi
  if [ -n "${DRA_DRIVER_SRIOV_SRC:-}" ]; then
    tree_build dra-driver-sriov "$v" "$mod" DRA_DRIVER_SRIOV_SRC cmd/dra-driver-sriov:dra-driver-sriov; return
  fi
  need_go
  bin=$(component_dir dra-driver-sriov "$v"); rm -rf "$bin"; mkdir -p "$bin"
  log "dra-driver-sriov $v: DRA_DRIVER_SRIOV_SRC is not set; go install $mod/cmd/dra-driver-sriov@$v"
  GOBIN=$bin go install -trimpath -ldflags "-s -w" "$mod/cmd/dra-driver-sriov@$v" \
    || die "go install $mod/cmd/dra-driver-sriov@$v failed; where the Go module proxy does not serve it, set DRA_DRIVER_SRIOV_SRC to a checkout at $v"
  printf 'the Go module proxy (%s@%s)\n' "$mod" "$v" > "$bin/.source"
  stamp dra-driver-sriov "$v"
}

all="kubernetes etcd multus multus-tools cni-plugins whereabouts kubelet containerd crictl pause sriov-cni dra-driver-sriov"
want=${*:-$all}
start=$(date +%s)
for c in $want; do
  case $c in
    kubernetes) build_kubernetes ;;
    etcd) build_etcd ;;
    multus) build_multus ;;
    multus-tools) build_multus_tools ;;
    cni-plugins) build_cni_plugins ;;
    whereabouts) build_whereabouts ;;
    kubelet) build_kubelet ;;
    containerd) build_containerd ;;
    crictl) build_crictl ;;
    pause) build_pause ;;
    sriov-cni) build_sriov_cni ;;
    dra-driver-sriov) build_dra_driver_sriov ;;
    *) die "unknown component '$c' (known: $all)" ;;
  esac
done
log "all requested binaries ready under $cache ($(( $(date +%s) - start ))s)"
