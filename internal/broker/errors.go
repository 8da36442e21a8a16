package broker

import "errors"

var (
	// ErrInvalidConfig reports a ServerConfig or ClientConfig that cannot work;
	// the wrapping error says which fields.
	ErrInvalidConfig = errors.New("broker: invalid config")

	// ErrNotReady reports a server that did not become ready (accept clients,
	// or elect a JetStream meta leader) within its bound.
	ErrNotReady = errors.New("broker: server not ready")

	// ErrJetStreamDisabled reports a JetStream wait on a server without it.
	ErrJetStreamDisabled = errors.New("broker: JetStream not enabled")

	// ErrDrainTimeout reports a connection that did not close within the
	// drain bound; Drain closes it anyway.
	ErrDrainTimeout = errors.New("broker: drain timed out")
)
