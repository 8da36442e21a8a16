package actor

// PID is a serialisable actor address: the process address (e.g. a NATS
// subject prefix of the worker) and the actor id.
type PID struct {
	Address string `msgpack:"address" json:"address"`
	ID      string `msgpack:"id" json:"id"`
}

// String renders the PID as "address/id".
func (p PID) String() string { return p.Address + "/" + p.ID }

// IsZero reports the zero PID, which addresses nothing.
func (p PID) IsZero() bool { return p == PID{} }
