#!/bin/sh
# Builds the release binary: formica, static (CGO_ENABLED=0), without local
# paths (-trimpath), stripped (-s -w), stamped with VERSION (internal/version).
# It is every role: coordinator and worker are links to it in OUT_DIR, and
# it runs as the role it is named. The image (deploy/Dockerfile) and the
# compose test build it with this one recipe, so what CI runs is what a
# release ships.
#
#   deploy/build.sh OUT_DIR [VERSION]
#
# VERSION defaults to $VERSION, else `git describe --tags --always --dirty`
# of the checkout, else "devel".
set -eu
out=${1:?usage: deploy/build.sh OUT_DIR [VERSION]}
version=${2:-${VERSION:-}}
if [ -z "$version" ]; then
	version=$(git -C "$(dirname "$0")" describe --tags --always --dirty 2>/dev/null || echo devel)
fi
mkdir -p "$out"
CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/formica-run/formica/internal/version.stamp=$version" \
	-o "$out/formica" ./cmd/formica
ln -sf formica "$out/coordinator"
ln -sf formica "$out/worker"
