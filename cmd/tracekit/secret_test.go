package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// hostileKeyServer is an OpenAI-compatible server that echoes the
// credentials it was sent: every other request is refused with a 401
// whose message quotes the Authorization and x-api-key headers, the rest
// stream one token and then an error event quoting them again.
func hostileKeyServer(t *testing.T) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		echo := fmt.Sprintf("Incorrect API key provided: %s (x-api-key %s)", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
		if n.Add(1)%2 == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, echo)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "data: {\"error\":{\"message\":%q}}\n\n", "stream aborted: "+echo)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A server that echoes the API key and a credential header back must not
// get them into anything tracekit writes or prints: the replay's output,
// the recording (its bytes, and its columns read back decompressed), the
// HTML and JSON reports.
func TestReplayScrubsEchoedSecrets(t *testing.T) {
	const key, hdr = "sk-hostile-0123456789abcdef", "xk-hostile-fedcba9876543210"
	t.Setenv("TK_HOSTILE_KEY", key)
	srv := hostileKeyServer(t)
	path := processTrace(t, "s", 4, 1, time.Millisecond, 0, 3)
	dir := t.TempDir()
	out := filepath.Join(dir, "rec.parquet")
	stdout, stderr, code := runCLI(t, "replay", path, "--target", srv.URL, "-o", out, "--no-probe", "--model", "m",
		"--api-key-env", "TK_HOSTILE_KEY", "--header", "X-Api-Key: "+hdr, "--progress", "none")
	if code != ExitFailed { // every request failed
		t.Fatalf("replay: exit %d\n%s%s", code, stdout, stderr)
	}
	htmlPath, jsonPath := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.json")
	aout, aerr, acode := runCLI(t, "analyze", out, "--html", htmlPath, "--json", jsonPath)
	if acode != ExitOK {
		t.Fatalf("analyze: exit %d: %s", acode, aerr)
	}
	recs, meta, err := trace.ReadRecords(out)
	if err != nil || len(recs) != 4 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	var sawHTTP, sawStream bool
	for _, r := range recs {
		sawHTTP = sawHTTP || strings.Contains(r.ErrorMessage, "HTTP 401")
		sawStream = sawStream || strings.Contains(r.ErrorMessage, "stream aborted")
	}
	if !sawHTTP || !sawStream {
		t.Fatalf("the hostile answers are not recorded as errors: %+v", recs)
	}
	// With the probe on, the refusal comes before the run: its message is
	// the error on stderr.
	_, probeErr, probeCode := runCLI(t, "replay", path, "--target", srv.URL, "-o", filepath.Join(dir, "probe.parquet"),
		"--model", "m", "--api-key-env", "TK_HOSTILE_KEY", "--header", "X-Api-Key: "+hdr, "--progress", "none")
	if probeCode != ExitFailed || !strings.Contains(probeErr, "401") {
		t.Fatalf("replay refused by its probe: exit %d, stderr %q", probeCode, probeErr)
	}
	raw, _ := os.ReadFile(out)
	html, _ := os.ReadFile(htmlPath)
	jsonRep, _ := os.ReadFile(jsonPath)
	for what, s := range map[string]string{
		"replay stdout": stdout, "replay stderr": stderr, "probe refusal": probeErr, "analyze output": aout + aerr,
		"recording bytes": string(raw), "records read back": fmt.Sprintf("%+v", recs), "run metadata": fmt.Sprintf("%+v", meta),
		"HTML report": string(html), "JSON report": string(jsonRep),
	} {
		for _, secret := range []string{key, hdr} {
			secret = secret[:16] // a truncated message must not show part of it either
			if strings.Contains(s, secret) {
				i := strings.Index(s, secret)
				t.Errorf("%s holds %s: ...%s...", what, secret, s[max(0, i-80):min(len(s), i+len(secret)+20)])
			}
		}
	}
	if !bytes.Contains(html, []byte("401")) {
		t.Error("the HTML report does not show the refusals at all")
	}
}

// A target given with user:password (a server behind basic auth) is
// recorded without them: neither the records' target nor the run's
// metadata nor the recording's bytes hold the password.
func TestReplayKeepsTargetCredentialsOut(t *testing.T) {
	const pw = "pw-0123456789abcdef"
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		auth.Store(r.Header.Get("Authorization"))
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"m"}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	target := strings.Replace(srv.URL, "http://", "http://user:"+pw+"@", 1)
	path := processTrace(t, "s", 2, 1, time.Millisecond, 0, 3)
	out := filepath.Join(t.TempDir(), "rec.parquet")
	stdout, stderr, code := runCLI(t, "replay", path, "--target", target, "-o", out, "--no-probe", "--model", "m", "--progress", "none", "--no-analyze")
	if code != ExitOK {
		t.Fatalf("replay: exit %d\n%s%s", code, stdout, stderr)
	}
	recs, meta, err := trace.ReadRecords(out)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	raw, _ := os.ReadFile(out)
	for what, s := range map[string]string{"stdout": stdout, "stderr": stderr, "recording bytes": string(raw),
		"records": fmt.Sprintf("%+v", recs), "run metadata": fmt.Sprintf("%+v", meta)} {
		if strings.Contains(s, pw) {
			t.Errorf("%s holds the target's password", what)
		}
	}
	if len(meta.Targets) != 1 || !strings.Contains(meta.Targets[0], strings.TrimPrefix(srv.URL, "http://")) || recs[0].Target != meta.Targets[0] {
		t.Errorf("targets recorded as %q and %q; want the server's address without its password, the same in both", meta.Targets, recs[0].Target)
	}
}
