#!/bin/sh
# Builds the release binaries: coordinator, worker and formica, static
# (CGO_ENABLED=0), without local paths (-trimpath), stamped with VERSION.
# The image (deploy/Dockerfile) and the compose test build them with this
# one recipe, so what CI runs is what a release ships.
#
#   deploy/build.sh OUT_DIR [VERSION]
set -eu
out=${1:?usage: deploy/build.sh OUT_DIR [VERSION]}
version=${2:-${VERSION:-devel}}
CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X github.com/formica-run/formica/internal/version.stamp=$version" \
	-o "$out/" ./cmd/coordinator ./cmd/worker ./cmd/formica
