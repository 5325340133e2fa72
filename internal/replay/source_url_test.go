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

	"github.com/tracekit/tracekit/trace"
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

// A trace that carries real media items brings its media file: from
// beside its URL (the path with .media added, the query kept), or from
// MediaURL; beside the copy, where replay looks for it. A media file that
// is missing, or lacks an item, fails naming the turn that carries it,
// with nothing left behind; NoMedia leaves it to the caller.
func TestFetchTraceBringsItsMedia(t *testing.T) {
	items := realItems(t, 2)
	local := writeRealTrace(t, 3, items)
	traceBody, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	mediaBody, err := os.ReadFile(trace.MediaPath(local))
	if err != nil {
		t.Fatal(err)
	}
	// A media file of the first item alone.
	partial := writeRealTrace(t, 1, items[:1])
	partialBody, err := os.ReadFile(trace.MediaPath(partial))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		var body []byte
		switch r.URL.Path {
		case "/t/trace.parquet", "/bare/trace.parquet":
			body = traceBody
		case "/t/trace.parquet.media", "/elsewhere/m":
			body = mediaBody
		case "/partial.media":
			body = partialBody
		default:
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "f", time.Time{}, strings.NewReader(string(body)))
	}))
	defer srv.Close()

	for _, c := range []struct {
		name, trace, media string
		wantPaths          []string
	}{
		{"beside", withCreds(srv.URL, "/t/trace.parquet"), "",
			[]string{"/t/trace.parquet?X-Amz-Signature=" + secretBits + "&token=" + secretBits, "/t/trace.parquet.media?X-Amz-Signature=" + secretBits + "&token=" + secretBits}},
		{"given", srv.URL + "/bare/trace.parquet", srv.URL + "/elsewhere/m", []string{"/bare/trace.parquet?", "/elsewhere/m?"}},
	} {
		paths = nil
		dir := t.TempDir()
		path, remove, err := FetchTrace(context.Background(), c.trace, FetchOptions{Dir: dir, MaxBytes: 1 << 24, MediaURL: c.media})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if strings.Join(paths, " ") != strings.Join(c.wantPaths, " ") {
			t.Errorf("%s: requested %q, want %q", c.name, paths, c.wantPaths)
		}
		s, err := trace.OpenMediaFile(trace.MediaPath(path))
		if err != nil {
			t.Fatalf("%s: no media file beside the copy: %v", c.name, err)
		}
		for _, it := range items {
			if _, ok := s.Has(it.m.Hash); !ok {
				t.Errorf("%s: the media file lacks %s", c.name, it.m.Hash)
			}
		}
		s.Close()
		remove()
		if names := dirEntries(t, dir); len(names) != 0 {
			t.Errorf("%s: left behind: %v", c.name, names)
		}
	}

	for _, c := range []struct{ name, media, want string }{
		{"missing", srv.URL + "/nowhere.media", "404 Not Found"},
		{"partial", srv.URL + "/partial.media", "it does not hold the item (sha256 " + items[1].m.Hash + ") of conversation \"r01\" turn 0 (row 1)"},
	} {
		dir := t.TempDir()
		_, _, err := FetchTrace(context.Background(), srv.URL+"/bare/trace.parquet", FetchOptions{Dir: dir, MaxBytes: 1 << 24, MediaURL: c.media})
		var fe *FetchError
		if !errors.As(err, &fe) || fe.What != "media file" || !fe.Input || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "media file "+c.media+": ") ||
			!strings.Contains(err.Error(), "conversation \"r00\" turn 0 (row 0) of the trace carries a real media item") {
			t.Errorf("%s: %v; want a media-file FetchError saying %q and naming the first turn with an item", c.name, err, c.want)
		}
		if names := dirEntries(t, dir); len(names) != 0 {
			t.Errorf("%s: left behind: %v", c.name, names)
		}
	}

	dir := t.TempDir()
	path, remove, err := FetchTrace(context.Background(), srv.URL+"/bare/trace.parquet", FetchOptions{Dir: dir, MaxBytes: 1 << 24, NoMedia: true})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if _, err := os.Stat(trace.MediaPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("NoMedia: a media file was downloaded (%v)", err)
	}
}
