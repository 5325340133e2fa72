//go:build linux

package replay

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// bindNoPort defers the choice of a bound socket's source port to
// connect, which then needs the 4-tuple unique only (IP_BIND_ADDRESS_NO_PORT):
// without it, bind would take a port for the address alone.
func bindNoPort(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	}); err != nil {
		return err
	}
	return serr
}
