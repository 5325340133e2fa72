package mock

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	for in, want := range map[string]Fault{
		"status=429":       {Kind: FaultStatus, Status: 429},
		"reset":            {Kind: FaultReset},
		"disconnect=3":     {Kind: FaultDisconnect, After: 3},
		"stall=2s":         {Kind: FaultStall, After: 1, For: 2 * time.Second},
		"stall=150ms@4":    {Kind: FaultStall, After: 4, For: 150 * time.Millisecond},
		"malformed":        {Kind: FaultMalformed, After: 1},
		"malformed@0":      {Kind: FaultMalformed, After: 0},
		"nodone":           {Kind: FaultNoDone},
		"slowheaders=1.5s": {Kind: FaultSlowHeaders, For: 1500 * time.Millisecond},
	} {
		got, err := ParseFault(in)
		if err != nil || got != want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseFault(got.String()); err != nil || again != got {
			t.Errorf("round trip of %q via %q: %+v, %v", in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"", "status=404", "status", "reset=1", "disconnect", "disconnect=x", "stall", "stall=x", "stall=1s@-1", "malformed=3", "slowheaders=1s@2", "boom"} {
		if _, err := ParseFault(bad); err == nil || !strings.Contains(err.Error(), FaultHeader) {
			t.Errorf("ParseFault(%q) error %v, want one naming the header", bad, err)
		}
	}
}

func faultRequest(t *testing.T, srv *Server, fault, id string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/chat/completions", strings.NewReader(
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":6,"ignore_eos":true,"stream":true}`))
	req.Header.Set(FaultHeader, fault)
	req.Header.Set("X-Request-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if fault == "reset" {
			return nil
		}
		t.Fatalf("%s: %v", fault, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestForcedFaults(t *testing.T) {
	srv := startMock(t, nil)

	t.Run("status", func(t *testing.T) {
		for _, code := range []string{"429", "500", "503"} {
			resp := faultRequest(t, srv, "status="+code, "st-"+code)
			var body struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.Status[:3] != code || body.Error.Code != resp.StatusCode {
				t.Fatalf("status=%s: got %s, body %+v, %v", code, resp.Status, body, err)
			}
			if e := entryByID(t, srv, "st-"+code); e.Outcome != OutcomeFault || e.Fault != "status="+code || len(e.EventMonoNs) != 0 {
				t.Fatalf("entry %+v", e)
			}
		}
	})
	t.Run("reset", func(t *testing.T) {
		if resp := faultRequest(t, srv, "reset", "rst"); resp != nil {
			t.Fatalf("reset fault answered with %s", resp.Status)
		}
		if e := entryByID(t, srv, "rst"); e.Status != 0 || e.HeadersMonoNs != 0 || e.Fault != "reset" {
			t.Fatalf("entry %+v", e)
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		resp := faultRequest(t, srv, "disconnect=3", "dis")
		events, done, err := sse(resp)
		if !errors.Is(err, io.ErrUnexpectedEOF) || done || len(events) != 3 {
			t.Fatalf("got %d events, done %v, err %v; want 3 events then unexpected EOF", len(events), done, err)
		}
		if e := entryByID(t, srv, "dis"); len(e.EventMonoNs) != 3 || e.Outcome != OutcomeFault {
			t.Fatalf("entry events %d outcome %s", len(e.EventMonoNs), e.Outcome)
		}
	})
	t.Run("stall", func(t *testing.T) {
		resp := faultRequest(t, srv, "stall=300ms@2", "stl")
		if _, done, err := sse(resp); err != nil || !done {
			t.Fatalf("stalled stream did not complete: %v", err)
		}
		e := entryByID(t, srv, "stl")
		gap := time.Duration(e.EventMonoNs[2] - e.EventMonoNs[1])
		if gap < 300*time.Millisecond {
			t.Fatalf("gap before event 2 is %v, want >= 300ms (events %v)", gap, e.EventMonoNs)
		}
		if e.Outcome != OutcomeOK || e.Fault != "stall=300ms@2" {
			t.Fatalf("entry outcome %s fault %s", e.Outcome, e.Fault)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		resp := faultRequest(t, srv, "malformed@2", "mal")
		events, done, err := sse(resp)
		if err != nil || !done || len(events) != 8 {
			t.Fatalf("%d events, done %v, err %v; want 7 good + 1 bad", len(events), done, err)
		}
		var bad []int
		for i, ev := range events {
			if !json.Valid([]byte(ev)) {
				bad = append(bad, i)
			}
		}
		if len(bad) != 1 || bad[0] != 2 {
			t.Fatalf("invalid events at %v, want [2]", bad)
		}
		if e := entryByID(t, srv, "mal"); len(e.EventMonoNs) != 7 || e.Outcome != OutcomeFault {
			t.Fatalf("entry events %d outcome %s", len(e.EventMonoNs), e.Outcome)
		}
	})
	t.Run("nodone", func(t *testing.T) {
		resp := faultRequest(t, srv, "nodone", "nd")
		events, done, err := sse(resp)
		if err != nil || done || len(events) != 7 {
			t.Fatalf("%d events, done %v, err %v; want 7 events, clean end, no [DONE]", len(events), done, err)
		}
	})
	t.Run("slowheaders", func(t *testing.T) {
		start := time.Now()
		resp := faultRequest(t, srv, "slowheaders=300ms", "slow")
		if d := time.Since(start); d < 300*time.Millisecond || resp.StatusCode != 200 {
			t.Fatalf("headers after %v with status %d, want >= 300ms", d, resp.StatusCode)
		}
		sse(resp)
		if e := entryByID(t, srv, "slow"); time.Duration(e.HeadersMonoNs-e.ArrivalMonoNs) < 300*time.Millisecond {
			t.Fatalf("log headers after %v", time.Duration(e.HeadersMonoNs-e.ArrivalMonoNs))
		}
	})
}

func TestDrawnFaults(t *testing.T) {
	srv := startMock(t, func(c *Config) { c.Faults.Status503 = 1 })
	for range 3 {
		resp := post(t, srv, "/v1/chat/completions", chatBody(2, true, "user", "x"), nil)
		if resp.StatusCode != 503 {
			t.Fatalf("status %d with status_503 probability 1", resp.StatusCode)
		}
	}
	srv = startMock(t, func(c *Config) { c.Faults.Disconnect, c.Faults.NoDone = 0.5, 0.5 })
	kinds := map[string]int{}
	for range 20 {
		resp := post(t, srv, "/v1/chat/completions", chatBody(4, true, "user", "x"), nil)
		sse(resp)
	}
	for _, e := range srv.Log() {
		kinds[strings.SplitN(e.Fault, "=", 2)[0]]++
	}
	if kinds["disconnect"] == 0 || kinds["nodone"] == 0 || kinds["disconnect"]+kinds["nodone"] != 20 {
		t.Fatalf("drawn faults %v over 20 requests", kinds)
	}
}
