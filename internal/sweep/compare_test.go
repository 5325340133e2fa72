package sweep

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// A figure one sweep lacks (no knee, no answer) prints "-" on the page as
// in the text, never a 0 that reads as a measured value.
func TestCompareHTMLShowsMissingAsDash(t *testing.T) {
	a, b := goldenSweep(t, 2.2), goldenSweep(t, 3.1)
	b.Knee, b.Answer = nil, nil
	var txt, page bytes.Buffer
	if err := WriteCompare(&txt, a, b, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareHTML(&page, a, b, "a", "b", "", ""); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`<tr><td class="l">knee throughput \(req/s\)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td></tr>`).FindStringSubmatch(page.String())
	if row == nil {
		t.Fatalf("no knee row in the page:\n%s", page.String())
	}
	if row[1] == "-" || row[2] != "-" || row[3] != "n/a" {
		t.Errorf("knee row cells = %q, want A's value, -, n/a", row[1:])
	}
	for _, line := range strings.Split(txt.String(), "\n") {
		if strings.HasPrefix(line, "knee throughput") {
			if f := strings.Fields(line); f[len(f)-2] != "-" || f[len(f)-3] != row[1] {
				t.Errorf("text row %q disagrees with the page's %q", line, row[1:])
			}
		}
	}
}
