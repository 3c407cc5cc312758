package numbering

// Tune sets how many numbers a pass of s finishes between two saves of its
// progress, and how many record ids one batch chunk holds, so tests reach
// many progress and chunk boundaries with few records.
func Tune(s *Series, step, chunkItems int) {
	s.stepSize, s.chunkItems = step, chunkItems
}

// OnLocked makes every pass of s call f right after it takes the lock, so
// tests can hold a pass there without sleeping.
func OnLocked(s *Series, f func()) { s.afterLock = f }

// OnCleared makes every pass of s call f right after it clears a finished
// batch from the head, before the batch's chunks are gone for good.
func OnCleared(s *Series, f func()) { s.afterClear = f }
