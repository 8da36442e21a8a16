package actor

// MailboxLen lets tests wait until a message is queued.
func MailboxLen(e *Engine, pid PID) int {
	a, err := e.lookup(pid)
	if err != nil {
		return -1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.q.Len()
}
