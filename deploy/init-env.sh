#!/bin/sh
# One-off set-up of the secrets deploy/compose.yml needs, all random:
#   DIR/.env                 a NATS password per role (coordinator, worker,
#                            client) and the NATS cluster's route password
#   DIR/secrets/http-token   the HTTP API's bearer token (the coordinators
#                            read it with --http-token-file; Prometheus too)
#   DIR/worker.env           the workers' further settings: model keys
#   DIR/coordinator.env      the coordinators' further settings
# DIR defaults to the directory of this script. Nothing is overwritten.
#
#   deploy/init-env.sh [DIR]
set -eu
dir=${1:-$(dirname "$0")}
secret() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
umask 077
if [ -e "$dir/.env" ]; then
	echo "$dir/.env exists; keeping it" >&2
else
	cat >"$dir/.env" <<ENV
NATS_ROUTE_PASSWORD=$(secret)
FORMICA_COORDINATOR_NATS_PASSWORD=$(secret)
FORMICA_WORKER_NATS_PASSWORD=$(secret)
FORMICA_CLIENT_NATS_PASSWORD=$(secret)
ENV
	echo "wrote $dir/.env" >&2
fi
if [ -e "$dir/secrets/http-token" ]; then
	echo "$dir/secrets/http-token exists; keeping it" >&2
else
	mkdir -p "$dir/secrets"
	secret >"$dir/secrets/http-token"
	# Readable by the containers' user through the bind mount; the
	# directory (0700) keeps other host users out.
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
