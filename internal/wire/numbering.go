package wire

// NewNumbering is set by package numbering to its constructor, of type
//
//	func(b deferred.Backend, series string, opts numbering.Options) (*numbering.Series, deferred.Hooks, error)
//
// which returns a handle on the deferred-numbering series of the vault that
// b describes, and the calls only the vault makes on it. It does no I/O.
var NewNumbering any
