package journal

import "errors"

// ErrLimit reports a journal write the journal refused for good: the
// thread's journal holds the most messages one thread may journal, or an
// entry was larger than a journal message may be. Nothing past the limit
// is stored and nothing before it is dropped, so a thread whose write is
// refused cannot keep what it does next: its runner fails it, naming the
// limit (the store wraps this error with which one).
var ErrLimit = errors.New("journal limit reached")
