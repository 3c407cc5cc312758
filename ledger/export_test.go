package ledger

// Waiting returns how many calls wait in l's queue for the commit in flight.
func Waiting(l *Ledger) int { return l.q.Waiting() }
