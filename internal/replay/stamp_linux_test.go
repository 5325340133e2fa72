//go:build linux

package replay

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tracekit/tracekit/internal/clock"
	"github.com/tracekit/tracekit/internal/mock"
	"github.com/tracekit/tracekit/internal/mock/mocktest"
	"github.com/tracekit/tracekit/internal/record"
	"github.com/tracekit/tracekit/trace"
)

// TestStampModesAgainstTheMock replays against the mock in each mode:
// the recording names the mode used and its counters, every event of
// every stream is stamped in order after the headers, which follow the
// send, and each stamp is no earlier than the mock's log of the write
// before the event's (the event's own write began after it) minus the
// clock conversion's width.
func TestStampModesAgainstTheMock(t *testing.T) {
	for _, mode := range []string{StampGoroutine, StampKernel, StampKernelOffset} {
		t.Run(mode, func(t *testing.T) {
			srv := mocktest.Start(t, func(c *mock.Config) { c.Latency.DecodeBase = mock.Duration(3 * time.Millisecond) })
			sink, res := run(t, Config{Trace: writeTrace(t, conv("s", 3, 0, 0, 8)), Targets: []string{srv.URL()}, IgnoreEOS: true, StampMode: mode})
			if res.Errors != 0 || res.Sent != 3 {
				t.Fatalf("result %+v", res)
			}
			st := sink.RunMeta().Stamps
			if st == nil || st.Mode != mode || st.Requested != mode {
				t.Fatalf("run stamps %+v, want mode %s", st, mode)
			}
			if kernel := mode != StampGoroutine; kernel != (st.KernelReads > 0) || kernel != (st.RealMinusMonoNs != 0) {
				t.Errorf("%s: %+v", mode, st)
			}
			// Kernel-offset has an observer. The observer process woke on
			// every arrival: its CPU is in the client's, and only with it
			// (the packet tap's is the client's own).
			if (mode == StampKernelOffset) != (st.Observer != "") {
				t.Errorf("%s: observer %q", mode, st.Observer)
			}
			h := sink.RunMeta().Health
			if observed := st.Observer == trace.ObserverProcess; h == nil || observed != (h.ObserverCPUSeconds > 0) || h.CPUSeconds < h.ObserverCPUSeconds {
				t.Errorf("%s: health %+v, want the observer's CPU in it exactly when there is one", mode, h)
			}
			log := map[string]mock.LogEntry{}
			for _, e := range srv.Log() {
				log[e.RequestID] = e
			}
			start := sink.RunMeta().StartMonoNs
			for _, r := range sink.Records() {
				if len(r.EventNs) != 9 || !(r.SentNs <= r.HeadersNs && r.HeadersNs <= r.EventNs[0]) || !slices.IsSorted(r.EventNs) {
					t.Errorf("%s: sent %d headers %d events %v", r.RequestID, r.SentNs, r.HeadersNs, r.EventNs)
				}
				// The mock writes event i after it logged the one before
				// (the headers for event 0), so the bytes cannot have
				// arrived before that. (The log of event i itself is taken
				// after its write returned: on a loaded machine it can be
				// later than the arrival by any amount.)
				e := log[r.RequestID]
				for i, w := range e.EventMonoNs {
					prev := e.HeadersMonoNs
					if i > 0 {
						prev = e.EventMonoNs[i-1]
					}
					if i < len(r.EventNs) && start+r.EventNs[i] < prev-st.OffsetWidthNs {
						t.Errorf("%s event %d: stamped %d, before the mock logged the write before it (%d; its own ended by %d)", r.RequestID, i, start+r.EventNs[i], prev, w)
					}
				}
			}
		})
	}
}

