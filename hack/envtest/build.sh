#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from Go modules
# into $1 (default bin/k8s), so tests never download release binaries.
# A binary that already reports the pinned version is kept as is.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/bin/k8s}
mkdir -p "$out"
out=$(cd "$out" && pwd)

export CGO_ENABLED=0
# These modules are build recipes outside the workspace (go.work).
export GOWORK=off

if ! "$out/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"; then
	echo "envtest: building kube-apiserver $KUBE_VERSION (a few minutes on a cold cache)" >&2
	minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	pkg=k8s.io/component-base/version
	ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	(cd "$root/hack/envtest/apiserver" && go build -trimpath -ldflags "$ldflags" \
		-o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi

if ! "$out/etcd" --version 2>/dev/null | grep -q "etcd Version: ${ETCD_VERSION#v}"; then
	echo "envtest: building etcd $ETCD_VERSION" >&2
	(cd "$root/hack/envtest/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" .)
	mv "$out/etcd.tmp" "$out/etcd"
fi
