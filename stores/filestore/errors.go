package filestore

import "github.com/noydb-go/noydb/internal/errs"

// ErrCorrupt: a record file is truncated, has a bad checksum, or holds
// another key than its name says. The error names the file. It is the one
// corrupt-data error (numbering.ErrCorrupt, sequence.ErrCorrupt are the
// same value).
var ErrCorrupt = errs.ErrCorrupt
