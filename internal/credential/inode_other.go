//go:build !unix

package credential

import "os"

// idOf identifies the file fi describes: its modification time and size.
func idOf(fi os.FileInfo) fileID {
	return fileID{mtime: fi.ModTime(), size: fi.Size()}
}
