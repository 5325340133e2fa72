//go:build linux

package stamp

import (
	"net"
	"testing"

	"github.com/tracekit/tracekit/trace"
)

// BenchmarkStampRead measures one event read on a loopback TCP
// connection in each stamp mode: the plain conn's Read (goroutine), an
// Conn's recvmsg with the receive stamp (kernel), and recvmsg + cut
// with the arrival observer registered (kernel-offset). The
// writer sends one 150-byte SSE event per read, in lockstep, so every
// read finds exactly one event. It reports ns/read and allocs per read
// (the hot path allocates none).
//
//	go test -run ^$ -bench StampRead -benchmem ./internal/stamp/
func BenchmarkStampRead(b *testing.B) {
	event := []byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok\"}}],\"usage\":{\"completion_tokens\":7}}\n\n")
	for _, mode := range []string{trace.StampGoroutine, trace.StampKernel, trace.StampKernelOffset} {
		b.Run(mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			srv, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			st := New(mode, 1, 0)
			defer st.Close()
			var r net.Conn = nc
			if mode != trace.StampGoroutine {
				rx, err := newConn(nc, mode == trace.StampKernelOffset, st)
				if err != nil {
					b.Fatal(err)
				}
				r = rx
			}
			defer r.Close()
			buf := make([]byte, 4096)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := srv.Write(event); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < len(event); {
					n, err := r.Read(buf)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
		})
	}
}
