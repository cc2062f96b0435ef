#!/usr/bin/env bash
# Build the pinned third-party binaries that the cluster, cni and e2e test tiers and the lab run:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (k8s.io/kubernetes), etcd (via etcdmain),
# Multus (multus, multus-shim, multus-daemon), the containernetworking reference plugins and whereabouts.
#
# Everything is built with the local Go toolchain from modules served by the Go module proxy, into
#   ${SRIOV_DRA_CACHE:-~/.cache/sriov-dra}/<component>/<version>/bin
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

build_kubernetes() {
  local v=$KUBERNETES_VERSION bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  if fresh kubernetes "$v" "${bins[@]}"; then log "kubernetes $v: cached"; return; fi
  local bin src staging minor
  bin=$(component_dir kubernetes "$v"); src="$cache/src/kubernetes-$v"
  staging="v0.${v#v1.}"; minor=${v#v1.}; minor=${minor%%.*}
  log "kubernetes $v: resolving k8s.io/kubernetes and its staging modules at $staging"
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
  cat > "$src/tools.go" <<GO
//go:build tools

// Package tools pins the Kubernetes commands that tools/build-binaries.sh builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  (cd "$src" && go get "k8s.io/kubernetes@$v" && go mod tidy) \
    || die "cannot resolve k8s.io/kubernetes@$v with staging modules at $staging"
  local ld=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  mkdir -p "$bin"
  local b
  for b in "${bins[@]}"; do
    log "kubernetes $v: building $b (several minutes on a cold cache)"
    (cd "$src" && go build -trimpath -ldflags "-s -w$ld" -o "$bin/$b" "k8s.io/kubernetes/cmd/$b") \
      || die "building k8s.io/kubernetes/cmd/$b@$v failed"
  done
  stamp kubernetes "$v"
}

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
# directives that `go install` refuses (set WRAPPER_REPLACES to "old=new@ver ...").
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
  log "$name $v: resolving $mod@$v"
  (cd "$src" && go mod edit "-require=$mod@$v" && go mod tidy && go mod download "$mod") \
    || die "cannot resolve module $mod@$v"
  mkdir -p "$bin"
  for spec in "$@"; do
    log "$name $v: building ${spec##*:}"
    (cd "$src" && go build -trimpath -ldflags "-s -w $ld" -o "$bin/${spec##*:}" "$mod/${spec%%:*}") \
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

build_cni_plugins() {
  local v=$CNI_PLUGINS_VERSION mod=github.com/containernetworking/plugins
  if fresh cni-plugins "$v" host-local static tuning bridge loopback macvlan; then log "cni-plugins $v: cached"; return; fi
  wrapper_build cni-plugins "$v" "$mod" "" plugins/ipam/host-local:host-local plugins/ipam/static:static \
    plugins/meta/tuning:tuning plugins/main/bridge:bridge plugins/main/loopback:loopback plugins/main/macvlan:macvlan
}

build_whereabouts() {
  local v=$WHEREABOUTS_VERSION mod=github.com/k8snetworkplumbingwg/whereabouts
  if fresh whereabouts "$v" whereabouts; then log "whereabouts $v: cached"; return; fi
  # whereabouts' own go.mod replaces gogo/protobuf; a wrapper must carry the same replace.
  WRAPPER_REPLACES="github.com/gogo/protobuf=github.com/gogo/protobuf@v1.3.2" \
    wrapper_build whereabouts "$v" "$mod" "" cmd:whereabouts
}

want=${*:-kubernetes etcd multus cni-plugins whereabouts}
start=$(date +%s)
for c in $want; do
  case $c in
    kubernetes) build_kubernetes ;;
    etcd) build_etcd ;;
    multus) build_multus ;;
    cni-plugins) build_cni_plugins ;;
    whereabouts) build_whereabouts ;;
    *) die "unknown component '$c' (known: kubernetes etcd multus cni-plugins whereabouts)" ;;
  esac
done
log "all requested binaries ready under $cache ($(( $(date +%s) - start ))s)"
