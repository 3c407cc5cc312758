package filestore

import "errors"

// ErrCorrupt: a record file is truncated, has a bad checksum, or holds
// another key than its name says. The error names the file.
var ErrCorrupt = errors.New("corrupt record file")
