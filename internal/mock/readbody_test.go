package mock

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// readBody returns every byte whatever its size hint says (a client's
// Content-Length may be wrong until the server checks it), and passes a
// read error on.
func TestReadBody(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB
	for _, hint := range []int64{0, -1, 1, 999_999, 1_000_000, 1_000_001, 4 << 20} {
		got, err := readBody(iotest.HalfReader(bytes.NewReader(data)), hint)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("hint %d: %d bytes, %v; want all %d", hint, len(got), err, len(data))
		}
	}
	if got, err := readBody(bytes.NewReader(nil), 100); err != nil || len(got) != 0 {
		t.Errorf("empty body: %d bytes, %v", len(got), err)
	}
	boom := errors.New("boom")
	if _, err := readBody(io.MultiReader(bytes.NewReader(data[:10]), iotest.ErrReader(boom)), 0); !errors.Is(err, boom) {
		t.Errorf("a failing read: %v, want %v", err, boom)
	}
}
