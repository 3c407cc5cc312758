package sequence

// Queued reports how many calls wait for the write in flight on q's counter,
// so tests can order events without sleeping.
func Queued(q *Sequence) int {
	return q.c.q.Waiting()
}
