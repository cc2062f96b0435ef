#!/usr/bin/env bash
# Build the sriov-dra image of this tree and push it to a registry, keeping its digest (make push).
#   push-image.sh REPOSITORY [--inventory FILE] [--multus REFERENCE] [--insecure] [--authfile FILE] [--archive FILE]
# REPOSITORY   where to push, e.g. registry.example.com/platform/sriov-dra (tagged with the project's version)
# --inventory  the user's inventory: the pushed reference goes to group_vars/all/sriov-dra-images.yml beside
#              it as sriov_dra_image (ansible-playbook reads that file with the inventory; rerun to replace it)
# --multus     a Multus image (e.g. ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick): its digest is read
#              from its registry and written as multus_image next to sriov_dra_image
# --insecure   plain HTTP or an unverified certificate (a lab registry; never a production one)
# --authfile   credentials file (default: skopeo's, written by `skopeo login REGISTRY`; REGISTRY_AUTH_FILE)
# --archive    push this OCI archive (built before, or elsewhere) instead of building the tree's image
#
# The image is built by tools/build-image.sh --product (root, mmdebstrap, buildah) into an OCI archive and
# copied by skopeo with --preserve-digests: the manifest is copied byte for byte, so the digest the build
# computed is the one the registry serves (checked after the push by reading the manifest back by digest).
# Prints the pushed reference, REPOSITORY:VERSION@sha256:<digest>, as the last line on stdout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

log() { printf '[push] %s\n' "$*" >&2; }
die() { printf '[push] ERROR: %s\n' "$*" >&2; exit 1; }
usage="usage: push-image.sh REPOSITORY [--inventory FILE] [--multus REFERENCE] [--insecure] [--authfile FILE] [--archive FILE]"

repository="" inventory="" multus="" archive="" tls=() auth=()
while [ $# -gt 0 ]; do
  case $1 in
    --inventory) [ $# -ge 2 ] || die "--inventory needs a file; $usage"; inventory=$2; shift 2 ;;
    --multus) [ $# -ge 2 ] || die "--multus needs an image reference; $usage"; multus=$2; shift 2 ;;
    --insecure) tls=(--tls-verify=false); shift ;;
    --authfile) [ $# -ge 2 ] || die "--authfile needs a file; $usage"; auth=(--authfile "$2"); shift 2 ;;
    --archive) [ $# -ge 2 ] || die "--archive needs an OCI archive; $usage"; archive=$2; shift 2 ;;
    -*) die "unknown option $1; $usage" ;;
    *) [ -z "$repository" ] || die "one REPOSITORY only (got $repository and $1); $usage"; repository=$1; shift ;;
  esac
done
[ -n "$repository" ] || die "name the repository to push to, e.g. registry.example.com/platform/sriov-dra; $usage"
case $repository in
  *@*|*://*) die "REPOSITORY '$repository' is a repository name without digest or scheme, e.g. registry.example.com/platform/sriov-dra" ;;
esac
last=${repository##*/}
case $last in *:*) die "REPOSITORY '$repository' has a tag; give the repository only (the tag is the project's version)" ;; esac
case $repository in */*) ;; *) die "REPOSITORY '$repository' names no registry host, e.g. registry.example.com/platform/sriov-dra" ;; esac
command -v skopeo >/dev/null || die "skopeo not found (Debian package skopeo; tools/install-debian-deps.sh installs it)"

vars_file=""
if [ -n "$inventory" ]; then
  [ -f "$inventory" ] || die "no inventory at $inventory; copy playbooks/inventory/example.yml there first (outside this tree)"
  inventory=$(cd "$(dirname "$inventory")" && pwd)/$(basename "$inventory")
  case $inventory in
    "$repo"/*) die "the inventory $inventory is inside this tree, which a collection build packs; keep it outside, e.g. ~/sriov-dra/inventory.yml" ;;
  esac
  vars_file=$(dirname "$inventory")/group_vars/all/sriov-dra-images.yml
fi

# digest_of TRANSPORT:REFERENCE: the manifest digest it resolves to (the sha256 of the manifest's bytes as served).
digest_of() {
  local raw opts=()
  case $1 in docker://*) opts=("${tls[@]}" "${auth[@]}") ;; esac
  raw=$(skopeo inspect --raw "${opts[@]}" "$1") || die "cannot read the manifest of ${1#docker://} (above: skopeo's reason)"
  printf 'sha256:%s' "$(printf '%s' "$raw" | sha256sum | cut -c1-64)"
}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml" | head -1)
if [ -n "$archive" ]; then
  [ -s "$archive" ] || die "no OCI archive at $archive"
  digest=$(digest_of "oci-archive:$archive")
else
  read -r archive digest < <(bash "$here/build-image.sh" --product) || die "tools/build-image.sh --product failed (above)"
  [ -s "$archive" ] || die "tools/build-image.sh printed no archive"
fi
# untagged NAME[:TAG]: NAME (skopeo 1.9 reads no reference with both a tag and a digest).
untagged() { local last=${1##*/}; case $last in *:*) printf '%s' "${1%:*}" ;; *) printf '%s' "$1" ;; esac; }

multus_reference=""
if [ -n "$multus" ]; then  # before the push: a wrong Multus reference changes nothing
  if [[ $multus == *@* ]]; then  # pinned already: check that its registry serves that digest
    served=$(digest_of "docker://$(untagged "${multus%%@*}")@${multus#*@}")
    [ "$served" = "${multus#*@}" ] || die "$multus reads back as $served"
    multus_reference=$multus
  else
    multus_digest=$(digest_of "docker://$multus")
    multus_reference=$multus@$multus_digest
  fi
  log "multus: $multus_reference"
fi

target=$repository:$version
log "copying $archive ($digest) to $target"
digest_file=$(mktemp)
trap 'rm -f "$digest_file"' EXIT
skopeo copy --quiet --preserve-digests --retry-times 2 --digestfile "$digest_file" \
  "${tls[@]/#--tls-verify/--dest-tls-verify}" "${auth[@]}" "oci-archive:$archive" "docker://$target" \
  || die "skopeo copy to $target failed (above); for credentials run 'skopeo login ${repository%%/*}' or pass --authfile"
pushed=$(cat "$digest_file")
[ "$pushed" = "$digest" ] || die "the registry stored $target as $pushed, not the built $digest; nothing was written"
served=$(digest_of "docker://$repository@$digest")
[ "$served" = "$digest" ] || die "$repository@$digest reads back as $served; nothing was written"
reference=$target@$digest

if [ -n "$vars_file" ]; then
  if [ -z "$multus_reference" ] && [ -f "$vars_file" ]; then
    multus_reference=$(sed -n 's/^multus_image: //p' "$vars_file" | head -1)  # kept from the previous run
  fi
  mkdir -p "$(dirname "$vars_file")"
  {
    printf '# Written by tools/push-image.sh (make push); run it again to change these.\n'
    printf 'sriov_dra_image: %s\n' "$reference"
    [ -z "$multus_reference" ] || printf 'multus_image: %s\n' "$multus_reference"
  } > "$vars_file.tmp"
  mv "$vars_file.tmp" "$vars_file"
  log "wrote $vars_file"
fi
log "pushed $reference"
printf '%s\n' "$reference"
