package replay

import (
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tracekit/tracekit/trace"
)

// An https:// target: the mock behind a TLS reverse proxy with a
// self-signed certificate. With --insecure the run records every event;
// without it every request fails as a connect error that names the
// certificate problem, and the run still ends with a record per request.
func TestHTTPSTarget(t *testing.T) {
	srv := fastMock(t, nil)
	up, _ := url.Parse(srv.URL())
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.FlushInterval = -1 // forward each event as it comes
	tlsSrv := httptest.NewUnstartedServer(proxy)
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below are expected
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	path := writeTrace(t, conv("a", 2, 0, 5*time.Millisecond, 6), conv("b", 2, 10*time.Millisecond, 5*time.Millisecond, 6))

	cfg := Config{Trace: path, Targets: []string{tlsSrv.URL}, Model: "tracekit-mock", ContinuousUsage: "on", IgnoreEOS: true, Insecure: true}
	sink, res := run(t, cfg)
	if res.Errors != 0 || len(sink.Records()) != 4 {
		t.Fatalf("insecure: %+v, %d records", res, len(sink.Records()))
	}
	for _, r := range sink.Records() {
		if r.ErrorKind != "" || r.CompletionTokens != 6 || len(r.EventNs) != 7 || !strings.HasPrefix(r.Target, "https://") {
			t.Errorf("%s: %+v", r.RequestID, r)
		}
	}
	if sink.RunMeta().Config["insecure"] != true {
		t.Errorf("config does not record insecure: %v", sink.RunMeta().Config["insecure"])
	}

	cfg.Insecure = false
	sink, _ = run(t, cfg)
	if len(sink.Records()) == 0 {
		t.Fatal("no record of the refused requests")
	}
	for _, r := range sink.Records() {
		if r.ErrorKind != trace.ErrConnect || !strings.Contains(r.ErrorMessage, "certificate") {
			t.Errorf("%s without --insecure: %s %q", r.RequestID, r.ErrorKind, r.ErrorMessage)
		}
	}
}
