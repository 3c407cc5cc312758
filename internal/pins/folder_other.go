//go:build !unix

package pins

import "io/fs"

// oNoFollow is 0 where the system has no such flag: a link at a file's
// path is found by Lstat (isSymlinkErr) only when opening fails.
const oNoFollow = 0

// foreignOwner returns "": this system's owners are not checked.
func foreignOwner(fs.FileInfo) string { return "" }
