//go:build linux

package record

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// RenameNoReplace renames oldpath to newpath unless newpath exists: then it
// fails with an error wrapping fs.ErrExist and leaves both files alone. It
// is atomic (renameat2 RENAME_NOREPLACE) where the file system supports
// it, else a hard link and unlink, else a check before the rename.
func RenameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP):
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return renameLinkOrCheck(oldpath, newpath)
}
