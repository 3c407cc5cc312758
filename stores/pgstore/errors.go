package pgstore

import "errors"

// Errors returned by Open. Errors of the store's methods are the shared
// sentinels of package stores (stores.ErrNotFound, stores.ErrConflict, …).
var (
	// ErrInvalidSchema: Options.Schema is not a valid schema name.
	ErrInvalidSchema = errors.New("invalid schema name: want 1 to 63 lower-case letters, digits or underscores, not starting with a digit")
	// ErrInvalidConnString: the connection string cannot be parsed. The
	// parser's details are withheld because they may quote the password.
	ErrInvalidConnString = errors.New("invalid connection string")
	// ErrSchemaTooNew: the database holds a schema written by a newer
	// version of pgstore than this one.
	ErrSchemaTooNew = errors.New("the database schema is newer than this version of pgstore")
)
