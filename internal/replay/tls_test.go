package replay

import (
	"github.com/tracekit/tracekit/internal/mock/mocktest"

	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// An https:// target: the mock behind a TLS reverse proxy with a
// self-signed certificate. With --insecure the run records every event;
// without it the run fails before its clock starts, naming the certificate
// problem.
func TestHTTPSTarget(t *testing.T) {
	srv := mocktest.Start(t, nil)
	up, _ := url.Parse(srv.URL())
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.FlushInterval = -1 // forward each event as it comes
	// Go's HTTP/1 server consumes and closes a request body once the
	// handler starts its response. The mock answers as soon as it has the
	// body's bytes, and the proxy's transport may not yet have read the
	// body's end: its next Read then fails, and the transport drops the
	// upstream connection, cutting the stream it is relaying (a failure of
	// this proxy, not of replay). Full duplex keeps the body open.
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("the test proxy: %v", err)
		}
		proxy.ServeHTTP(w, r)
	}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below are expected
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	path := writeTrace(t, conv("a", 2, 0, 5*time.Millisecond, 6), conv("b", 2, 10*time.Millisecond, 5*time.Millisecond, 6))

	cfg := Config{Trace: path, Targets: []string{tlsSrv.URL}, Model: "tracekit-mock", ContinuousUsage: "on", IgnoreEOS: true, Insecure: true}
	sink, res := run(t, cfg)
	if res.Errors != 0 || len(sink.Records()) != 4 {
		for _, r := range sink.Records() {
			t.Logf("%s: %d events, error %q %s", r.RequestID, len(r.EventNs), r.ErrorKind, r.ErrorMessage)
		}
		t.Fatalf("insecure: %d errors, %d records", res.Errors, len(sink.Records()))
	}
	for _, r := range sink.Records() {
		if r.ErrorKind != "" || r.CompletionTokens != 6 || len(r.EventNs) != 7 || !strings.HasPrefix(r.Target, "https://") {
			t.Errorf("%s: %+v", r.RequestID, r)
		}
	}
	if sink.RunMeta().Config["insecure"] != true {
		t.Errorf("config does not record insecure: %v", sink.RunMeta().Config["insecure"])
	}

	// Without --insecure the probe request fails before the clock starts,
	// naming the certificate problem, and nothing is recorded.
	cfg.Insecure = false
	r, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sink = &memSink{}
	res, err = r.Run(t.Context(), sink)
	if err == nil || !strings.Contains(err.Error(), "certificate") || res != nil || len(sink.Records()) != 0 {
		t.Errorf("without --insecure: err %v, result %+v, %d records; want a certificate error before the run", err, res, len(sink.Records()))
	}
}
