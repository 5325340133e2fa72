package mock

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Ready is the machine-readable signal that a mock serves: `tracekit mock
// --ready-file PATH` writes it as JSON once its listener accepts
// connections, so a parent process need not scrape its output.
type Ready struct {
	URL  string `json:"url"`  // "http://127.0.0.1:PORT"
	Addr string `json:"addr"` // "127.0.0.1:PORT"
	PID  int    `json:"pid"`  // the serving process
}

// Ready describes this server, served by this process.
func (s *Server) Ready() Ready {
	return Ready{URL: s.url, Addr: s.addr, PID: os.Getpid()}
}

// WriteReadyFile writes r to path atomically: into a temporary file in
// path's directory, then renamed over path, so a reader finds no file or
// the whole document.
func WriteReadyFile(path string, r Ready) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the ready file: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing the ready file %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the ready file %s: %w", path, werr)
	}
	return nil
}

// ReadReadyFile reads a file WriteReadyFile wrote. Until it exists the
// error satisfies errors.Is(err, fs.ErrNotExist).
func ReadReadyFile(path string) (Ready, error) {
	var r Ready
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("reading the mock's ready file: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: expected the mock's ready JSON {\"url\",\"addr\",\"pid\"}: %w", path, err)
	}
	if r.URL == "" || r.Addr == "" || r.PID <= 0 {
		return r, fmt.Errorf("%s: the mock's ready JSON lacks url, addr or pid: %s", path, b)
	}
	return r, nil
}
