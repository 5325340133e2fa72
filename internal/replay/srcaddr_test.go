package replay

import (
	"net"
	"testing"
	"time"
)

// TestSourceAddressesSpread: connections to a loopback target beyond the
// ports one source address has come from the next loopback addresses, as
// the server sees them; below that they come from the kernel's choice.
func TestSourceAddressesSpread(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan string, 8)
	go func() { // owned by ln: ends when it closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peers <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			defer c.Close()
		}
	}()
	cs := newConnSet(&Config{StampMode: StampGoroutine, Targets: []string{"http://x"}, DialTimeout: 5 * time.Second})
	defer cs.stamp.Close()
	cs.perSource = 2
	dial := cs.dialer(nil)
	var got []string
	for range 5 {
		c, err := dial(ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case p := <-peers:
			got = append(got, p)
		case <-time.After(30 * time.Second):
			t.Fatal("the listener saw no connection within 30 s")
		}
	}
	want := []string{"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.3"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("the server saw connections from %v, want %v", got, want)
		}
	}
}

func TestSourceFor(t *testing.T) {
	for _, c := range []struct {
		addr      string
		live, per int
		want      string
	}{
		{"127.0.0.1:8000", 10, 100, ""},
		{"127.0.0.1:8000", 100, 100, "127.0.0.2"},
		{"127.0.0.1:8000", 250, 100, "127.0.0.3"},
		{"127.0.0.1:8000", 1 << 30, 100, "127.0.0.254"},
		{"[::1]:8000", 500, 100, ""},     // only 127/8 is a range of addresses
		{"10.0.0.1:8000", 500, 100, ""},  // not this host
		{"localhost:8000", 500, 100, ""}, // names are left to the resolver
	} {
		got := ""
		if a := sourceFor(c.addr, c.live, c.per); a != nil {
			got = a.IP.String()
		}
		if got != c.want {
			t.Errorf("sourceFor(%s, %d, %d) = %q, want %q", c.addr, c.live, c.per, got, c.want)
		}
	}
	if n := portsPerSource(); n < 1000 {
		t.Errorf("ports per source address %d: the ephemeral range is read wrong", n)
	}
}
