package record

import (
	"errors"
	"io/fs"
	"os"
)

// renameLinkOrCheck is RenameNoReplace without renameat2: a hard link and
// unlink (atomic: link fails on an existing name), else a check before the
// rename.
func renameLinkOrCheck(oldpath, newpath string) error {
	if err := os.Link(oldpath, newpath); err == nil {
		return os.Remove(oldpath)
	} else if errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, err := os.Lstat(newpath); err == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	}
	return os.Rename(oldpath, newpath)
}
