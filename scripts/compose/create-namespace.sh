#!/bin/sh
# Registers the namespace NAMESPACE (default "default") with the Temporal
# service at TEMPORAL_ADDRESS unless it exists. Run by the
# temporal-create-namespace service of docker-compose.yml once the server is
# healthy; the workers start after it has succeeded.
set -eu

NAMESPACE=${NAMESPACE:-default}
RETENTION=${RETENTION:-72h}

tries=0
until temporal operator cluster health | grep -q SERVING; do
	tries=$((tries + 1))
	if [ "$tries" -ge 60 ]; then
		echo "create-namespace: Temporal at $TEMPORAL_ADDRESS is not serving" >&2
		exit 1
	fi
	sleep 2
done

if temporal operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
	echo "create-namespace: namespace $NAMESPACE already exists"
else
	temporal operator namespace create --namespace "$NAMESPACE" --retention "$RETENTION"
	echo "create-namespace: namespace $NAMESPACE created"
fi
