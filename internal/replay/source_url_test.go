package replay

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

const secretBits = "s3cr3t"

// serveFile serves body at any path, recording the requests' probe header
// and basic-auth user; chunked (no Content-Length) when chunked is set.
func serveFile(t *testing.T, body []byte, chunked bool) (*httptest.Server, *[]string) {
	t.Helper()
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _, _ := r.BasicAuth()
		seen = append(seen, r.Header.Get(ProbeHeader)+" "+user)
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		if chunked {
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			w.Write(body[len(body)/2:])
			return
		}
		http.ServeContent(w, r, "trace.parquet", time.Time{}, strings.NewReader(string(body)))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// withCreds puts a user, a password and a token query into a server URL.
func withCreds(base, path string) string {
	return strings.Replace(base, "http://", "http://user:"+secretBits+"@", 1) + path + "?X-Amz-Signature=" + secretBits + "&token=" + secretBits
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A real trace served over HTTP is downloaded into the directory, verified,
// and removed by the returned function; the credentials go to the server
// (basic auth) but not into anything shown.
func TestFetchTrace(t *testing.T) {
	body, err := os.ReadFile(writeTrace(t, conv("a", 2, 0, 0, 3)))
	if err != nil {
		t.Fatal(err)
	}
	for _, chunked := range []bool{false, true} {
		srv, seen := serveFile(t, body, chunked)
		dir := t.TempDir()
		path, remove, err := FetchTrace(context.Background(), withCreds(srv.URL, "/t/trace.parquet"), FetchOptions{Dir: dir, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != string(body) || !strings.HasPrefix(path, dir+"/.tracekit-trace-") {
			t.Fatalf("downloaded %d of %d bytes to %s", len(got), len(body), path)
		}
		if len(*seen) != 1 || (*seen)[0] != "1 user" {
			t.Errorf("requests seen (probe header, user): %q", *seen)
		}
		remove()
		remove()
		if names := dirEntries(t, dir); len(names) != 0 {
			t.Errorf("left behind: %v", names)
		}
	}
}

// Garbage, a 404, a body above the limit (announced or not) and a server
// that goes silent all fail with the URL redacted and nothing left behind.
func TestFetchTraceFailures(t *testing.T) {
	garbage := []byte(strings.Repeat("<html>not a trace</html>\n", 100))
	big := make([]byte, 5000)
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("PAR1"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // silent until the client gives up
	}))
	defer stall.Close()
	gsrv, _ := serveFile(t, garbage, false)
	bsrv, _ := serveFile(t, big, false)
	csrv, _ := serveFile(t, big, true)
	for _, c := range []struct {
		name, url string
		input     bool
		want      string
	}{
		{"garbage", withCreds(gsrv.URL, "/trace.parquet"), true, "are not a tracekit trace: the download is not a readable Parquet file"},
		{"404", withCreds(gsrv.URL, "/missing"), true, "404 Not Found"},
		{"announced too big", withCreds(bsrv.URL, "/t"), true, "5000 bytes, above the limit of 4096"},
		{"chunked too big", withCreds(csrv.URL, "/t"), true, "more than the limit of 4096 bytes"},
		{"silent", withCreds(stall.URL, "/t"), false, "no data for 200ms"},
	} {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
		_, _, err := FetchTrace(ctx, c.url, FetchOptions{Dir: dir, MaxBytes: 4096, IdleTimeout: 200 * time.Millisecond})
		cancel()
		var fe *FetchError
		if !errors.As(err, &fe) || fe.Input != c.input || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a FetchError (input %v) saying %q", c.name, err, c.input, c.want)
			continue
		}
		if strings.Contains(err.Error(), secretBits) || !strings.Contains(err.Error(), "http://REDACTED@127.0.0.1:") ||
			!strings.Contains(err.Error(), "X-Amz-Signature=REDACTED") {
			t.Errorf("%s: the message shows a credential or not the redacted URL: %v", c.name, err)
		}
		if names := dirEntries(t, dir); len(names) != 0 {
			t.Errorf("%s: left behind: %v", c.name, names)
		}
	}
}

func TestRedactURLAndCommand(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@h.example/a/t.parquet?sig=abc&b=1#frag": "https://REDACTED@h.example/a/t.parquet?b=REDACTED&sig=REDACTED",
		"http://h:8000/t.parquet":                            "http://h:8000/t.parquet",
		"::nonsense":                                         "<unparseable URL>",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	cmd := RedactCommand([]string{"tracekit", "replay", "https://x:" + secretBits + "@h/t?tok=" + secretBits,
		"--target=http://h:8000", "--header", "Authorization: Bearer " + secretBits, "--trace-url=https://h/t?sig=" + secretBits})
	if strings.Contains(cmd, secretBits) || !strings.Contains(cmd, "--target=http://h:8000") ||
		!strings.Contains(cmd, "https://REDACTED@h/t?tok=REDACTED") || !strings.Contains(cmd, "--trace-url=https://h/t?sig=REDACTED") {
		t.Errorf("command %q", cmd)
	}
}
