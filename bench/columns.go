package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// columnBytes returns the compressed bytes of a Parquet file's columns
// whose path starts with prefix, and of all its columns: how much of a
// recording the event stamps themselves take.
func columnBytes(path, prefix string) (match, all int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			n := c.MetaData.TotalCompressedSize
			all += n
			if strings.HasPrefix(strings.Join(c.MetaData.PathInSchema, "."), prefix) {
				match += n
			}
		}
	}
	return match, all, nil
}
