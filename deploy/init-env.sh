#!/bin/sh
# One-off set-up of the secrets deploy/compose.yml needs, all random:
#   DIR/.env                     the NATS cluster's route password
#   DIR/secrets/authority/       the NATS trust: operator, accounts and the
#                                signing key (seeds, 0600); stays on this host
#   DIR/secrets/nats-trust.conf  what every NATS node includes to trust it
#                                (operator mode; public keys and JWTs only)
#   DIR/secrets/coordinator-1.creds, coordinator-2.creds, client.creds
#   DIR/secrets/workers/worker-N.creds
#                                one credentials file per role and process
#                                (coordinator creds); each worker replica
#                                takes a free one (--nats-creds-pool)
#   DIR/secrets/http-token       the HTTP API's bearer token (the coordinators
#                                read it with --http-token-file; Prometheus too)
#   DIR/worker.env               the workers' further settings: model keys
#   DIR/coordinator.env          the coordinators' further settings
# DIR defaults to the directory of this script. Nothing is overwritten: run
# it again with a larger FORMICA_MAX_WORKERS (default 8) to issue more
# worker credentials before scaling past that.
#
# Credentials are signed by `coordinator creds`: $COORDINATOR if set (a
# command, e.g. "docker run --rm -u $(id -u) -v $PWD/deploy/secrets:/s
# formica:dev coordinator" with DIR/secrets seen as /s: see docs/deployment.md), else
# `coordinator` on PATH, else one built from this repository (go build).
#
#   deploy/init-env.sh [DIR]
set -eu
dir=${1:-$(dirname "$0")}
workers=${FORMICA_MAX_WORKERS:-8}
secret() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
umask 077
mkdir -p "$dir/secrets"

# The path of DIR/secrets as the coordinator command sees it.
secrets=${COORDINATOR_SECRETS:-$dir/secrets}
if [ -n "${COORDINATOR:-}" ]; then
	coordinator=$COORDINATOR
elif command -v coordinator >/dev/null 2>&1; then
	coordinator=coordinator
elif [ -d "$(dirname "$0")/../cmd/coordinator" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$(dirname "$0")/.." && go build -o "$tmp/coordinator" ./cmd/coordinator)
	coordinator=$tmp/coordinator
else
	echo "init-env.sh: no coordinator binary: set COORDINATOR (see the comment at the top)" >&2
	exit 1
fi
creds() { # FILE ARGS...: coordinator creds, unless FILE exists
	file=$1
	shift
	if [ -e "$dir/secrets/$file" ]; then
		return
	fi
	$coordinator creds --data-dir "$secrets/authority" "$@" --out "$secrets/$file"
	# Readable by the containers' user through the bind mount; the
	# directory (0700) keeps other host users out.
	chmod 0644 "$dir/secrets/$file"
	echo "wrote $dir/secrets/$file" >&2
}

if [ -e "$dir/.env" ]; then
	echo "$dir/.env exists; keeping it" >&2
else
	printf 'NATS_ROUTE_PASSWORD=%s\n' "$(secret)" >"$dir/.env"
	echo "wrote $dir/.env" >&2
fi

creds nats-trust.conf --nats-server-conf
creds coordinator-1.creds --role coordinator --id coordinator-1
creds coordinator-2.creds --role coordinator --id coordinator-2
creds client.creds --role client --id client
mkdir -p "$dir/secrets/workers"
chmod 0755 "$dir/secrets/workers" # mounted as a directory: the containers' user lists it
i=1
while [ "$i" -le "$workers" ]; do
	creds "workers/worker-$i.creds" --role worker --id "worker-$i"
	i=$((i + 1))
done

if [ -e "$dir/secrets/http-token" ]; then
	echo "$dir/secrets/http-token exists; keeping it" >&2
else
	secret >"$dir/secrets/http-token"
	chmod 0644 "$dir/secrets/http-token"
	echo "wrote $dir/secrets/http-token" >&2
fi
for role in worker coordinator; do
	if [ ! -e "$dir/$role.env" ]; then
		case $role in
		worker) hint="# OPENAI_API_KEY=...  OPENAI_BASE_URL=...  ANTHROPIC_API_KEY=...  OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318" ;;
		coordinator) hint="# FORMICA_MODEL=openai:gpt-4o  OTEL_EXPORTER_OTLP_ENDPOINT=http://jaeger:4318" ;;
		esac
		printf '# Settings of the %s containers, one VAR=value a line.\n%s\n' "$role" "$hint" >"$dir/$role.env"
		echo "wrote $dir/$role.env" >&2
	fi
done
