package runner

import (
	"io/fs"
	"path/filepath"
	"time"
)

func filepathWalk(root string, visit func(path string, mod time.Time)) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		visit(path, info.ModTime())
		return nil
	})
}
