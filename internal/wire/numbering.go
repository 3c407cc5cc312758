package wire

// NewNumbering is set by package numbering to its constructor, of type
//
//	func(b deferred.Backend, series string, opts numbering.Options) (*numbering.Series, deferred.Hooks, error)
//
// which returns a handle on the deferred-numbering series of the vault that
// b describes, and the calls only the vault makes on it. It does no I/O.
var NewNumbering any

// NumberingInfo is set by package numbering to a function of type
//
//	func(ctx context.Context, b deferred.Backend, series string) (collection, format string, last uint64, err error)
//
// which reads the collection, stored format and last number of a
// deferred-numbering series, for the vault's listing of its series; with
// b.Partition, of that period's series.
var NumberingInfo any

// NumberingPeriods is set by package numbering to a function of type
//
//	func(ctx context.Context, b deferred.Backend, series string) ([]string, error)
//
// which lists the labels of the periods of a deferred-numbering series
// that had records handed off (a series numbered by the record's date),
// for the vault's listing of its series.
var NumberingPeriods any

// NumberingGiven is set by package numbering to a function of type
//
//	func(b deferred.Backend, series string, get func(key string) (stores.Item, error)) (last uint64, err error)
//
// which reads, with get, the last number the passes of the
// deferred-numbering series have given (0 when none): the counter of the
// same name is raised to it at its first use (one head per series, see
// SequenceConfig.PassHead).
var NumberingGiven any
