package ledger

// Event returns the name and data of an application's event (an entry of
// kind AppEvent, recorded with vault.Vault.Record); ok is false for every
// other kind. data is the entry's own slice.
func (e Entry) Event() (name string, data []byte, ok bool) {
	if e.Kind != AppEvent {
		return "", nil, false
	}
	return e.Reason, e.CipherHash, true
}
