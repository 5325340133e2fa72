package sweep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A broken sweep.json is refused with the file and the line and column of
// the fault, for a syntax error and for a field of the wrong type (just past its value, as synth reports).
func TestReadSummaryNamesThePosition(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"{\n  \"plan\": {\"axis\": \"speed\"},\n  oops\n}", "line 3, column 3: not a sweep summary"},
		{"{\n  \"steps\": [{\"step\": \"one\"}]\n}", "line 2, column 27: not a sweep summary"},
	} {
		path := filepath.Join(t.TempDir(), SummaryJSON)
		if err := os.WriteFile(path, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadSummary(path)
		if err == nil || !strings.Contains(err.Error(), path+": "+c.want) {
			t.Errorf("ReadSummary(%q): %v, want %q", c.body, err, c.want)
		}
	}
}
