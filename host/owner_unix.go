//go:build unix

package host

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe reports whether the worker's user owns the file fi describes.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
