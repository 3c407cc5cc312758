package pins

import "github.com/noydb-go/noydb/crypto"

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

// OpenAsAnotherProcess opens the pins as a second process would: with a
// memory and files of its own, outside the process registry.
func OpenAsAnotherProcess(dir, vaultName string, id []byte, key *crypto.Key) (*Set, error) {
	c, err := load(dir, vaultName, id, key)
	if err != nil {
		return nil, err
	}
	c.refs = 1
	return &Set{c: c}, nil
}

// SetCurrentUID makes the state folder's owner check compare with uid
// (the tests cannot give a folder another owner without root); it
// returns the function that puts the real one back.
func SetCurrentUID(uid int) (restore func()) {
	was := currentUID
	currentUID = func() int { return uid }
	return func() { currentUID = was }
}
