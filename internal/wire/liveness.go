package wire

import "time"

// The liveness rules every role shares: peers heartbeat once an interval,
// and one silent for MissedHeartbeats intervals is presumed lost.
const (
	DefaultHeartbeatInterval = time.Second
	MissedHeartbeats         = 3
)

// CancelledByUser is the reason recorded for a cancel a person asked for
// (API, CLI, dashboard), whichever process takes it.
const CancelledByUser = "cancelled by a user"
