package capture

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A hostile upstream echoes the credentials capture forwarded (the
// client's Authorization and x-api-key) in a 401 body and in a streamed
// error event: the recording (its bytes, its columns read back), the trace
// and the log must hold neither.
func TestProxyScrubsEchoedCredentials(t *testing.T) {
	const apiKey = "xk-capture-SECRET-0123456789"
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		echo := fmt.Sprintf("Incorrect API key provided: %s (x-api-key %s)", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
		if n.Add(1)%2 == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":%q}}`, echo)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		fmt.Fprintf(w, "data: {\"error\":{\"message\":%q}}\n\n", "stream aborted: "+echo)
	}))
	defer up.Close()
	var logMu sync.Mutex
	var logs strings.Builder
	ps, dir := startProxy(t, up.URL, func(c *ProxyConfig) {
		c.Logf = func(format string, args ...any) {
			logMu.Lock()
			fmt.Fprintf(&logs, format+"\n", args...)
			logMu.Unlock()
		}
	})
	for i := range 4 {
		post(t, ps.URL(), "/v1/chat/completions", chatBody([]msg{{"user", fmt.Sprintf("q%d", i)}}, true), map[string]string{"X-Api-Key": apiKey})
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	noSecretIn(t, dir) // the raw bytes of every file
	recs, _ := filepath.Glob(filepath.Join(dir, "*.recording.parquet"))
	if len(recs) != 1 {
		t.Fatalf("recordings %v", recs)
	}
	got, _ := readRecordsT(t, recs[0])
	var sawHTTP, sawStream bool
	for _, r := range got {
		sawHTTP = sawHTTP || strings.Contains(r.ErrorMessage, "HTTP 401")
		sawStream = sawStream || strings.Contains(r.ErrorMessage, "stream aborted")
		for _, s := range []string{secret, apiKey} {
			if strings.Contains(r.ErrorMessage, s) {
				t.Errorf("%s: error_message holds a forwarded credential: %q", r.RequestID, r.ErrorMessage)
			}
		}
	}
	if len(got) != 4 || !sawHTTP || !sawStream {
		t.Fatalf("the upstream's refusals are not recorded as errors: %+v", got)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("the log holds a forwarded credential:\n%s", logs.String())
	}
}
