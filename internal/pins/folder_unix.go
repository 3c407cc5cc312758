//go:build unix

package pins

import (
	"fmt"
	"io/fs"
	"syscall"
)

// oNoFollow makes an open fail on a symbolic link.
const oNoFollow = syscall.O_NOFOLLOW

// foreignOwner returns why fi, the state folder, is refused for its owner
// (another user than this process's), or "".
func foreignOwner(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	if uid := currentUID(); int(st.Uid) != uid {
		return fmt.Sprintf("is owned by user %d, not by this user (%d)", st.Uid, uid)
	}
	return ""
}
