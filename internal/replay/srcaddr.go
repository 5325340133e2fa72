package replay

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// A TCP connection to one address and port needs a source port of its own
// from the ephemeral range (about 28,000 by default), so one source address
// cannot hold 100,000 streams to one server. On loopback every 127.x.y.z
// address is this host: once a run holds more connections than one source
// address has ports for, further connections to a loopback target take
// the next source address, 127.0.0.2, 127.0.0.3, ..., each with a range of
// its own. A run below that threshold dials exactly as before.

// portsPerSource is how many live connections one source address takes
// before the next: nine tenths of the ephemeral range, leaving ports for
// other programs.
var portsPerSource = sync.OnceValue(func() int {
	lo, hi := 32768, 60999 // Linux's default range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			z, errZ := strconv.Atoi(f[1])
			if errA == nil && errZ == nil && z > a {
				lo, hi = a, z
			}
		}
	}
	return max(1, (hi-lo+1)*9/10)
})

// maxSources bounds the source addresses used: 127.0.0.1 to 127.0.0.254.
const maxSources = 254

// sourceFor is the local address of a new connection to addr (host:port)
// when live connections are open already: nil (the kernel chooses, as
// always) below perSource, else 127.0.0.k for a loopback IPv4 target,
// k = 1 + live/perSource, at most maxSources.
func sourceFor(addr string, live, perSource int) *net.TCPAddr {
	if live < perSource || perSource < 1 {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Is4() || !ip.IsLoopback() {
		return nil
	}
	k := min(1+live/perSource, maxSources)
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(k))}
}
