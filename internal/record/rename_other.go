//go:build !linux

package record

// RenameNoReplace renames oldpath to newpath unless newpath exists: then it
// fails with an error wrapping fs.ErrExist and leaves both files alone. It
// is a hard link and unlink where the file system allows, else a check
// before the rename (renameat2 RENAME_NOREPLACE is Linux's).
func RenameNoReplace(oldpath, newpath string) error {
	return renameLinkOrCheck(oldpath, newpath)
}
