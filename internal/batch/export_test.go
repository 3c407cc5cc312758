package batch

// QueueLen returns how many calls wait in q's queue.
func QueueLen[T Member[T]](q *Queue[T]) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
