package pgstore

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

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

// unreachable reports whether err says the server could not be reached or
// the connection to it broke, as opposed to an answer of the server: a
// failed connect, a network error, an end of stream, or a connection
// exception (SQLSTATE class 08) or shutdown (57P01..57P03) from the server.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return false
}
