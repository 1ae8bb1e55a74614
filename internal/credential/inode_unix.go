//go:build unix

package credential

import (
	"os"
	"syscall"
)

// idOf identifies the file fi describes: its modification time, size and
// inode (a file replaced by a rename has a new one).
func idOf(fi os.FileInfo) fileID {
	id := fileID{mtime: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.inode = uint64(st.Ino)
	}
	return id
}
