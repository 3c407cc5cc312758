package pins

// SetWriteHook makes every later write run hook first (nil removes it).
func SetWriteHook(hook func() error) { testHookWrite = hook }

// Writes returns how many writes the Set's memory has done.
func (s *Set) Writes() uint64 {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.writes
}

// Waiting returns how many raisers wait for a write in flight.
func (s *Set) Waiting() int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.waiting
}