// TestKernelOffsetChunkedEvents: over a real HTTP/1.1 chunked response
// read as replay reads it, two events and the stream's tail
// that all queued before the body was read get their own arrivals: each
// event is stamped before the next write began. (The HTTP client reads a
// chunk's closing CRLF before it hands the chunk on: a cut at the event's
// blank line alone made it read on into the tail and stamp the last event
// with the tail's arrival.)
func TestKernelOffsetChunkedEvents(t *testing.T) {
	const gap = 40 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var began [3]int64 // before each write: event 0, event 1, the tail
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		req := make([]byte, 0, 1024)
		buf := make([]byte, 1024)
		for !bytes.Contains(req, []byte("\r\n\r\n")) {
			n, err := c.Read(buf)
			if err != nil {
				served <- err
				return
			}
			req = append(req, buf[:n]...)
		}
		chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
		parts := []string{
			"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk("data: {\"choices\":[{\"text\":\"a\"}]}\n\n"),
			chunk("data: {\"choices\":[{\"text\":\"b\"}]}\n\n"),
			chunk("data: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\n") + chunk("data: [DONE]\n\n") + "0\r\n\r\n",
		}
		for i, p := range parts {
			if i > 0 {
				time.Sleep(gap)
			}
			began[i] = clock.Mono()
			if _, err := c.Write([]byte(p)); err != nil {
				served <- err
				return
			}
		}
		served <- nil
		time.Sleep(time.Second) // keep the connection open while the client reads
	}()
	cs := newConnSet(&Config{StampMode: StampKernelOffset, Targets: []string{"http://x"}, DialTimeout: 5 * time.Second})
	defer cs.stamp.Close()
	hc := &h1Client{addr: ln.Addr().String(), dial: cs.dialer(nil)}
	req, resp := fasthttp.AcquireRequest(), new(h1Resp)
	defer fasthttp.ReleaseRequest(req)
	req.SetRequestURI("http://" + ln.Addr().String() + "/v1/completions")
	c, err := hc.get()
	if err != nil {
		t.Fatal(err)
	}
	if err := hc.roundTrip(c, req, resp, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	time.Sleep(gap) // the whole body queued before anything reads it
	if c.rx == nil || cs.stamp.Mode() != StampKernelOffset {
		t.Fatalf("conn %+v in mode %s: not a kernel-offset connection", c, cs.stamp.Mode())
	}
	s := record.NewStream(nil)
	if err := s.ReadBody(resp.Body(), make([]byte, 4096), c.stampFn); err != nil {
		t.Fatal(err)
	}
	resp.close(nil)
	var rec trace.Record
	s.Fill(&rec)
	if len(rec.EventNs) != 2 || !s.Done() {
		t.Fatalf("events %v, done %v", rec.EventNs, s.Done())
	}
	width := cs.stamp.Meta().OffsetWidthNs
	for i, at := range rec.EventNs {
		if at < began[i]-width || at >= began[i+1] {
			t.Errorf("event %d stamped %d: want after its write began (%d), before the next write (%d)", i, at, began[i], began[i+1])
		}
	}
}

// TestKernelStampCancelEndsWaitingReads: streams in a kernel stamp mode
// whose server fell silent after the first event wait for their next
// bytes; the run's cancel ends every one of those reads with
// errRunCanceled.
func TestKernelStampCancelEndsWaitingReads(t *testing.T) {
	const streams = 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for req := []byte(nil); !bytes.Contains(req, []byte("\r\n\r\n")); {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					req = append(req, buf[:n]...)
				}
				ev := "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(ev), ev)
				<-quit // silent until the test ends
			}()
		}
	}()
	for _, mode := range []string{StampKernel, StampKernelOffset} {
		t.Run(mode, func(t *testing.T) {
			cs := newConnSet(&Config{StampMode: mode, Targets: []string{"http://x"}, DialTimeout: 5 * time.Second})
			defer cs.stamp.Close()
			hc := &h1Client{addr: ln.Addr().String(), dial: cs.dialer(nil)}
			defer hc.closeIdle()
			first := make(chan struct{}, streams)
			ended := make(chan error, streams)
			for range streams {
				go func() {
					req, resp := fasthttp.AcquireRequest(), new(h1Resp)
					defer fasthttp.ReleaseRequest(req)
					req.SetRequestURI("http://" + ln.Addr().String() + "/v1/completions")
					c, err := hc.get()
					if err == nil {
						err = hc.roundTrip(c, req, resp, time.Time{})
					}
					if err != nil {
						first <- struct{}{}
						ended <- err
						return
					}
					if c.rx == nil {
						first <- struct{}{}
						ended <- fmt.Errorf("not a kernel-stamp connection")
						return
					}
					body := resp.Body()
					buf := make([]byte, 4096)
					n, err := body.Read(buf)
					first <- struct{}{}
					if err != nil || !bytes.Contains(buf[:n], []byte("data: ")) {
						ended <- fmt.Errorf("first read %q: %v", buf[:n], err)
						return
					}
					for err == nil {
						_, err = body.Read(buf) // waits: the server is silent
					}
					resp.close(err)
					ended <- err
				}()
			}
			for range streams {
				<-first
			}
			cs.cancel()
			deadline := time.After(10 * time.Second)
			for i := range streams {
				select {
				case err := <-ended:
					if !errors.Is(err, errRunCanceled) {
						t.Errorf("stream %d ended with %v, want %v", i, err, errRunCanceled)
					}
				case <-deadline:
					t.Fatalf("%d of %d waiting reads still wait 10 s after the cancel", streams-i, streams)
				}
			}
		})
	}
}
