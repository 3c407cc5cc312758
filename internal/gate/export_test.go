package gate

// Drained reports whether g has let Close return: it is closing and no
// admitted call is in flight. It reads the state Close waits on, so a test
// can tell, without waiting, that Close is still held.
func Drained(g *Gate) bool {
	select {
	case <-g.ch():
		return true
	default:
		return false
	}
}
